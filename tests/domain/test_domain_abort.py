"""Stopping a run early, at both grains, and provider failures: the conversation stays whole."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from app.domain import (
    ContentBlockDelta,
    LLMConversation,
    MessageList,
    ProviderError,
    Role,
    TextMessage,
    ToolCallMessage,
)
from tests.domain.domain_support import (
    HANG,
    ScriptedAdapter,
    conversation_on,
    text_reply,
    texts,
    tool_reply,
)


def ping() -> str:
    """Answers pong."""
    return "pong"


def stalled(*deltas: str) -> list[object]:
    """A text reply that stops after ``deltas`` and never goes on."""
    reply = text_reply(*deltas)
    return [*reply[: 1 + len(deltas)], HANG]


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def deltas_sent(adapter: ScriptedAdapter) -> int:
    return sum(isinstance(c, ContentBlockDelta) for c in adapter.sent)


async def test_closing_stream_early_keeps_partial_text_and_closes_adapter() -> None:
    adapter = ScriptedAdapter([text_reply("Hel", "lo ", "wor", "ld"), text_reply("next")])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    stream = conversation.stream()
    received = []
    async for event in stream:
        if isinstance(event, ContentBlockDelta):
            received.append(event.delta)
            if len(received) == 2:
                break
    assert adapter.closed == 0
    await stream.aclose()
    assert adapter.closed == 1  # at once: the upstream request is closed, no more tokens paid
    assert conversation.messages[-1] == TextMessage("Hello ", Role.ASSISTANT, incomplete=True)
    conversation.continuation.request("go on").prompt_conversation()
    assert texts([m async for m in conversation]) == ["next"]
    assert texts(adapter.requests[-1].messages) == ["hi", "Hello ", "go on"]


async def test_cancelling_iteration_mid_text_keeps_completed_and_partial() -> None:
    adapter = ScriptedAdapter(
        [tool_reply("", ("ping", {}, "c1")), stalled("po", "ng is"), text_reply("fine")]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    conversation.apply_config_deltas({"tools": [ping]})
    received: list[object] = []

    async def consume() -> None:
        async for message in conversation:
            received.append(message)

    task = asyncio.create_task(consume())
    await until(lambda: deltas_sent(adapter) == 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert adapter.opened == adapter.closed == 2
    assert received == [ToolCallMessage("ping", "c1", {}, result="pong")]
    assert list(conversation.messages)[1:] == [
        ToolCallMessage("ping", "c1", {}, result="pong"),
        TextMessage("pong is", Role.ASSISTANT, incomplete=True),
    ]
    follow = conversation.continuation.request("and?").prompt_conversation()
    assert texts([m async for m in follow]) == ["fine"]
    assert texts(conversation.messages) == ["hi", "", "pong is", "and?", "fine"]


async def test_break_then_aclose_ends_iteration_until_continued() -> None:
    adapter = ScriptedAdapter([tool_reply("", ("ping", {}, "c1")), text_reply("unused")])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    conversation.apply_config_deltas({"tools": [ping]})
    async for _ in conversation:
        break
    await conversation.aclose()
    assert adapter.opened == adapter.closed == 1
    assert [m async for m in conversation] == []  # this iteration is over
    adapter.scripts[0] = text_reply("resumed")
    conversation.continuation.prompt_conversation()  # no new messages: just run again
    assert texts([m async for m in conversation]) == ["resumed"]


async def test_provider_error_mid_stream_keeps_partial_text_incomplete() -> None:
    failure = ProviderError("upstream_unavailable", "503 from upstream", retryable=True)
    reply = text_reply("It is", " raining")
    adapter = ScriptedAdapter([[*reply[:2], failure]])
    conversation = conversation_on(adapter, MessageList([TextMessage("weather?")]))
    with pytest.raises(ProviderError) as caught:
        _ = [m async for m in conversation]
    assert (caught.value.code, caught.value.retryable) == ("upstream_unavailable", True)
    assert conversation.messages[-1] == TextMessage("It is", Role.ASSISTANT, incomplete=True)
    assert adapter.closed == 1
    assert [m async for m in conversation] == []  # nothing changed since: nothing to do


async def test_provider_error_before_any_text_adds_nothing() -> None:
    adapter = ScriptedAdapter([[ProviderError("rate_limited", "slow down", retry_after=2.0)]])
    conversation = conversation_on(adapter, MessageList([TextMessage("q")]))
    with pytest.raises(ProviderError, match="slow down") as caught:
        _ = [e async for e in conversation.stream()]
    assert caught.value.retry_after == 2.0
    assert texts(conversation.messages) == ["q"]


async def test_a_reply_without_its_stop_is_a_bad_response() -> None:
    adapter = ScriptedAdapter([text_reply("cut", " off")[:-1]])
    conversation = conversation_on(adapter, MessageList([TextMessage("q")]))
    with pytest.raises(ProviderError, match="scripted: the reply ended before its stop") as caught:
        _ = [m async for m in conversation]
    assert caught.value.code == "bad_response"
    assert conversation.messages[-1] == TextMessage("cut off", Role.ASSISTANT, incomplete=True)


async def test_a_change_mid_reply_cuts_it_short_and_the_next_run_answers_it() -> None:
    adapter = ScriptedAdapter([text_reply("one", " two", " three"), text_reply("ok")])
    conversation = conversation_on(adapter, MessageList([TextMessage("count")]))
    events = []
    async for event in conversation.stream():
        events.append(event)
        if isinstance(event, ContentBlockDelta):
            conversation.add("user", "stop")
    assert [e.kind for e in events] == ["content_block_start", "content_block_delta"]
    assert adapter.closed == 1
    assert list(conversation.messages)[1:] == [
        TextMessage("one", Role.ASSISTANT, incomplete=True),
        TextMessage("stop"),
    ]
    assert texts([m async for m in conversation]) == ["ok"]


async def test_a_new_stream_cuts_short_one_left_open() -> None:
    adapter = ScriptedAdapter([text_reply("old", " reply"), text_reply("new")])
    conversation = conversation_on(adapter, MessageList([TextMessage("q")]))
    first = conversation.stream()
    assert (await anext(first)).kind == "content_block_start"
    assert (await anext(first)).kind == "content_block_delta"
    second = [e async for e in conversation.stream()]
    assert second[-1].message == TextMessage("new", Role.ASSISTANT)  # type: ignore[union-attr]
    assert [e async for e in first] == []  # the old run ends quietly, touching nothing
    assert texts(conversation.messages) == ["q", "old", "new"]
    assert conversation.messages[1].incomplete  # type: ignore[union-attr]
    assert adapter.closed == 2


async def test_clear_mid_reply_stops_the_run() -> None:
    adapter = ScriptedAdapter([text_reply("a", "b")])
    conversation = LLMConversation(system_prompt="sys")
    conversation = conversation_on(adapter, conversation.messages)
    conversation.add("user", "hi")
    async for event in conversation.stream():
        if isinstance(event, ContentBlockDelta):
            conversation.clear()
    assert texts(conversation.messages) == ["sys"]
    assert adapter.closed == 1


async def test_aclose_cuts_short_a_stream_left_open() -> None:
    adapter = ScriptedAdapter([text_reply("left", " open")])
    conversation = conversation_on(adapter, MessageList([TextMessage("q")]))
    await conversation.aclose()  # nothing running: nothing to do
    left = conversation.stream()
    assert (await anext(left)).kind == "content_block_start"
    assert (await anext(left)).kind == "content_block_delta"
    await conversation.aclose()
    assert conversation.messages[-1] == TextMessage("left", Role.ASSISTANT, incomplete=True)
    assert [e async for e in left] == []
    assert adapter.closed == 1 and len(conversation.messages) == 2
