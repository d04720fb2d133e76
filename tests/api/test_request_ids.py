"""X-Request-ID: taken or made, returned on every response (problems and streams too), and the
``instance`` of a problem; an unexpected error is a logged 500 problem that carries it."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import httpx
import pytest

from app.main import create_app
from app.observability.logs import configure_logging
from app.settings import Settings
from tests.api.conftest import app_client


async def test_a_request_id_sent_in_is_echoed(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"X-Request-ID": "abc.DEF_1-2~3"})
    assert response.headers["x-request-id"] == "abc.DEF_1-2~3"


@pytest.mark.parametrize(
    "sent", [None, b"", b"has space", b"x" * 129, b"semi;colon", "ünï".encode("latin-1")]
)
async def test_a_missing_or_unsafe_id_is_replaced(
    client: httpx.AsyncClient, sent: bytes | None
) -> None:
    headers = {} if sent is None else {"X-Request-ID": sent}
    response = await client.get("/healthz", headers=headers)
    made = response.headers["x-request-id"]
    assert made.encode() != sent and len(made) == 32 and made.isalnum()


async def test_problems_and_streams_carry_the_id(client: httpx.AsyncClient) -> None:
    missing = await client.get("/conversations/nope", headers={"X-Request-ID": "req-404"})
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "req-404"
    assert missing.json()["instance"] == "req-404"
    headers = {"X-Request-ID": "r-400", "content-type": "application/json"}
    invalid = await client.post("/conversations", content=b"{", headers=headers)
    assert invalid.status_code == 400 and invalid.json()["instance"] == "r-400"

    conv_id = (await client.post("/conversations", json={})).json()["id"]
    body = {"messages": [{"role": "user", "text": "hi"}]}
    streamed = await client.post(
        f"/conversations/{conv_id}/stream", json=body, headers={"X-Request-ID": "req-sse"}
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["x-request-id"] == "req-sse"


async def test_an_unexpected_error_is_a_logged_500_problem(settings: Settings) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    app = create_app(settings)  # the whole middleware stack, plus a route that fails
    app.add_api_route("/broken", broken)
    lines = io.StringIO()
    configure_logging("json", "INFO", stream=lines)
    try:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            response = await client.get("/broken", headers={"X-Request-ID": "req-500"})
    finally:
        configure_logging("text", "WARNING")
        await app.state.services.database.dispose()
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-request-id"] == "req-500"
    assert response.json()["instance"] == "req-500"
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    errors = [line for line in logged if line["level"] == "ERROR"]
    assert len(errors) == 1 and errors[0]["request_id"] == "req-500"
    assert "RuntimeError: boom" in errors[0]["exception"]


@pytest.mark.parametrize("cors_origins", ["", "https://app.example"])
async def test_answers_of_the_origin_check_and_cors_carry_the_id_and_are_counted(
    database_url: str, cors_origins: str
) -> None:
    """The Origin check and CORS ran outside the request middleware: their 403s had no
    X-Request-ID and no ``instance``, and neither they nor preflights reached the metrics."""
    settings = Settings(database_url=database_url, cors_origins=cors_origins)
    async with app_client(settings) as client:
        refused = await client.get(
            "/conversations", headers={"Origin": "https://evil.example", "X-Request-ID": "r-403"}
        )
        preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
        answered = await client.options("/conversations", headers=preflight)
        metrics = (await client.get("/metrics")).text
    assert refused.status_code == 403 and refused.headers["x-request-id"] == "r-403"
    assert refused.json()["instance"] == "r-403"
    assert len(answered.headers["x-request-id"]) == 32
    counted = 'parley_http_requests_total{method="GET",route="/conversations",status="403"}'
    assert counted in metrics
    assert 'parley_http_requests_total{method="OPTIONS",route="/conversations"' in metrics


def test_alembic_set_up_lines_are_not_logged_at_info() -> None:
    """The first /readyz of a process reads the schema's revision through Alembic, which logs
    seven INFO lines about its plugins: noise for an operator, kept below the log level."""
    configure_logging("json", "INFO", stream=io.StringIO())
    try:
        assert not logging.getLogger("alembic.runtime.plugins").isEnabledFor(logging.INFO)
        assert logging.getLogger("alembic.runtime.plugins").isEnabledFor(logging.WARNING)
        assert logging.getLogger("app.runs").isEnabledFor(logging.INFO)
    finally:
        configure_logging("text", "WARNING")


def test_python_warnings_are_logged_in_the_log_format() -> None:
    """A library's ``warnings.warn`` is a log line like the others (one JSON object), not
    Python's own two lines of text on stderr among them. In a process of its own: pytest
    records warnings itself."""
    code = (
        "import warnings\n"
        "from app.observability.logs import configure_logging\n"
        "configure_logging('json', 'INFO')\n"
        'warnings.warn("a library\'s warning", UserWarning, stacklevel=1)\n'
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    [line] = [json.loads(line) for line in done.stderr.splitlines()]
    assert line["logger"] == "py.warnings" and line["level"] == "WARNING"
    assert "a library's warning" in line["message"]
