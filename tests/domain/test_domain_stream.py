"""The finer grain (stream), when iteration runs again, model selection and config checks."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ConversationConfig,
    ConversationConfigurationError,
    DefaultModelSelectionStrategy,
    DeltaApplicationError,
    LLMConversation,
    LLMPromptBuilder,
    MessageAppended,
    MessageList,
    MessageStop,
    ProviderError,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
)
from app.providers import OfflineAdapter
from tests.domain.domain_support import ScriptedAdapter, conversation_on, text_reply, texts


def f() -> None:
    """A tool."""


async def test_stream_yields_chunks_then_the_completed_message(llm: LLMPromptBuilder) -> None:
    conversation = llm.agent("sys").request("hello world").prompt_conversation()
    events = [e async for e in conversation.stream()]
    assert events[:4] == [
        ContentBlockStart(0),
        ContentBlockDelta("hello"),
        ContentBlockDelta(" world"),
        ContentBlockStop(0),
    ]
    assert isinstance(events[4], MessageStop) and events[4].usage.output_tokens == 2
    assert events[5] == MessageAppended(TextMessage("hello world", Role.ASSISTANT), 2, last=True)
    assert events[5].kind == "message" and len(events) == 6


async def test_continuation_mid_stream_sees_completed_messages_only(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("a b").prompt_conversation()
    async for event in conversation.stream():
        if isinstance(event, ContentBlockDelta):
            assert texts(conversation.continuation.conversation.messages) == ["a b"]
    assert texts(conversation.continuation.conversation.messages) == ["a b", "a b"]


async def test_iterating_again_needs_a_change(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("one").prompt_conversation()
    assert len([m async for m in conversation]) == 1
    assert [m async for m in conversation] == []  # answered already
    conversation.add("user", "two")
    assert texts([m async for m in conversation]) == ["two"]
    conversation.apply_config_deltas({"model": "echo-2"})
    assert texts([m async for m in conversation]) == ["two"]  # a config change counts too
    conversation.continuation.prompt_conversation()  # an explicit "run it"
    assert texts([m async for m in conversation]) == ["two"]


async def test_a_conversation_built_directly_runs_on_first_iteration() -> None:
    adapter = ScriptedAdapter([text_reply("hi")])
    conversation = conversation_on(adapter, MessageList([TextMessage("hello")]))
    assert [m async for m in conversation] == [TextMessage("hi", Role.ASSISTANT)]


async def test_a_run_with_a_pending_call_does_not_reach_the_model() -> None:
    adapter = ScriptedAdapter([])
    waiting = ToolCallMessage("ask", "c1", {}, pending=True)
    conversation = conversation_on(adapter, MessageList([TextMessage("q"), waiting]))
    assert [e async for e in conversation.stream()] == []
    assert adapter.requests == []


async def test_a_failed_run_is_over_until_the_conversation_changes() -> None:
    adapter = ScriptedAdapter([[ProviderError("timeout", "slow")], text_reply("second try")])
    conversation = conversation_on(adapter, MessageList([TextMessage("q")]))
    with pytest.raises(ProviderError):
        _ = [m async for m in conversation]
    assert [m async for m in conversation] == []
    conversation.continuation.prompt_conversation()
    assert texts([m async for m in conversation]) == ["second try"]


async def test_selection_errors_name_the_provider() -> None:
    conversation = LLMConversation(MessageList([TextMessage("q")]))
    with pytest.raises(ConversationConfigurationError, match="no model provider is configured"):
        _ = [m async for m in conversation]
    offline = LLMConversation(
        MessageList([TextMessage("q")]),
        ConversationConfig(model_selector=DefaultModelSelectionStrategy([OfflineAdapter()])),
    )
    offline.apply_config_deltas({"provider": "openai"})
    with pytest.raises(
        ConversationConfigurationError, match="'openai' is not available; available: offline"
    ):
        _ = [m async for m in offline]


def test_default_selection_strategy() -> None:
    offline, scripted = OfflineAdapter(), ScriptedAdapter([])
    strategy = DefaultModelSelectionStrategy([offline, scripted], default_provider="scripted")
    assert strategy.available == ["offline", "scripted"]
    assert strategy.adapter("offline") is offline and strategy.adapter("x") is None
    assert strategy.select_model(None, None) == (scripted, "script-1")
    assert strategy.select_model("offline", "big") == (offline, "big")
    first = DefaultModelSelectionStrategy([offline])
    assert first.select_model(None, None) == (offline, "echo")


BAD_CONFIG: list[tuple[dict[str, Any], str]] = [
    ({"provider": 3}, "provider: must be a non-empty string or null"),
    ({"max_tool_rounds": 1001}, "must be an integer from 0 to 1000"),
    ({"max_tool_rounds": 2.5}, "must be an integer"),
    ({"max_output_tokens": 0}, "must be an integer of at least 1"),
    ({"temperature": True}, "must be a number from 0 to 2"),
    ({"tool_timeout": 0}, "tool_timeout: must be a number from 0.001 to 3600"),
    ({"tools": "f"}, "tools: must be a list of tools"),
    ({"tools": [f, f]}, "tool names repeat: f"),
    ({"tools": [3]}, "tools: a tool must be a function, not int"),
    ({"model_selector": object()}, "must have a select_model method"),
]


@pytest.mark.parametrize(("deltas", "expected"), BAD_CONFIG)
def test_config_deltas_are_checked(deltas: dict[str, Any], expected: str) -> None:
    conversation = LLMConversation()
    with pytest.raises(DeltaApplicationError, match=expected):
        conversation.apply_config_deltas(deltas)
    assert conversation.config == ConversationConfig(
        model_selector=conversation.config.model_selector
    )


def test_config_deltas_alias_and_reset() -> None:
    conversation = LLMConversation()
    conversation.apply_config_deltas(
        {
            "provider": " offline ",
            "model": "m",
            "max_tool_rounds": 0,
            "tools": [f, Tool.client("g")],
        }
    )
    config = conversation.config
    assert (config.preferred_provider, config.preferred_model, config.max_tool_rounds) == (
        "offline",
        "m",
        0,
    )
    assert config.tool("g") is not None and config.tool("h") is None
    conversation.apply_config_deltas({"max_tool_rounds": None, "tools": None, "model": None})
    assert conversation.config.max_tool_rounds == 8 and conversation.config.tools == ()
    with pytest.raises(DeltaApplicationError, match="must be a mapping"):
        conversation.apply_config_deltas([("model", "x")])  # type: ignore[arg-type]
