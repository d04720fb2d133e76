"""Seed 000, requirements 5–7: mutability, MessageList-only serialization, restoration."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    ConversationConfig,
    LLMConversation,
    LLMPromptBuilder,
    MessageList,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.providers import OfflineAdapter
from tests.domain.domain_support import (
    ScriptedAdapter,
    conversation_on,
    selector,
    text_reply,
    texts,
    tool_reply,
)


def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"key": key, "tags": {"b", "a"}}  # a set: not JSON, converted when the tool runs


def every_kind() -> MessageList:
    return MessageList(
        [
            AgentMessage("You are helpful."),
            TextMessage("Hello!", Role.ASSISTANT),
            TextMessage("What's the weather in Paris?"),
            ToolCallMessage(
                "get_weather", "call_1", {"location": "Paris"}, "Sunny", None, "Let me"
            ),
            ToolCallMessage("get_time", "call_2", {}, None, "ValueError: no clock"),
            ToolCallMessage("ask_user", "call_3", {"q": "sure?"}, pending=True),
            TextMessage("It is sun", Role.ASSISTANT, incomplete=True),
        ]
    )


# --- requirement 5: mutability ---------------------------------------------------------------


def test_req5_1_message_list_is_mutable_and_grows() -> None:
    messages = MessageList()
    messages.append(TextMessage("a"))
    messages.extend([TextMessage("b"), TextMessage("c")])
    messages.insert(0, AgentMessage("s"))
    messages.replace(1, TextMessage("A"))
    assert texts(messages) == ["s", "A", "b", "c"]
    with pytest.raises(TypeError, match="holds messages"):
        messages.append("not a message")  # type: ignore[arg-type]


async def test_req5_2_conversation_accumulates_state_while_iterating() -> None:
    adapter = ScriptedAdapter([tool_reply("", ("lookup", {"key": "k"}, "c1")), text_reply("done")])
    conversation = conversation_on(adapter, MessageList([TextMessage("go")]))
    conversation.apply_delta(config={"tools": [lookup]})
    sizes = [len(conversation.messages) async for _ in conversation]
    assert sizes == [2, 3]


def test_req5_3_builder_is_immutable(llm: LLMPromptBuilder) -> None:
    builder = llm.request("q")
    copy = builder.delta_messages
    copy.append(TextMessage("sneaked in"))
    assert len(builder.delta_messages) == 1
    config = builder.delta_config
    config["preferred_model"] = "x"
    assert builder.delta_config == {}
    with pytest.raises(AttributeError):
        builder._delta_config = {}  # type: ignore[misc]


async def test_req5_4_iterating_grows_the_message_list(llm: LLMPromptBuilder) -> None:
    conversation = (
        llm.agent("sys").assistant("Hello!").request("What is Python?").prompt_conversation()
    )
    seen = []
    async for _ in conversation:
        seen.append(len(conversation.messages))
    assert seen == [4]


async def test_req5_5_continuation_reflects_current_state(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("hello").prompt_conversation()
    early = conversation.continuation
    assert len(early.conversation.messages) == 1
    _ = [m async for m in conversation]
    assert len(early.conversation.messages) == 2
    assert len(conversation.continuation.conversation.messages) == 2


async def test_req5_6_reused_builders_do_not_contaminate(llm: LLMPromptBuilder) -> None:
    base = llm.agent("sys").request("shared")
    first = base.prompt_conversation()
    _ = [m async for m in first]
    second = base.prompt_conversation()
    assert texts(second.messages) == ["sys", "shared"]
    assert len(first.messages) == 3
    assert len(base.delta_messages) == 2


# --- requirement 6: MessageList-only serialization --------------------------------------------


def test_req6_1_to_dict_contains_only_message_data() -> None:
    conversation = LLMConversation(every_kind())
    conversation.apply_config_deltas({"provider": "anthropic", "tools": [lookup]})
    data = conversation.messages.to_dict()
    assert data == {"messages": data["messages"], "version": "1.0"}
    assert {m["type"] for m in data["messages"]} == {
        "AgentMessage",
        "TextMessage",
        "ToolCallMessage",
    }


def test_req6_2_from_dict_reconstructs_the_list() -> None:
    original = every_kind()
    assert MessageList.from_dict(original.to_dict()) == original


def test_req6_3_configuration_is_not_serialized(llm: LLMPromptBuilder) -> None:
    conversation = (
        llm.request("q").provider("offline").model("echo").tools(lookup).prompt_conversation()
    )
    text = json.dumps(conversation.messages.to_dict())
    for config_word in ("offline", "echo", "lookup", "Look a key up", "model", "provider", "tools"):
        assert config_word not in text


async def test_req6_4_deserialized_list_runs_with_any_config() -> None:
    restored = MessageList.from_dict(MessageList([TextMessage("hi there")]).to_dict())
    scripted = ScriptedAdapter([text_reply("from", " scripted")])
    on_scripted = LLMConversation(
        restored.copy(), ConversationConfig(model_selector=selector(scripted))
    )
    on_offline = LLMConversation(
        restored.copy(), ConversationConfig(model_selector=selector(OfflineAdapter()))
    )
    assert texts([m async for m in on_scripted]) == ["from scripted"]
    assert texts([m async for m in on_offline]) == ["hi there"]


def test_req6_5_every_message_type_keeps_its_complete_state() -> None:
    original = every_kind()
    restored = MessageList.from_dict(json.loads(json.dumps(original.to_dict())))
    assert list(restored) == list(original)
    call = restored[3]
    assert isinstance(call, ToolCallMessage)
    assert (call.message, call.arguments, call.result, call.error) == (
        "Let me",
        {"location": "Paris"},
        "Sunny",
        None,
    )
    assert isinstance(restored[5], ToolCallMessage) and restored[5].pending
    assert isinstance(restored[6], TextMessage) and restored[6].incomplete


async def test_req6_6_json_dump_of_to_dict_writes_a_file(llm: LLMPromptBuilder) -> None:
    conversation = llm.request('call lookup {"key": "k1"}').tools(lookup).prompt_conversation()
    _ = [m async for m in conversation]
    stream = io.StringIO()
    json.dump(conversation.messages.to_dict(), stream)
    data = json.loads(stream.getvalue())
    assert data["messages"][1]["result"] == {"key": "k1", "tags": ["a", "b"]}
    assert MessageList.from_dict(data) == conversation.messages


# --- requirement 7: flexible restoration --------------------------------------------------------


def test_req7_1_restored_list_makes_a_conversation() -> None:
    conversation = LLMConversation(MessageList.from_dict(every_kind().to_dict()))
    assert isinstance(conversation, LLMConversation)
    assert conversation.messages == every_kind()
    assert conversation.status == "requires_action"


async def test_req7_2_restored_conversation_takes_any_provider_model_tools() -> None:
    scripted = ScriptedAdapter([tool_reply("", ("lookup", {"key": "z"}, "c9")), text_reply("ok")])
    config = ConversationConfig(model_selector=selector(OfflineAdapter(), scripted))
    conversation = LLMConversation(
        MessageList.from_dict({"messages": [], "version": "1.0"}), config
    )
    conversation.continuation.provider("scripted").model("script-2").tools(lookup).request(
        "go"
    ).prompt_conversation()
    replies = [m async for m in conversation]
    assert isinstance(replies[0], ToolCallMessage) and replies[0].result["key"] == "z"
    assert scripted.requests[0].options.model == "script-2"
    assert [t.name for t in scripted.requests[0].tools] == ["lookup"]


async def test_req7_3_continuation_on_restored_works_like_the_original(
    llm: LLMPromptBuilder,
) -> None:
    original = llm.request("first").prompt_conversation()
    _ = [m async for m in original]
    restored = llm.load_conversation(original.messages.to_dict())
    for conversation in (original, restored):
        conversation.continuation.request("second").prompt_conversation()
        _ = [m async for m in conversation]
    assert restored.messages == original.messages


async def test_req7_4_continuing_needs_nothing_of_the_original_config(
    llm: LLMPromptBuilder,
) -> None:
    original = (
        llm.request('call lookup {"key": "a"}').tools(lookup).model("echo").prompt_conversation()
    )
    _ = [m async for m in original]
    restored = llm.load_conversation(original.messages.to_dict())
    assert restored.config.tools == () and restored.config.preferred_model is None
    reply = await restored.continuation.request("next question").prompt()
    assert reply == "next question"


async def test_req7_5_restored_behaves_identically(llm: LLMPromptBuilder) -> None:
    original = llm.agent("sys").request("hello world").prompt_conversation()
    restored = llm.load_conversation(io.StringIO(json.dumps(original.messages.to_dict())))
    outputs = []
    for conversation in (original, restored):
        outputs.append([m async for m in conversation])
    assert outputs[0] == outputs[1] == [TextMessage("hello world", Role.ASSISTANT)]
    assert original.messages.to_dict() == restored.messages.to_dict()
