"""`useChat`'s flows with the real `ai` package (Node) against a real uvicorn, on both
databases: js/tests/scenarios.mjs drives them with `DefaultChatTransport({api, headers})`
only, validates every chunk with the package's own schema; here, what Parley stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.api.conftest import LiveServer, wait_for
from tests.frontend.conftest import API_KEY, AUTH, NodeRunner, create

CONFIG = {
    "reasoning": {"effort": "low"},  # the offline model thinks first
    "tools": ["add_numbers"],
    "client_tools": [{"name": "get_location", "parameters": {"type": "object", "properties": {}}}],
}


@pytest.fixture
def served(live_server: Callable[..., LiveServer]) -> LiveServer:
    return live_server(api_keys=API_KEY, offline_delay_ms=10)


async def stored(http: httpx.AsyncClient, conv_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/conversations/{conv_id}/messages", headers=AUTH)
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


async def runs(http: httpx.AsyncClient, conv_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await http.get(f"/conversations/{conv_id}/runs", headers=AUTH)
    ).json()["items"]
    return items


async def test_send_streams_reasoning_and_a_server_tool(
    served: LiveServer, node: type[NodeRunner]
) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http, config=CONFIG)
        summary = await node(served.url)("send", conv_id)
        messages = await stored(http, conv_id)
    kinds = [(m["type"], m["role"]) for m in messages]
    assert kinds == [
        ("TextMessage", "user"),
        ("ReasoningMessage", "assistant"),
        ("ToolCallMessage", "assistant"),
        ("ReasoningMessage", "assistant"),
        ("TextMessage", "assistant"),
        ("TextMessage", "user"),
        ("ReasoningMessage", "assistant"),
        ("TextMessage", "assistant"),
    ]
    assert messages[2]["result"] == 3
    # an id names the position of a message (an assistant reply: its first message)
    assert summary["ids"] == [f"{conv_id}-{i}" for i in (0, 1, 5, 6)]


async def test_stop_cancels_the_run_and_stores_the_partial_reply(
    live_server: Callable[..., LiveServer], node: type[NodeRunner]
) -> None:
    served = live_server(api_keys=API_KEY, offline_delay_ms=20)
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http)
        summary = await node(served.url)("stop", conv_id)

        async def aborted() -> list[dict[str, Any]] | None:
            found = await runs(http, conv_id)
            return found if found and found[0]["status"] == "aborted" else None

        assert await wait_for(aborted, within=10)
        reply = (await stored(http, conv_id))[-1]
    assert reply["role"] == "assistant" and reply.get("incomplete") is True
    assert reply["text"].startswith(summary["seen"])
    assert len(reply["text"]) < len(" ".join(f"word{i}" for i in range(200)))


async def test_resume_after_a_dropped_connection_gets_the_whole_reply(
    served: LiveServer, node: type[NodeRunner]
) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http)
        summary = await node(served.url)("resume", conv_id)
        found = await runs(http, conv_id)
    assert summary == {"resumed": 200}
    assert [(r["status"], r["on_disconnect"]) for r in found] == [("completed", "continue")]


async def test_resume_on_load_when_idle_is_204_and_starts_nothing(
    served: LiveServer, node: type[NodeRunner]
) -> None:
    history = [{"role": "user", "text": "hi there"}, {"role": "assistant", "text": "hello"}]
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http, messages=history)
        assert await node(served.url)("idle", conv_id) == {"statuses": [204]}
        assert await runs(http, conv_id) == []


async def test_regenerate_rewinds_the_last_reply_and_runs_again(
    served: LiveServer, node: type[NodeRunner]
) -> None:
    history = [{"role": "user", "text": "hi there"}, {"role": "assistant", "text": "old reply"}]
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http, messages=history)
        assert await node(served.url)("regenerate", conv_id) == {"text": "hi there"}
        messages = await stored(http, conv_id)
        assert len(await runs(http, conv_id)) == 1
    assert [(m["role"], m["text"]) for m in messages] == [
        ("user", "hi there"),
        ("assistant", "hi there"),
    ]


async def test_a_client_tool_answered_with_add_tool_result(
    served: LiveServer, node: type[NodeRunner]
) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http, config=CONFIG)
        await node(served.url)("client-tool", conv_id)
        messages = await stored(http, conv_id)
        statuses = [r["status"] for r in await runs(http, conv_id)]
    call = next(m for m in messages if m["type"] == "ToolCallMessage")
    assert call["tool_name"] == "get_location" and call["result"] == {"city": "Paris"}
    assert "pending" not in call
    assert messages[-1]["text"] == '{"city": "Paris"}'
    assert statuses == ["completed", "requires_action"]  # newest first
