"""A client-tool loop with thinking through the HTTP API, on both databases: the app's
``anthropic`` provider points at the fake thinking model, which refuses (as Anthropic does) a
follow-up whose assistant turn does not start with the thinking it issued."""

from __future__ import annotations

from typing import Any

import httpx

from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import Event, parse
from tests.providers.anthropic_rules import ThinkingModel
from tests.providers.fake_server import FakeServer

WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def _stream(client: httpx.AsyncClient, conv_id: str, body: dict[str, Any]) -> list[Event]:
    response = await client.post(f"/conversations/{conv_id}/stream", json=body)
    assert response.status_code == 200, response.text
    return parse(response.text)


async def test_a_client_tool_loop_with_thinking_runs_on_the_rule_enforcing_fake(
    database_url: str,
) -> None:
    model = ThinkingModel()
    async with FakeServer(check=model.check, responder=model.respond) as upstream:
        settings = Settings(
            database_url=database_url,
            sse_ping_seconds=0,
            anthropic_api_key="sk-ant-test",
            anthropic_base_url=upstream.url,
        )
        async with app_client(settings) as client:
            config = {
                "provider": "anthropic",
                "reasoning": {"effort": "high"},
                "client_tools": [WEATHER],
            }
            created = await client.post("/conversations", json={"config": config})
            assert created.status_code == 201, created.text
            conv_id = created.json()["id"]

            user = {"role": "user", "text": "Weather in Paris?"}
            events = await _stream(client, conv_id, {"messages": [user]})
            assert events[-1].data["status"] == "requires_action", events[-1]
            starts = [e.data for e in events if e.name == "content_block_start"]
            assert {"index": 0, "type": "reasoning"} in starts
            action = next(e for e in events if e.name == "requires_action")
            call_id = action.data["tool_calls"][0]["tool_call_id"]

            result = {"role": "tool", "tool_call_id": call_id, "result": {"temp_c": 19}}
            events = await _stream(client, conv_id, {"messages": [result]})
            assert events[-1].data["status"] == "completed", [e.data for e in events]
            messages = (await client.get(f"/conversations/{conv_id}/messages")).json()

    assert [r.body["thinking"] for r in upstream.received] == [{"type": "adaptive"}] * 2
    assert len(upstream.received) == 2  # nothing refused, nothing retried
    replayed = upstream.bodies[1]["messages"][1]["content"][0]
    signature, text = next(iter(model.issued.thinking.items()))
    assert replayed == {"type": "thinking", "thinking": text, "signature": signature}
    types = [m["type"] for m in messages["messages"]]
    assert types == [
        "TextMessage", "ReasoningMessage", "ToolCallMessage", "ReasoningMessage", "TextMessage",
    ]  # fmt: skip
    reasoning = messages["messages"][1]
    assert (reasoning["text"], reasoning["provider"]) == (text, "anthropic")
    assert reasoning["payload"] == {"type": "thinking", "signature": signature}
    assert messages["messages"][-1]["text"] == 'Done: {"temp_c": 19}'
