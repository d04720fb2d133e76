"""The offline adapter exactly as DESIGN §6 says, alone and under a conversation."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ModelAdapter,
    RequestOptions,
    Role,
    StreamChunk,
    TextMessage,
    ToolCallMessage,
    ToolUse,
)
from app.providers import OfflineAdapter, default_builder
from app.providers.registry import build_selector
from app.settings import Settings

OPTIONS = RequestOptions("echo")


async def chunks(adapter: OfflineAdapter, messages: Sequence[Message]) -> list[StreamChunk]:
    return [c async for c in adapter.stream_message(messages, [], OPTIONS)]


async def test_offline_echoes_the_last_user_message_word_by_word() -> None:
    history = [
        TextMessage("older"),
        TextMessage("x", Role.ASSISTANT),
        TextMessage("Hi  there,\nyou"),
    ]
    got = await chunks(OfflineAdapter(), history)
    assert got[0] == ContentBlockStart(0) and got[-2] == ContentBlockStop(0)
    deltas = [c.delta for c in got if isinstance(c, ContentBlockDelta)]
    assert deltas == ["Hi", "  there,", "\nyou"]  # one delta per word, joined: the exact text
    stop = got[-1]
    assert isinstance(stop, MessageStop) and stop.stop_reason == "end_turn"
    assert stop.usage.output_tokens == 3 and stop.usage.input_tokens == 2 + 1 + 4


async def test_offline_waits_the_delay_before_each_word() -> None:
    adapter = OfflineAdapter(delay_ms=30)
    started = time.monotonic()
    stream = adapter.stream_message([TextMessage("one two three")], [], OPTIONS)
    assert await anext(stream) == ContentBlockStart(0)
    assert await anext(stream) == ContentBlockDelta("one")
    first = time.monotonic() - started
    rest = [c async for c in stream]
    total = time.monotonic() - started
    assert first >= 0.025  # waited before the first word too
    assert total >= 0.085 and len(rest) == 4
    assert OfflineAdapter(delay_ms=-5).delay == 0


def test_parley_offline_delay_ms_reaches_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_OFFLINE_DELAY_MS", "20")
    adapter, model = build_selector(Settings()).select_model("offline", None)
    assert isinstance(adapter, OfflineAdapter) and adapter.delay == 0.02
    assert (adapter.name, model) == ("offline", "echo")
    assert isinstance(adapter, ModelAdapter)


async def test_default_builder_runs_offline_with_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_OFFLINE_DELAY_MS", "15")
    monkeypatch.setenv("PARLEY_DEFAULT_PROVIDER", "offline")
    started = time.monotonic()
    assert await default_builder().request("a b c").prompt() == "a b c"
    assert time.monotonic() - started >= 0.04


async def test_call_makes_a_tool_call_instead_of_text() -> None:
    got = await chunks(OfflineAdapter(), [TextMessage('call get_weather {"city": "Oslo"}')])
    assert ToolUse("get_weather", {"city": "Oslo"}, "call_1") in got
    assert not any(isinstance(c, ContentBlockDelta) for c in got)
    assert got[-1] == MessageStop("tool_use", got[-1].usage)  # type: ignore[union-attr]
    bare = await chunks(OfflineAdapter(), [TextMessage("call ping")])
    assert ToolUse("ping", {}, "call_1") in bare


@pytest.mark.parametrize(
    "text",
    [
        "call f {not json",
        "call f [1, 2]",
        "calling f {}",
        # JSON the API could not store: NUL, NaN, deeper than Python's recursion limit
        'call f {"a": "\\u0000"}',
        'call f {"a": NaN}',
        'call f {"a": ' + "[" * 990 + "]" * 990 + "}",
    ],
)
async def test_a_malformed_call_is_echoed(text: str) -> None:
    got = await chunks(OfflineAdapter(), [TextMessage(text)])
    assert "".join(c.delta for c in got if isinstance(c, ContentBlockDelta)) == text


async def test_once_the_result_is_in_it_answers_with_it() -> None:
    ask = TextMessage('call f {"x": 1}')
    done = ToolCallMessage("f", "call_1", {"x": 1}, result={"y": 2})
    answered = TextMessage('{"y": 2}', Role.ASSISTANT)
    rerun = await OfflineAdapter().send_message([ask, done, answered], [], OPTIONS)
    assert (rerun.text, rerun.tool_calls) == ('{"y": 2}', ())  # no second call once answered
    reply = await OfflineAdapter().send_message([ask, done], [], OPTIONS)
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ('{"y": 2}', (), "end_turn")
    failed = ToolCallMessage("f", "call_1", {}, error="KeyError: 'x'")
    assert (await OfflineAdapter().send_message([ask, failed], [], OPTIONS)).text == (
        "Error: KeyError: 'x'"
    )


async def test_a_pending_call_or_a_new_request_is_not_an_answer() -> None:
    ask = TextMessage("call f {}")
    waiting = ToolCallMessage("f", "call_1", {}, pending=True)
    reply = await OfflineAdapter().send_message([ask, waiting], [], OPTIONS)
    assert reply.tool_calls == (ToolUse("f", {}, "call_2"),)
    done = waiting.completed(1)
    later = await OfflineAdapter().send_message([ask, done, TextMessage("thanks")], [], OPTIONS)
    assert later.text == "thanks"
    assert (await OfflineAdapter().send_message([], [], OPTIONS)).text == ""


async def test_send_and_stream_take_messages_and_tools_as_seed_004_declares() -> None:
    adapter = OfflineAdapter()
    reply = await adapter.send_message([TextMessage("two words")], [])
    assert (reply.text, reply.stop_reason) == ("two words", "end_turn")
    streamed = [c async for c in adapter.stream_message([TextMessage("two words")], [])]
    assert isinstance(streamed[-1], MessageStop)
    assert "".join(c.delta for c in streamed if isinstance(c, ContentBlockDelta)) == "two words"
