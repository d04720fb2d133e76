"""A client tool's result carries files through the HTTP API, on both databases: by upload id or
inline data URL, stored by reference on the completed call, sent inside the tool result where the
provider takes images there (Anthropic's ``tool_result`` content, the Responses API's
``function_call_output``), a note where it does not (Chat Completions' tool messages); a bad
reference is a 422 naming the item that stores nothing, and the file stays while referred to."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from app.providers.png import draw_png
from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse
from tests.providers import wire
from tests.providers.anthropic_rules import Registry, anthropic_violations, refusal
from tests.providers.attachment_rules import chat_check
from tests.providers.fake_server import FakeServer, Received, Reply
from tests.providers.responses_rules import Issued, Violation, error_body, responses_violations

PNG = draw_png(64, 48, "chart")
B64 = base64.b64encode(PNG).decode()
CHART = {
    "name": "draw_chart",
    "description": "Draw a chart.",
    "parameters": {"type": "object", "properties": {}},
}


def _check(received: Received) -> Reply | None:
    if received.path.endswith("/messages"):
        found = anthropic_violations(received.body, Registry())
        return refusal(found[0]) if found else None
    if received.path.endswith("/responses"):
        issues = responses_violations(received.body, Issued())
        return Reply(400, error_body(Violation(issues[0]))) if issues else None
    return chat_check(received)


def _replies(api: str) -> list[Reply]:
    """A call of ``draw_chart``, then a text once the result came."""
    if api == "anthropic":
        call = [wire.an_start(), *wire.an_tool_block(0, "toolu_1", "draw_chart", "{}")]
        return [
            Reply(events=[*call, *wire.an_stop("tool_use")]),
            Reply(events=wire.an_text("A rising line.")),
        ]
    if api == "responses":
        item = wire.rs_call_item("fc_1", "call_1", "draw_chart", "{}")
        events = [*wire.rs_created(), *wire.rs_call(0, item), wire.rs_completed(output=[item])]
        return [Reply(events=events), Reply(events=wire.rs_text("A rising line."))]
    call = [
        wire.oa_chunk({"role": "assistant", "content": None}),
        wire.oa_call(0, "call_1", "draw_chart", "{}"),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.OA_DONE,
    ]
    return [Reply(events=call), Reply(events=wire.oa_text("A rising line."))]


def _settings(database_url: str, api: str, url: str) -> Settings:
    keys: dict[str, Any] = {"anthropic_api_key": "sk-ant-test", "anthropic_base_url": url}
    if api != "anthropic":
        keys = {"openai_api_key": "sk-test", "openai_base_url": f"{url}/v1", "openai_api": api}
    return Settings(database_url=database_url, sse_ping_seconds=0, **keys)


def _sent(api: str, body: dict[str, Any]) -> Any:
    """What the follow-up request carries as the call's result."""
    if api == "anthropic":
        blocks = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict)]
        return next(b for b in blocks if b["type"] == "tool_result")["content"]
    if api == "responses":
        return next(i for i in body["input"] if i.get("type") == "function_call_output")["output"]
    return next(m for m in body["messages"] if m["role"] == "tool")["content"]


async def _pending_call(client: httpx.AsyncClient, api: str) -> tuple[str, str]:
    provider = "anthropic" if api == "anthropic" else "openai"
    created = await client.post(
        "/conversations", json={"config": {"provider": provider, "client_tools": [CHART]}}
    )
    assert created.status_code == 201, created.text
    conv = created.json()["id"]
    user = {"messages": [{"role": "user", "text": "Chart it."}]}
    events = parse((await client.post(f"/conversations/{conv}/stream", json=user)).text)
    action = next(e for e in events if e.name == "requires_action")
    return conv, action.data["tool_calls"][0]["tool_call_id"]


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
async def test_a_tool_result_carries_an_image_to_the_provider(database_url: str, api: str) -> None:
    async with FakeServer(check=_check) as upstream:
        upstream.script(*_replies(api))
        async with app_client(_settings(database_url, api, upstream.url)) as client:
            upload = await client.post("/files", files={"file": ("chart.png", PNG)})
            file_id = upload.json()["id"]
            conv, call_id = await _pending_call(client, api)
            result = {
                "role": "tool",
                "tool_call_id": call_id,
                "result": "the chart",
                "attachments": [{"file_id": file_id}],
            }
            response = await client.post(
                f"/conversations/{conv}/stream", json={"messages": [result]}
            )
            assert response.status_code == 200, response.text
            assert parse(response.text)[-1].data["status"] == "completed", response.text
            doc = (await client.get(f"/conversations/{conv}/messages")).json()
            refused = await client.delete(f"/files/{file_id}")
    call = next(m for m in doc["messages"] if m["type"] == "ToolCallMessage")
    assert call["attachments"] == [
        {
            "file_id": file_id,
            "media_type": "image/png",
            "name": "chart.png",
            "size": len(PNG),
            "width": 64,
            "height": 48,
        }
    ]
    assert refused.status_code == 409  # the completed call refers to it
    assert len(upstream.bodies) == 2  # nothing refused, nothing retried
    sent = _sent(api, upstream.bodies[1])
    if api == "anthropic":
        assert sent[0] == {"type": "text", "text": "the chart"}
        image = {"type": "base64", "media_type": "image/png", "data": B64}
        assert sent[1] == {"type": "image", "source": image}
    elif api == "responses":
        assert sent[1]["type"] == "input_image"
        assert sent[1]["image_url"] == f"data:image/png;base64,{B64}"
    else:  # chat completions takes no image in a tool message: the note
        assert sent.startswith("the chart\n[attached: chart.png")


async def test_an_inline_file_is_stored_and_a_bad_reference_is_a_422(database_url: str) -> None:
    api = "anthropic"
    async with FakeServer(check=_check) as upstream:
        upstream.script(*_replies(api))
        async with app_client(_settings(database_url, api, upstream.url)) as client:
            conv, call_id = await _pending_call(client, api)
            inline = {"data": f"data:image/png;base64,{B64}", "name": "inline.png"}
            bad = {
                "role": "tool",
                "tool_call_id": call_id,
                "result": "x",
                "attachments": [inline, {"file_id": "f" * 32}],
            }
            refused = await client.post(f"/conversations/{conv}/deltas", json={"messages": [bad]})
            files_after_refusal = (await client.get("/files")).json()["items"]
            good = {**bad, "attachments": [inline]}
            response = await client.post(f"/conversations/{conv}/stream", json={"messages": [good]})
            assert response.status_code == 200, response.text
            doc = (await client.get(f"/conversations/{conv}/messages")).json()
            stored = (await client.get("/files")).json()["items"]
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["loc"] == [
        "body",
        "messages",
        0,
        "attachments",
        1,
        "file_id",
    ]
    assert files_after_refusal == []  # the inline file before it was not stored either
    call = next(m for m in doc["messages"] if m["type"] == "ToolCallMessage")
    assert [a["name"] for a in call["attachments"]] == ["inline.png"]
    assert [f["id"] for f in stored] == [call["attachments"][0]["file_id"]]
    assert _sent(api, upstream.bodies[1])[1]["type"] == "image"
