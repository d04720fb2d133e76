"""Seed 002, every scenario: conversation management on LLMConversation and its MessageList."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.domain import (
    AgentMessage,
    ConversationConfig,
    ConversationFileError,
    LLMConversation,
    LLMPromptBuilder,
    MessageList,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    approximate_tokens,
)
from tests.domain.domain_support import ScriptedAdapter, conversation_on, tool_reply


def chat(turns: int, chars: int = 800) -> LLMConversation:
    conversation = LLMConversation(system_prompt="You are a helpful assistant.")
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        conversation.add(role, f"{i:04d} " + "x" * (chars - 5))
    return conversation


def test_seed002_create_empty_conversation() -> None:
    conversation = LLMConversation()
    assert list(conversation.messages) == []
    assert conversation.status == "idle"


def test_seed002_create_conversation_with_system_prompt() -> None:
    conversation = LLMConversation(system_prompt="  You are a helpful assistant. ")
    assert list(conversation.messages) == [AgentMessage("You are a helpful assistant.")]
    assert conversation.messages[0].role is Role.SYSTEM


def test_seed002_add_user_message() -> None:
    conversation = LLMConversation(system_prompt="sys")
    added = conversation.add("user", "Hello, world!")
    assert added == TextMessage("Hello, world!", Role.USER)
    assert conversation.messages[-1] == added


def test_seed002_add_assistant_message() -> None:
    conversation = LLMConversation()
    conversation.add(Role.USER, "hi")
    conversation.add("assistant", "Hello! How can I help you?")
    assert conversation.messages[-1] == TextMessage("Hello! How can I help you?", Role.ASSISTANT)
    assert conversation.add("system", "Be brief.") == AgentMessage("Be brief.")
    with pytest.raises(ValueError, match="add_tool_result"):
        conversation.add("tool", "72°F")


async def test_seed002_add_tool_message() -> None:
    adapter = ScriptedAdapter([tool_reply("", ("get_weather", {"city": "SF"}, "call_123"))])
    conversation = conversation_on(adapter, tools=(Tool.client("get_weather"),))
    conversation.add("user", "Weather in SF?")
    [requested] = [m async for m in conversation]
    assert isinstance(requested, ToolCallMessage) and requested.pending
    completed = conversation.add_tool_result("call_123", "Weather: 72°F sunny")
    assert completed.result == "Weather: 72°F sunny" and not completed.pending
    assert conversation.messages[-1] == completed
    tool_messages = [m for m in conversation.to_openai_format() if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "call_123", "content": "Weather: 72°F sunny"}
    ]


def test_seed002_get_all_messages() -> None:
    conversation = LLMConversation(system_prompt="sys")
    conversation.add("user", "one")
    conversation.add("assistant", "two")
    conversation.add("user", "three")
    assert [m.role for m in conversation.messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert [getattr(m, "text", None) for m in conversation.messages] == [
        "sys",
        "one",
        "two",
        "three",
    ]


def test_seed002_clear_keeps_system_prompt() -> None:
    conversation = chat(6)
    conversation.messages.append(ToolCallMessage("t", "c1", {}, result=1))
    conversation.clear()
    assert list(conversation.messages) == [AgentMessage("You are a helpful assistant.")]
    conversation.clear()
    assert len(conversation.messages) == 1


def test_seed002_context_within_token_limit() -> None:
    conversation = chat(50)
    assert conversation.token_count() > 10_000
    window = conversation.get_context(max_tokens=4000)
    assert window.total_tokens <= 4000
    assert window.messages[0] == conversation.messages[0]  # the system prompt is always kept
    assert window.messages[-1] == conversation.messages[-1]  # the most recent come first
    assert window.indices == (0, *range(51 - len(window.indices) + 1, 51))  # an unbroken tail
    assert window.dropped == 51 - len(window.indices) > 0
    cost_of_next = window.token_counts[1]
    assert window.total_tokens + cost_of_next > 4000  # nothing more would have fitted
    # the window reads as the messages that fit
    assert len(window) == len(window.messages) and list(window) == list(window.messages)
    assert window[0] == conversation.messages[0] and window[-1] == conversation.messages[-1]
    assert window[1:] == window.messages[1:]


def test_seed002_token_counting() -> None:
    conversation = LLMConversation(system_prompt="12345678")
    conversation.add("user", "1234")
    assert approximate_tokens("12345678") == 2
    assert conversation.token_count() == (2 + 4) + (1 + 4)  # text plus framing per message
    assert conversation.token_count(counter=len) == (8 + 4) + (4 + 4)
    assert LLMConversation().token_count() == 0


def test_seed002_convert_to_openai_messages() -> None:
    conversation = LLMConversation(system_prompt="You are helpful.")
    conversation.add("user", "Hi")
    conversation.add("assistant", "Hello!")
    assert conversation.to_openai_format() == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_seed002_save_conversation_to_file(tmp_path: Path) -> None:
    conversation = chat(3)
    conversation.save(tmp_path / "conversation.json")
    saved = json.loads((tmp_path / "conversation.json").read_text(encoding="utf-8"))
    assert saved == conversation.messages.to_dict()
    assert saved["version"] == "1.0" and len(saved["messages"]) == 4


def test_seed002_load_conversation_from_file(tmp_path: Path, llm: LLMPromptBuilder) -> None:
    chat(3).save(str(tmp_path / "conversation.json"))
    loaded = llm.load_conversation(str(tmp_path / "conversation.json"))
    assert loaded.messages == chat(3).messages
    assert MessageList.from_dict(loaded.messages.to_dict()) == loaded.messages


def test_seed002_load_is_on_the_conversation_too(tmp_path: Path) -> None:
    saved = chat(3)
    saved.save(tmp_path / "conversation.json")
    loaded = LLMConversation.load(str(tmp_path / "conversation.json"))
    assert loaded.messages == saved.messages and loaded.config.tools == ()
    config = ConversationConfig(preferred_provider="offline")
    from_path = LLMConversation.load(tmp_path / "conversation.json", config)
    assert from_path.messages == saved.messages and from_path.config is config
    assert LLMConversation.load(saved.messages.to_dict()).messages == saved.messages
    with pytest.raises(ConversationFileError, match=r"missing\.json"):
        LLMConversation.load(tmp_path / "missing.json")
