"""Context budgets, token counts, and the OpenAI and Anthropic shapes of a MessageList."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.domain import (
    AgentMessage,
    ConversationConfigurationError,
    MessageList,
    Role,
    TextMessage,
    ToolCallMessage,
    context_within,
    to_anthropic_format,
    to_openai_format,
)
from tests.domain.domain_support import ScriptedAdapter, conversation_on, text_reply, texts

SYSTEM = AgentMessage("sys")
REPLY = [
    TextMessage("weather and time?"),
    ToolCallMessage("weather", "c1", {"city": "Oslo"}, "cold", message="Checking both."),
    ToolCallMessage("clock", "c2", {}, None, "ValueError: no clock"),
    TextMessage("Cold; no clock.", Role.ASSISTANT),
]


def count(text: str) -> int:
    return len(text)


def test_context_keeps_the_system_prompt_even_over_budget() -> None:
    window = context_within([SYSTEM, TextMessage("x" * 50)], 3, count)
    assert window.messages == (SYSTEM,)
    assert window.dropped == 1 and window.indices == (0,)


def test_context_keeps_one_replys_tool_calls_together() -> None:
    messages = [SYSTEM, *REPLY]
    costs = context_within(messages, None, count).token_counts
    budget = costs[0] + costs[4] + costs[3]  # room for the last call, not for both calls
    window = context_within(messages, budget, count)
    assert window.messages == (SYSTEM, REPLY[-1])
    whole = context_within(messages, budget + costs[2], count)
    assert whole.messages == (SYSTEM, *REPLY[1:])


def test_a_tool_calls_result_is_counted_with_it() -> None:
    done = ToolCallMessage("t", "c", {}, result="r" * 40)
    waiting = ToolCallMessage("t", "c", {}, pending=True)
    [with_result] = context_within([done], None, count).token_counts
    [without] = context_within([waiting], None, count).token_counts
    assert with_result - without == len(" " + "r" * 40)


async def test_a_run_sends_only_the_window_counted_by_the_adapters_counter() -> None:
    @dataclass
    class Exact(ScriptedAdapter):
        def token_counter(self, model: str) -> object:
            return len  # one token a character

    adapter = Exact([text_reply("ok")])
    history = MessageList([SYSTEM, TextMessage("a" * 100), TextMessage("b" * 10)])
    conversation = conversation_on(adapter, history, context_max_tokens=3 + 4 + 10 + 4)
    _ = [m async for m in conversation]
    assert texts(adapter.requests[0].messages) == ["sys", "b" * 10]


async def test_a_budget_too_small_for_the_latest_message_is_refused() -> None:
    adapter = ScriptedAdapter([text_reply("never")])
    history = MessageList([SYSTEM, TextMessage("long " * 100)])
    conversation = conversation_on(adapter, history, context_max_tokens=20)
    with pytest.raises(
        ConversationConfigurationError, match="context_max_tokens=20 leaves no room"
    ):
        _ = [m async for m in conversation]
    assert adapter.requests == [] and len(conversation.messages) == 2


def test_openai_format_puts_several_calls_of_one_reply_in_one_message() -> None:
    assert to_openai_format([SYSTEM, *REPLY]) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather and time?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "cold"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: ValueError: no clock"},
        {"role": "assistant", "content": "Cold; no clock."},
    ]


def test_openai_format_of_pending_calls_and_separate_replies() -> None:
    messages = [
        ToolCallMessage("a", "c1", {"n": 1}, result={"v": 1}, message="First."),
        ToolCallMessage("b", "c2", {}, result=2, message="Second."),
        ToolCallMessage("ask", "c3", {}, pending=True),
        TextMessage("partial", Role.ASSISTANT, incomplete=True),
    ]
    shaped = to_openai_format(messages)
    assert [m["role"] for m in shaped] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert shaped[1]["content"] == '{"v": 1}' and shaped[2]["content"] == "Second."
    assert [c["id"] for c in shaped[2]["tool_calls"]] == ["c2", "c3"]  # c3 waits: no tool message
    assert shaped[-1] == {"role": "assistant", "content": "partial"}
    without = to_openai_format(messages, include_pending=False)
    assert [c["id"] for c in without[2]["tool_calls"]] == ["c2"]
    no_text = to_openai_format([ToolCallMessage("a", "c1", {}, result=1)])
    assert no_text[0]["content"] is None


def test_anthropic_format_blocks_results_and_system() -> None:
    shaped = to_anthropic_format([SYSTEM, *REPLY, AgentMessage("more sys")])
    assert shaped["system"] == "sys\n\nmore sys"
    assert shaped["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather and time?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "c2", "name": "clock", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "cold"},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "Error: ValueError: no clock",
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Cold; no clock."}]},
    ]


def test_anthropic_format_merges_turns_drops_empty_text_and_pending_results() -> None:
    messages = [
        AgentMessage(""),
        TextMessage("one"),
        TextMessage("two"),
        TextMessage("", Role.ASSISTANT),
        TextMessage("rule", Role.SYSTEM),
        TextMessage("prefill", Role.ASSISTANT),
        ToolCallMessage("ask", "c9", {"q": 1}, pending=True),
    ]
    shaped = to_anthropic_format(messages)
    assert shaped["system"] == "rule"
    assert shaped["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "prefill"},
                {"type": "tool_use", "id": "c9", "name": "ask", "input": {"q": 1}},
            ],
        },
    ]
    assert to_anthropic_format(messages, include_pending=False)["messages"][-1]["content"] == [
        {"type": "text", "text": "prefill"}
    ]


def test_conversation_shortcuts_match_the_functions() -> None:
    conversation = conversation_on(ScriptedAdapter([]), MessageList([SYSTEM, *REPLY]))
    assert conversation.to_openai_format() == to_openai_format([SYSTEM, *REPLY])
    assert conversation.to_anthropic_format() == to_anthropic_format([SYSTEM, *REPLY])
    assert conversation.get_context(10**6).messages == (SYSTEM, *REPLY)
