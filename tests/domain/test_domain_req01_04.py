"""Seed 000, requirements 1–4: assistant injection, three classes, delta pattern, references."""

from __future__ import annotations

import pytest

from app.domain import (
    AgentMessage,
    ConversationConfig,
    LLMConversation,
    LLMPromptBuilder,
    MessageList,
    Role,
    TextMessage,
    Tool,
)
from tests.domain.domain_support import texts


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


# --- requirement 1: assistant message injection ------------------------------------------------


def test_req1_1_assistant_adds_assistant_text_message_to_delta(llm: LLMPromptBuilder) -> None:
    builder = llm.assistant("Hello! How can I help?")
    assert list(builder.delta_messages) == [TextMessage("Hello! How can I help?", Role.ASSISTANT)]


def test_req1_2_chained_assistant_calls_keep_order(llm: LLMPromptBuilder) -> None:
    builder = llm.request("Q1").assistant("A1").agent("Be brief").assistant("A2").request("Q2")
    assert [(m.role, getattr(m, "text", None)) for m in builder.delta_messages] == [
        (Role.USER, "Q1"),
        (Role.ASSISTANT, "A1"),
        (Role.SYSTEM, "Be brief"),
        (Role.ASSISTANT, "A2"),
        (Role.USER, "Q2"),
    ]


def test_req1_3_assistant_with_agent_context_request_is_ordered(llm: LLMPromptBuilder) -> None:
    builder = llm.agent("sys").context("ctx").assistant("prime").request("req")
    assert list(builder.delta_messages) == [
        AgentMessage("sys"),
        TextMessage("ctx", Role.USER),
        TextMessage("prime", Role.ASSISTANT),
        TextMessage("req", Role.USER),
    ]


def test_req1_4_assistant_strips_whitespace_and_still_adds(llm: LLMPromptBuilder) -> None:
    builder = llm.assistant("  padded \n").assistant("   \t ")
    assert list(builder.delta_messages) == [
        TextMessage("padded", Role.ASSISTANT),
        TextMessage("", Role.ASSISTANT),
    ]


async def test_req1_5_applied_deltas_include_assistant_messages(llm: LLMPromptBuilder) -> None:
    conversation = (
        llm.agent("sys").assistant("Hello!").request("What is Python?").prompt_conversation()
    )
    assert list(conversation.messages) == [
        AgentMessage("sys"),
        TextMessage("Hello!", Role.ASSISTANT),
        TextMessage("What is Python?", Role.USER),
    ]
    replies = [m async for m in conversation]
    assert replies == [TextMessage("What is Python?", Role.ASSISTANT)]
    assert len(conversation.messages) == 4


# --- requirement 2: three classes, clear separation ----------------------------------------------


def test_req2_1_message_list_holds_only_message_data() -> None:
    messages = MessageList([AgentMessage("sys"), TextMessage("hi")])
    assert set(messages.to_dict()) == {"messages", "version"}
    public = {name for name in dir(messages) if not name.startswith("_")}
    assert not public & {"config", "tools", "provider", "model", "model_selector", "stream"}


