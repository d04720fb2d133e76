"""Server-side tool rounds run end to end: offline and scripted adapters, limits, conversions."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import Any

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    LLMPromptBuilder,
    MessageAppended,
    MessageList,
    MessageStop,
    ProviderError,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolRoundLimitError,
    ToolUse,
)
from tests.domain.domain_support import (
    ScriptedAdapter,
    conversation_on,
    text_reply,
    texts,
    tool_reply,
)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def fetch(url: str) -> dict[str, Any]:
    """Fetch a page."""
    await asyncio.sleep(0)
    return {"url": url, "status": 200}


def explode(reason: str) -> None:
    """Always fails."""
    raise RuntimeError(f"cannot: {reason}")


async def crawl(depth: int) -> str:
    """Takes far too long."""
    await asyncio.sleep(30)
    return "never"


def grind(n: int) -> int:
    """A slow sync tool."""
    time.sleep(0.3)
    return n


def snapshot() -> dict[str, Any]:
    """Not JSON at all."""
    return {"at": dt.datetime(2024, 1, 2, 3, 4, 5), "ids": {3, 1}, "raw": b"\x00\xff"}


async def test_sync_tool_round_with_the_offline_adapter(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(add).request('call add {"a": 2, "b": 40}').prompt_conversation()
    call, answer = [m async for m in conversation]
    assert call == ToolCallMessage("add", "call_1", {"a": 2, "b": 40}, result=42)
    assert answer == TextMessage("42", Role.ASSISTANT)


async def test_async_tool_round_with_the_offline_adapter(llm: LLMPromptBuilder) -> None:
    reply = await llm.tools(fetch).request('call fetch {"url": "https://x"}').prompt()
    assert json.loads(reply) == {"url": "https://x", "status": 200}


async def test_a_raising_tool_becomes_the_calls_error_sent_back(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(explode).request('call explode {"reason": "x"}').prompt_conversation()
    call, answer = [m async for m in conversation]
    assert isinstance(call, ToolCallMessage)
    assert call.error == "RuntimeError: cannot: x" and call.result is None
    assert answer.text == "Error: RuntimeError: cannot: x"


async def test_a_tool_use_chunk_without_an_id_as_seed_004_writes_it_gets_one() -> None:
    reply = [
        ToolUse(tool_name="add", params={"a": 1, "b": 2}),
        ToolUse(tool_name="add", params={"a": 3, "b": 4}),
        MessageStop("tool_use"),
    ]
    adapter = ScriptedAdapter([reply, text_reply("3 and 7.")])
    conversation = conversation_on(adapter, MessageList([TextMessage("add twice")]), tools=())
    conversation.apply_config_deltas({"tools": [add]})
    first, second, answer = [m async for m in conversation]
    assert isinstance(first, ToolCallMessage) and isinstance(second, ToolCallMessage)
    assert (first.result, second.result) == (3, 7)
    assert first.tool_call_id.startswith("call_") and first.tool_call_id != second.tool_call_id
    assert answer == TextMessage("3 and 7.", Role.ASSISTANT)
    assert MessageList.from_dict(conversation.messages.to_dict()) == conversation.messages


@pytest.mark.parametrize("name", ["", "  "])
async def test_a_tool_call_without_a_name_is_a_bad_response_and_nothing_is_stored(
    name: str,
) -> None:
    adapter = ScriptedAdapter([[ToolUse(name, {}, "c1"), MessageStop("tool_use")]])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    with pytest.raises(ProviderError, match="a tool call has no tool name") as caught:
        _ = [m async for m in conversation]
    assert caught.value.code == "bad_response" and caught.value.retryable
    assert list(conversation.messages) == [TextMessage("hi")]


@pytest.mark.parametrize("call_id", ["", " "])
async def test_a_tool_call_with_a_blank_id_gets_one_so_the_history_reads_back(
    call_id: str,
) -> None:
    reply = [ToolUse("add", {"a": 1, "b": 1}, call_id), MessageStop("tool_use")]
    adapter = ScriptedAdapter([reply, text_reply("2")])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    conversation.apply_config_deltas({"tools": [add]})
    call, _ = [m async for m in conversation]
    assert isinstance(call, ToolCallMessage) and call.tool_call_id.startswith("call_")
    assert MessageList.from_dict(conversation.messages.to_dict()) == conversation.messages


async def test_the_error_reaches_the_model_in_its_next_request() -> None:
    adapter = ScriptedAdapter(
        [tool_reply("Trying.", ("explode", {"reason": "y"}, "c1")), text_reply("Sorry.")]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("do it")]))
    conversation.apply_config_deltas({"tools": [explode]})
    _ = [m async for m in conversation]
    sent = adapter.requests[1].messages
    assert isinstance(sent[1], ToolCallMessage) and sent[1].error == "RuntimeError: cannot: y"
    assert sent[1].result_text() == "Error: RuntimeError: cannot: y"


@pytest.mark.parametrize(("tool", "params"), [(crawl, {"depth": 1}), (grind, {"n": 1})])
async def test_a_tool_that_times_out_gets_a_timeout_error(tool: Any, params: Any) -> None:
    adapter = ScriptedAdapter([tool_reply("", (tool.__name__, params, "c1")), text_reply("ok")])
    conversation = conversation_on(adapter, MessageList([TextMessage("go")]), tool_timeout=0.05)
    conversation.apply_config_deltas({"tools": [tool]})
    call, _ = [m async for m in conversation]
    assert call.error == f"TimeoutError: tool '{tool.__name__}' took longer than 0.05 s"


async def test_an_unknown_tool_is_an_error_not_a_crash(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("call nowhere {}").prompt_conversation()
    call, answer = [m async for m in conversation]
    assert call.error == "Tool 'nowhere' not found"
    assert answer.text == "Error: Tool 'nowhere' not found"


async def test_max_tool_rounds_exceeded_raises_and_keeps_the_results() -> None:
    loop = [tool_reply(f"round {i}", ("add", {"a": i, "b": 0}, f"c{i}")) for i in range(3)]
    adapter = ScriptedAdapter(loop)
    conversation = conversation_on(adapter, MessageList([TextMessage("go")]), max_tool_rounds=2)
    conversation.apply_config_deltas({"tools": [add]})
    seen = []
    with pytest.raises(ToolRoundLimitError, match="max_tool_rounds=2") as caught:
        async for message in conversation:
            seen.append(message)
    assert caught.value.max_tool_rounds == 2
    assert [m.result for m in seen] == [0, 1]
    assert conversation.messages[-1] == TextMessage("round 2", Role.ASSISTANT, incomplete=True)
    assert adapter.closed == adapter.opened == 3


async def test_max_tool_rounds_zero_allows_no_tool_round() -> None:
    adapter = ScriptedAdapter([tool_reply("", ("add", {"a": 1, "b": 1}, "c1"))])
    conversation = conversation_on(adapter, MessageList([TextMessage("go")]), max_tool_rounds=0)
    with pytest.raises(ToolRoundLimitError):
        _ = [m async for m in conversation]
    assert texts(conversation.messages) == ["go"]


async def test_non_json_results_are_converted_and_persist(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(snapshot).request("call snapshot {}").prompt_conversation()
    call, answer = [m async for m in conversation]
    expected = {"at": "2024-01-02T03:04:05", "ids": [1, 3], "raw": "AP8="}
    assert call.result == expected
    assert json.loads(answer.text) == expected
    document = json.loads(json.dumps(conversation.messages.to_dict()))
    assert document["messages"][1]["result"] == expected
    assert MessageList.from_dict(document) == conversation.messages


async def test_several_calls_from_one_reply_are_stored_and_announced() -> None:
    adapter = ScriptedAdapter(
        [
            tool_reply("Both.", ("add", {"a": 1, "b": 2}, "c1"), ("fetch", {"url": "u"}, "c2")),
            text_reply("3 and", " 200"),
        ]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("go")]))
    conversation.apply_config_deltas({"tools": [add, fetch]})
    events = [e async for e in conversation.stream()]
    kinds = [e.kind for e in events]
    assert kinds == [
        "content_block_start", "content_block_delta", "content_block_stop", "tool_use",
        "tool_use", "message_stop", "message", "message",
        "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_stop", "message",
    ]  # fmt: skip
    appended = [e for e in events if isinstance(e, MessageAppended)]
    assert [e.index for e in appended] == [1, 2, 3]
    first, second, final = (e.message for e in appended)
    assert first == ToolCallMessage("add", "c1", {"a": 1, "b": 2}, result=3, message="Both.")
    assert second == ToolCallMessage("fetch", "c2", {"url": "u"}, {"url": "u", "status": 200})
    assert final == TextMessage("3 and 200", Role.ASSISTANT)
    assert isinstance(events[0], ContentBlockStart) and isinstance(events[3], ToolUse)
    assert isinstance(events[1], ContentBlockDelta) and isinstance(events[2], ContentBlockStop)
    assert isinstance(events[5], MessageStop) and events[5].stop_reason == "tool_use"
