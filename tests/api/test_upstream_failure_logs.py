"""An upstream 401 during a real run: one log line naming the request, conversation and run, with
provider, status, code and attempt, and neither the key nor any message text."""

from __future__ import annotations

import io
import json

from app.observability.logs import configure_logging
from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse
from tests.providers import wire
from tests.providers.fake_server import FakeServer, Reply

KEY = "sk-test-do-not-log"


async def test_a_401_in_a_run_is_logged_once_with_its_ids(database_url: str) -> None:
    lines = io.StringIO()
    async with FakeServer() as upstream:
        body = wire.oa_error_body(f"Incorrect API key provided: {KEY}", "invalid_request_error")
        upstream.script(Reply(401, body))
        settings = Settings(
            database_url=database_url,
            sse_ping_seconds=0,
            openai_api_key=KEY,
            openai_base_url=f"{upstream.url}/v1",
            log_format="json",
        )
        async with app_client(settings) as client:
            configure_logging("json", "INFO", stream=lines)  # after create_app's own set-up
            conv_id = (await client.post("/conversations", json={})).json()["id"]
            run = await client.post(
                f"/conversations/{conv_id}/stream",
                json={"messages": [{"role": "user", "text": "a private question"}]},
                headers={"X-Request-ID": "req-run-401"},
            )
    configure_logging("text", "WARNING")
    events = parse(run.text)
    assert [e.data["code"] for e in events if e.name == "error"] == ["authentication"]
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    [line] = [entry for entry in logged if entry["logger"] == "app.providers.base"]
    assert (line["provider"], line["status"], line["code"], line["attempt"]) == (
        "openai",
        401,
        "authentication",
        1,
    )
    assert line["request_id"] == "req-run-401" and line["conversation_id"] == conv_id
    assert line["run_id"] == events[0].data["run_id"]
    text = lines.getvalue()
    assert KEY not in text and "Incorrect API key" not in text and "private question" not in text