async def test_req2_2_conversation_owns_message_list_and_runs(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("ping").prompt_conversation()
    owned = conversation.messages
    assert isinstance(owned, MessageList)
    [reply] = [m async for m in conversation]
    assert conversation.messages is owned
    assert owned[-1] is reply


def test_req2_3_builder_holds_deltas_not_conversation_state(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("one").prompt_conversation()
    builder = conversation.continuation.request("two").provider("offline")
    assert list(builder.delta_messages) == [TextMessage("two")]
    assert builder.delta_config == {"preferred_provider": "offline"}
    assert len(conversation.messages) == 1


def test_req2_4_no_state_is_duplicated(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("one").prompt_conversation()
    builder = conversation.continuation.assistant("two")
    assert builder.conversation is conversation
    assert builder.delta_messages is not builder.delta_messages  # copies, never shared
    builder.prompt_conversation()
    assert texts(conversation.messages) == ["one", "two"]
    assert list(builder.delta_messages) == [TextMessage("two", Role.ASSISTANT)]


def test_req2_5_history_exists_only_in_the_conversation(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("a").assistant("b").prompt_conversation()
    continuation = conversation.continuation
    assert len(continuation.delta_messages) == 0
    conversation.add("user", "c")
    assert continuation.conversation is conversation
    assert texts(continuation.conversation.messages) == ["a", "b", "c"]


def test_req2_6_config_exists_only_on_the_conversation(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("a").prompt_conversation()
    builder = conversation.continuation.model("echo-2").configure(temperature=0.5)
    assert conversation.config.preferred_model is None
    assert not hasattr(builder, "config")
    builder.prompt_conversation()
    assert conversation.config.preferred_model == "echo-2"
    assert conversation.config.temperature == 0.5


# --- requirement 3: delta pattern, immutable builders ------------------------------------------


def test_req3_1_every_builder_method_returns_a_new_builder(llm: LLMPromptBuilder) -> None:
    made = [
        llm.agent("a"),
        llm.assistant("a"),
        llm.context("c"),
        llm.request("r"),
        llm.provider("offline"),
        llm.model("m"),
        llm.tools(weather),
        llm.configure(temperature=1.0),
        llm.tool_result("call_1", "x"),
    ]
    assert all(isinstance(b, LLMPromptBuilder) and b is not llm for b in made)
    assert len({id(b) for b in made}) == len(made)


def test_req3_2_chained_methods_accumulate_messages_and_config(llm: LLMPromptBuilder) -> None:
    builder = llm.request("q").provider("offline").model("echo").tools(weather).assistant("a")
    assert len(builder.delta_messages) == 2
    assert builder.delta_config["preferred_provider"] == "offline"
    assert builder.delta_config["preferred_model"] == "echo"
    assert [t.name for t in builder.delta_config["tools"]] == ["weather"]


def test_req3_3_prompt_conversation_applies_all_deltas(llm: LLMPromptBuilder) -> None:
    conversation = llm.agent("sys").request("q").model("echo").tools(weather).prompt_conversation()
    assert [type(m).__name__ for m in conversation.messages] == ["AgentMessage", "TextMessage"]
    assert conversation.config.preferred_model == "echo"
    assert conversation.config.tool("weather") is not None


def test_req3_4_reused_builder_is_unchanged(llm: LLMPromptBuilder) -> None:
    base = llm.agent("You are terse.")
    first = base.request("Question 1").prompt_conversation()
    second = base.request("Question 2").model("echo").prompt_conversation()
    assert list(base.delta_messages) == [AgentMessage("You are terse.")]
    assert base.delta_config == {}
    assert texts(first.messages) == ["You are terse.", "Question 1"]
    assert texts(second.messages) == ["You are terse.", "Question 2"]
    assert first.config.preferred_model is None
    with pytest.raises(AttributeError, match="immutable"):
        base._conversation = first  # type: ignore[misc]


def test_req3_5_deltas_append_messages_and_update_config(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("one").prompt_conversation()
    conversation.continuation.request("two").provider("offline").prompt_conversation()
    assert texts(conversation.messages) == ["one", "two"]
    assert conversation.config.preferred_provider == "offline"


# --- requirement 4: conversation reference in builders -----------------------------------------


def test_req4_1_continuation_references_its_conversation(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("q").prompt_conversation()
    assert conversation.continuation.conversation is conversation
    assert conversation.continuation is not conversation.continuation  # a fresh builder each time


def test_req4_2_continuation_applies_to_the_referenced_conversation(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("q").prompt_conversation()
    again = conversation.continuation.request("more").prompt_conversation()
    assert again is conversation
    assert conversation.messages[-1] == TextMessage("more")


def test_req4_3_chaining_keeps_the_reference(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("q").prompt_conversation()
    chained = conversation.continuation.agent("a").assistant("b").model("m").tools(weather)
    assert chained.conversation is conversation
    assert chained.request("c").conversation is conversation


def test_req4_4_fresh_builder_creates_a_conversation_per_execution(llm: LLMPromptBuilder) -> None:
    assert llm.conversation is None
    builder = llm.request("q")
    first, second = builder.prompt_conversation(), builder.prompt_conversation()
    assert isinstance(first, LLMConversation)
    assert first is not second
    assert first.messages is not second.messages
    assert len(first.messages) == len(second.messages) == 1


async def test_req4_5_continuing_needs_no_conversation_passed(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("first").prompt_conversation()
    assert texts([m async for m in conversation]) == ["first"]
    continued = conversation.continuation.request("second").prompt_conversation()
    assert texts([m async for m in continued]) == ["second"]
    assert texts(conversation.messages) == ["first", "first", "second", "second"]


def test_builder_and_conversation_repr_say_what_they_hold(llm: LLMPromptBuilder) -> None:
    conversation = LLMConversation(config=ConversationConfig(tools=(Tool.client("ask"),)))
    assert "fresh" in repr(llm.request("q"))
    assert "1 delta messages" in repr(conversation.continuation.request("q"))
    assert "0 messages" in repr(conversation) and "idle" in repr(conversation)
