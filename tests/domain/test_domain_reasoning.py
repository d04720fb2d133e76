"""Reasoning in the domain: the message and its codec, the run loop, replay, context, formats.

DESIGN §2a: reasoning is a message in the assistant's turn, goes back only to the provider that
made it, exactly and in its place, and nothing separates it from the call it precedes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    DeltaApplicationError,
    Message,
    MessageAppended,
    MessageList,
    MessageListDeserializationError,
    MessageStop,
    Reasoning,
    ReasoningDone,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolUse,
    Usage,
    context_within,
    from_anthropic_format,
    repair_history,
    to_anthropic_format,
    to_openai_format,
)
from app.providers import OfflineAdapter
from tests.domain.domain_support import HANG, ScriptedAdapter, conversation_on, selector

SIGNED = {"type": "thinking", "signature": "sig-1"}


def thinking(text: str = "Let me think.", provider: str = "anthropic") -> ReasoningMessage:
    return ReasoningMessage(text, provider, dict(SIGNED))


def reasoning_reply(thought: list[str], payload: dict[str, Any] | None, *rest: Any) -> list[Any]:
    """A reply that reasons at block 0, then does ``rest`` (text at block 1, calls, stop)."""
    return [
        ContentBlockStart(0, "reasoning"),
        *(ContentBlockDelta(t, 0) for t in thought),
        ContentBlockStop(0),
        ReasoningDone("".join(thought), payload, 0),
        *rest,
    ]


# --- the message and its document ------------------------------------------------------------


def test_a_reasoning_message_round_trips_and_makes_the_document_1_1() -> None:
    message = ReasoningMessage("hmm", "openai", {"id": "rs_1", "encrypted_content": "e=="})
    document = MessageList([TextMessage("hi"), message]).to_dict()
    assert document["version"] == "1.1"
    assert document["messages"][1] == {
        "type": "ReasoningMessage",
        "text": "hmm",
        "provider": "openai",
        "payload": {"id": "rs_1", "encrypted_content": "e=="},
        "role": "assistant",
    }
    assert MessageList.from_dict(json.loads(json.dumps(document)))[1] == message
    assert message.role is Role.ASSISTANT


def test_a_document_without_reasoning_stays_1_0() -> None:
    assert MessageList([TextMessage("hi")]).to_dict()["version"] == "1.0"


def test_an_incomplete_reasoning_is_marked_and_never_replayable() -> None:
    cut = ReasoningMessage("half a tho", "anthropic", None, incomplete=True)
    data = MessageList([cut]).to_dict()["messages"][0]
    assert data["incomplete"] is True and data["payload"] is None
    assert MessageList.from_dict({"version": "1.1", "messages": [data]})[0] == cut
    assert not cut.replayable


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"payload": "sig"}, "messages[0].payload: must be an object or null, not str"),
        ({"provider": ""}, "messages[0].provider: must not be empty"),
        ({"provider": None}, "messages[0].provider: is missing"),
        ({"role": "user"}, "messages[0].role: must be one of 'assistant'"),
        ({"text": 5}, "messages[0].text: must be a string, not a number"),
    ],
)
def test_bad_reasoning_data_names_its_index_and_field(change: dict[str, Any], error: str) -> None:
    data = {**thinking().to_serializable_dict(), **change}
    if change.get("provider", "x") is None:
        del data["provider"]
    with pytest.raises(MessageListDeserializationError, match=error.replace("[", r"\[")):
        MessageList.from_dict({"version": "1.1", "messages": [data]})


def test_the_version_is_checked() -> None:
    with pytest.raises(MessageListDeserializationError, match=r"'1\.0' or '1\.1' or '1\.2'"):
        MessageList.from_dict({"version": "1.3", "messages": []})


# --- the run loop -----------------------------------------------------------------------------


async def test_the_offline_model_thinks_when_asked_and_the_reasoning_is_stored_first() -> None:
    conversation = conversation_on(OfflineAdapter(), reasoning=Reasoning("low"))
    conversation.add("user", "hello there")
    events = [e async for e in conversation.stream()]
    starts = [e for e in events if isinstance(e, ContentBlockStart)]
    assert [(s.index, s.type) for s in starts] == [(0, "reasoning"), (1, "text")]
    kinds = [type(m).__name__ for m in conversation.messages]
    assert kinds == ["TextMessage", "ReasoningMessage", "TextMessage"]
    reasoning = conversation.messages[1]
    assert isinstance(reasoning, ReasoningMessage) and reasoning.provider == "offline"
    streamed = "".join(e.delta for e in events if isinstance(e, ContentBlockDelta) and e.index == 0)
    assert reasoning.text == streamed and reasoning.replayable
    assert conversation.messages[2] == TextMessage("hello there", Role.ASSISTANT)
    appended = [e.index for e in events if isinstance(e, MessageAppended)]
    assert appended == [1, 2]
    stop = next(e for e in events if isinstance(e, MessageStop))
    assert stop.usage.reasoning_tokens == len(reasoning.text.split())


@pytest.mark.parametrize("reasoning", [None, Reasoning("none"), Reasoning()])
async def test_the_offline_model_does_not_think_unless_asked(reasoning: Reasoning | None) -> None:
    conversation = conversation_on(OfflineAdapter(), reasoning=reasoning)
    conversation.add("user", "hello")
    [message async for message in conversation]
    assert not any(isinstance(m, ReasoningMessage) for m in conversation.messages)


async def test_reasoning_goes_back_with_its_tool_call_and_the_options_carry_the_config() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    adapter = ScriptedAdapter(
        [
            reasoning_reply(
                ["I should ", "add."],
                SIGNED,
                ToolUse("add", {"a": 1, "b": 2}, "c1"),
                MessageStop("tool_use"),
            ),
            [ContentBlockStart(0), ContentBlockDelta("3"), ContentBlockStop(0), MessageStop()],
        ],
        name="anthropic",
    )
    conversation = conversation_on(adapter, tools=[add], reasoning=Reasoning("high", 2048, "auto"))
    conversation.add("user", "1+2?")
    assert [m async for m in conversation][-1] == TextMessage("3", Role.ASSISTANT)
    assert adapter.requests[0].options.reasoning == Reasoning("high", 2048, "auto")
    second = adapter.requests[1].messages
    assert [type(m).__name__ for m in second] == [
        "TextMessage",
        "ReasoningMessage",
        "ToolCallMessage",
    ]
    assert second[1] == ReasoningMessage("I should add.", "anthropic", SIGNED)


async def test_another_provider_never_sees_the_reasoning() -> None:
    thinker = ScriptedAdapter(
        [
            reasoning_reply(
                ["deep"],
                SIGNED,
                ContentBlockStart(1),
                ContentBlockDelta("a", 1),
                ContentBlockStop(1),
                MessageStop(),
            )
        ],
        name="anthropic",
    )
    other = ScriptedAdapter(
        [[ContentBlockStart(0), ContentBlockDelta("b"), ContentBlockStop(0), MessageStop()]],
        name="openai",
    )
    conversation = conversation_on(thinker)
    conversation.apply_config_deltas({"model_selector": selector(thinker, other)})
    conversation.add("user", "q1")
    [m async for m in conversation]
    conversation.apply_delta([TextMessage("q2")], {"provider": "openai"})
    [m async for m in conversation]
    assert not any(isinstance(m, ReasoningMessage) for m in other.requests[0].messages)
    assert isinstance(conversation.messages[1], ReasoningMessage)  # still in the record


async def test_an_abort_mid_reasoning_keeps_it_incomplete_and_it_is_never_sent() -> None:
    adapter = ScriptedAdapter(
        [[ContentBlockStart(0, "reasoning"), ContentBlockDelta("half a ", 0), HANG]],
        name="anthropic",
    )
    conversation = conversation_on(adapter)
    conversation.add("user", "q")

    async def consume() -> None:
        async for _ in conversation.stream():
            pass

    task = asyncio.create_task(consume())
    for _ in range(100):  # the two chunks before the hang
        await asyncio.sleep(0)
    assert len(adapter.sent) == 2
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert conversation.messages[-1] == ReasoningMessage("half a ", "anthropic", None, True)
    assert repair_history(list(conversation.messages), "anthropic") == [TextMessage("q")]


async def test_collect_response_keeps_reasoning_out_of_the_text() -> None:
    adapter = ScriptedAdapter(
        [
            reasoning_reply(
                ["think"],
                SIGNED,
                ContentBlockStart(1),
                ContentBlockDelta("answer", 1),
                ContentBlockStop(1),
                MessageStop("end_turn", Usage(1, 2, 1)),
            )
        ]
    )
    response = await adapter.send_message([TextMessage("q")], [], RequestOptions())
    assert response.text == "answer"
    assert response.reasoning == (ReasoningDone("think", SIGNED, 0),)


def test_the_builder_composes_a_reasoning_config() -> None:
    builder = conversation_on(OfflineAdapter()).continuation.reasoning("medium", summary="auto")
    conversation = builder.prompt_conversation()
    assert conversation.config.reasoning == Reasoning("medium", None, "auto")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"effort": "max"}, "reasoning.effort: must be one of none, low, medium, high"),
        ({"summary": "long"}, "reasoning.summary: must be one of auto, none"),
        ({"budget_tokens": 10}, "reasoning.budget_tokens: must be an integer from 1024"),
        ({"depth": 1}, "reasoning: unknown keys depth"),
        ("high", "reasoning: must be an object"),
    ],
)
def test_a_bad_reasoning_config_is_refused(value: Any, error: str) -> None:
    conversation = conversation_on(OfflineAdapter())
    with pytest.raises(DeltaApplicationError, match=error):
        conversation.apply_config_deltas({"reasoning": value})


# --- replay: repair and context ---------------------------------------------------------------


def call(call_id: str, text: str = "", pending: bool = False) -> ToolCallMessage:
    message = ToolCallMessage("add", call_id, {"a": 1}, message=text, pending=pending)
    return message if pending else message.completed(result=2)


def test_repair_sends_reasoning_only_to_its_provider_and_never_alone() -> None:
    history: list[Message] = [
        AgentMessage("sys"),
        TextMessage("q"),
        thinking("a"),
        call("c1", "calling"),
        ReasoningMessage("b", "openai", {"id": "rs"}),
        TextMessage("done", Role.ASSISTANT),
        TextMessage("q2"),
        thinking("orphan"),  # a reply cut off after its thinking
        TextMessage("q3"),
    ]
    to_anthropic = repair_history(history, "anthropic")
    assert [m for m in to_anthropic if isinstance(m, ReasoningMessage)] == [thinking("a")]
    assert to_anthropic.index(thinking("a")) + 1 == to_anthropic.index(call("c1", "calling"))
    to_openai = repair_history(history, "openai")
    assert [m.text for m in to_openai if isinstance(m, ReasoningMessage)] == ["b"]


def test_a_pending_call_after_reasoning_is_sent_interrupted_with_its_reasoning() -> None:
    repaired = repair_history([TextMessage("q"), thinking(), call("c1", pending=True)], "anthropic")
    assert repaired[1] == thinking()
    assert isinstance(repaired[2], ToolCallMessage) and repaired[2].error is not None


def test_context_keeps_reasoning_with_the_message_after_it() -> None:
    history: list[Message] = [
        TextMessage("q"),
        thinking("x" * 400),
        call("c1"),
        call("c2"),
        TextMessage("next"),
    ]
    sizes = set()
    for budget in range(1, 400, 3):
        kept = context_within(history, budget).messages
        sizes.add(len(kept))
        assert (thinking("x" * 400) in kept) == (call("c1") in kept) == (call("c2") in kept)
    assert sizes == {0, 1, 4, 5}  # the turn of three is kept or dropped whole


# --- the Anthropic shape ----------------------------------------------------------------------


def test_thinking_exports_byte_for_byte_and_imports_back_to_the_same_document() -> None:
    document = {
        "system": "sys",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I think\n  ", "signature": "Ev0B=="},
                    {"type": "redacted_thinking", "data": "EmwKAhgB"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "", "signature": "Ex=="},
                    {"type": "text", "text": "2"},
                ],
            },
        ],
    }
    messages = from_anthropic_format(document["system"], document["messages"])
    assert to_anthropic_format(messages) == document
    again = from_anthropic_format(document["system"], to_anthropic_format(messages)["messages"])
    assert again == messages
    assert not any("thinking" in json.dumps(m) for m in to_openai_format(messages))


def test_other_reasoning_is_left_out_of_the_anthropic_shape() -> None:
    messages = [
        TextMessage("q"),
        ReasoningMessage("r", "openai", {"id": "rs"}),
        TextMessage("a", Role.ASSISTANT),
    ]
    assert to_anthropic_format(messages)["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}],
    }


# --- a property: what goes to a provider ---------------------------------------------------------

_PROVIDERS = ("anthropic", "openai")


def _messages() -> st.SearchStrategy[list[Message]]:
    reasoning = st.builds(
        ReasoningMessage,
        st.text(max_size=5),
        st.sampled_from(_PROVIDERS),
        st.one_of(st.none(), st.just(dict(SIGNED))),
        st.booleans(),
    )
    text = st.builds(
        TextMessage,
        st.text(max_size=5),
        st.sampled_from([Role.USER, Role.ASSISTANT]),
        st.booleans(),
    )
    calls = st.builds(
        lambda i, t, p: call(f"c{i}", t, p),
        st.integers(0, 5),
        st.sampled_from(["", "t"]),
        st.booleans(),
    )
    return st.lists(st.one_of(reasoning, text, calls, st.just(AgentMessage("s"))), max_size=14)


@settings(max_examples=300, deadline=None)
@given(_messages(), st.sampled_from(_PROVIDERS), st.integers(1, 200))
def test_any_history_sends_a_provider_only_its_reasoning_each_before_its_turn(
    history: list[Message], provider: str, budget: int
) -> None:
    window = context_within(history, budget)
    sent = repair_history(window.messages, provider)
    for i, message in enumerate(sent):
        if not isinstance(message, ReasoningMessage):
            continue
        assert message.provider == provider and message.replayable
        after = next(m for m in sent[i + 1 :] if not isinstance(m, ReasoningMessage))
        assert isinstance(after, ToolCallMessage) or (
            isinstance(after, TextMessage) and after.role is Role.ASSISTANT
        )
    # each reasoning sent is one stored, unchanged, in the same order
    stored = iter(m for m in history if isinstance(m, ReasoningMessage))
    assert all(any(m == s for s in stored) for m in sent if isinstance(m, ReasoningMessage))
