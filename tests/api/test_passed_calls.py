"""A pending tool call that the conversation has moved past (a message follows it) is
interrupted, not pending, however the conversation was loaded: it runs again (issue 31).

Through httpx on both databases: ``POST /conversations`` with a serialized document and
``POST /conversations/import`` in OpenAI format, then ``POST …/stream``.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.domain import MessageList, TextMessage, ToolCallMessage
from app.domain.repair import INTERRUPTED
from tests.api.sse import parse

MOVED_PAST = MessageList(
    [
        TextMessage("what time is it?"),
        ToolCallMessage("clock", "c1", {"tz": "UTC"}, pending=True),
        TextMessage("never mind: say hello"),
    ]
)


async def _runs_to_completion(client: httpx.AsyncClient, created: httpx.Response) -> None:
    assert created.status_code == 201, created.text
    conversation = created.json()
    assert conversation["status"] == "idle" and conversation["pending_tool_call_ids"] == []
    stream = await client.post(f"/conversations/{conversation['id']}/stream", json={})
    assert stream.status_code == 200, stream.text
    events = parse(stream.text)
    assert events[-1].name == "done" and events[-1].data["status"] == "completed"
    stored = (await client.get(f"/conversations/{conversation['id']}/messages")).json()
    call: dict[str, Any] = stored["messages"][1]
    assert call["tool_call_id"] == "c1" and call["error"] == INTERRUPTED
    assert not call.get("pending") and call["result"] is None


async def test_a_created_conversation_past_a_pending_call_runs(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/conversations", json={"messages": MOVED_PAST.to_dict(), "config": {"provider": "offline"}}
    )
    await _runs_to_completion(client, created)


async def test_an_openai_import_past_a_pending_call_runs(client: httpx.AsyncClient) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
    document = {
        "messages": [
            {"role": "user", "content": "what time is it?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "never mind: say hello"},
        ],
        "config": {"provider": "offline"},
    }
    created = await client.post("/conversations/import?format=openai", json=document)
    await _runs_to_completion(client, created)


async def test_a_pending_call_at_the_end_still_waits(client: httpx.AsyncClient) -> None:
    history = MessageList([*list(MOVED_PAST)[:2]])
    created = await client.post(
        "/conversations", json={"messages": history.to_dict(), "config": {"provider": "offline"}}
    )
    assert created.json()["pending_tool_call_ids"] == ["c1"]
    stream = await client.post(f"/conversations/{created.json()['id']}/stream", json={})
    assert stream.status_code == 409 and stream.json()["code"] == "tool_results_required"
