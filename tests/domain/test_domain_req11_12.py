"""Seed 000, requirements 11–12: load/save conveniences, errors and validation."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    ConversationConfigurationError,
    ConversationFileError,
    DeltaApplicationError,
    LLMConversation,
    LLMPromptBuilder,
    Message,
    MessageList,
    MessageListDeserializationError,
    MessageListSerializationError,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolResult,
)

SAVED = MessageList([AgentMessage("sys"), TextMessage("hi"), TextMessage("hello", Role.ASSISTANT)])


def saved_document() -> dict[str, Any]:
    return SAVED.to_dict()


# --- requirement 11: load and save ------------------------------------------------------------


def test_req11_1_load_from_a_file_name(llm: LLMPromptBuilder, tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(saved_document()), encoding="utf-8")
    conversation = llm.load_conversation(str(tmp_path / "c.json"))
    assert isinstance(conversation, LLMConversation)
    assert conversation.messages == SAVED


def test_req11_2_load_from_a_text_or_binary_stream(llm: LLMPromptBuilder) -> None:
    text = json.dumps(saved_document())
    assert llm.load_conversation(io.StringIO(text)).messages == SAVED
    assert llm.load_conversation(io.BytesIO(text.encode())).messages == SAVED


def test_req11_3_load_from_a_path(llm: LLMPromptBuilder, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(saved_document()), encoding="utf-8")
    assert llm.load_conversation(path).messages == SAVED


async def test_req11_4_load_from_a_dict_then_apply_deltas(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("and now?").load_conversation(saved_document())
    assert list(conversation.messages)[:3] == list(SAVED)
    assert conversation.messages[-1] == TextMessage("and now?")
    assert [m async for m in conversation] == [TextMessage("and now?", Role.ASSISTANT)]


def test_req11_5_save_to_a_file_name(tmp_path: Path) -> None:
    LLMConversation(SAVED.copy()).save(str(tmp_path / "out.json"))
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == saved_document()


def test_req11_6_save_to_a_text_or_binary_stream() -> None:
    text, binary = io.StringIO(), io.BytesIO()
    conversation = LLMConversation(MessageList([TextMessage("naïve ☀")]))
    conversation.save(text)
    conversation.save(binary)
    assert json.loads(text.getvalue()) == conversation.messages.to_dict()
    assert json.loads(binary.getvalue().decode("utf-8")) == conversation.messages.to_dict()
    assert "naïve ☀" in text.getvalue()  # readable, not \u-escaped


def test_req11_7_save_to_a_path_and_load_it_back(llm: LLMPromptBuilder, tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    LLMConversation(SAVED.copy()).save(path)
    assert llm.load_conversation(path).messages == SAVED


def test_req11_8_missing_file_is_a_clear_file_error(llm: LLMPromptBuilder, tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(
        ConversationFileError, match=r"cannot read a conversation from .*nope\.json"
    ):
        llm.load_conversation(missing)
    with pytest.raises(OSError):  # a ConversationFileError is an OSError too
        llm.load_conversation(str(missing))
    with pytest.raises(ConversationFileError, match="cannot write the conversation to"):
        LLMConversation(SAVED.copy()).save(tmp_path)  # a directory


def test_req11_8_bad_json_and_bad_data_name_the_file(llm: LLMPromptBuilder, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(
        MessageListDeserializationError, match=r"broken\.json.* not a JSON document"
    ):
        llm.load_conversation(broken)
    bad = tmp_path / "bad.json"
    document = saved_document()
    document["messages"][1]["role"] = "robot"
    bad.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(MessageListDeserializationError, match=r"bad\.json.*messages\[1\]\.role"):
        llm.load_conversation(bad)


def test_req11_8_wrong_kind_of_source_or_target(llm: LLMPromptBuilder) -> None:
    with pytest.raises(TypeError, match="load_conversation takes a file name"):
        llm.load_conversation(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="save takes a file name"):
        LLMConversation().save(42)  # type: ignore[arg-type]


def test_req11_8_unserializable_conversation_writes_nothing(tmp_path: Path) -> None:
    messages = MessageList([ToolCallMessage("t", "c1", {}, result={1, 2})])
    with pytest.raises(MessageListSerializationError, match="message 0"):
        LLMConversation(messages).save(tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


# --- requirement 12: errors -----------------------------------------------------------------------


def one(**message: Any) -> dict[str, Any]:
    """A "1.0" document holding one message."""
    return {"version": "1.0", "messages": [message]}


TEXT = {"type": "TextMessage", "text": "x", "role": "user"}
CALL = {"type": "ToolCallMessage", "tool_name": "t", "tool_call_id": "c"}

BAD_DOCUMENTS = [
    ([], "must be a JSON object"),
    ({"messages": []}, "version: unsupported version None"),
    ({"version": "2.0", "messages": []}, "unsupported version '2.0'"),
    ({"version": "1.0"}, "messages: must be an array"),
    ({"version": "1.0", "messages": ["hi"]}, r"messages\[0\]: must be an object"),
    (one(type="Photo"), r"messages\[0\]\.type: unknown .*'Photo'"),
    (one(type="TextMessage", role="user"), r"messages\[0\]\.text: is missing"),
    (one(**{**TEXT, "text": 3}), r"\.text: must be a string, not a number"),
    (one(**{**TEXT, "role": "bot"}), r"\.role: must be one of"),
    (one(**TEXT, incomplete="yes"), r"\.incomplete: must be true or false"),
    (one(**{**TEXT, "type": "AgentMessage"}), r"\.role: must be one of 'system'"),
    (one(type="ToolCallMessage", tool_call_id="c"), r"\.tool_name: is missing"),
    (one(**{**CALL, "tool_name": " "}), r"\.tool_name: must not be empty"),
    (one(**CALL, arguments=[]), r"\.arguments: must be an object, not an array"),
    (one(**CALL, error={}), r"\.error: must be a string or null, not an object"),
    (one(**CALL, pending=True, result=1), r"\.pending: a pending call cannot already have"),
]


@pytest.mark.parametrize(("data", "expected"), BAD_DOCUMENTS)
def test_req12_1_invalid_data_says_what_is_invalid(data: Any, expected: str) -> None:
    with pytest.raises(MessageListDeserializationError, match=expected):
        MessageList.from_dict(data)


def test_req12_1_the_index_names_the_bad_message() -> None:
    document = saved_document()
    document["messages"].append({"type": "TextMessage", "text": "x", "role": None})
    with pytest.raises(MessageListDeserializationError, match=r"^messages\[3\]\.role"):
        MessageList.from_dict(document)


def test_req12_2_serialization_error_names_the_message() -> None:
    class Photo(Message):
        pass

    calls = MessageList([TextMessage("a"), ToolCallMessage("lookup", "c7", {"when": object()})])
    with pytest.raises(
        MessageListSerializationError, match=r"message 1 \(ToolCallMessage 'c7' of tool 'lookup'\)"
    ):
        calls.to_dict()
    with pytest.raises(MessageListSerializationError, match="message 0 is a Photo"):
        MessageList([Photo()]).to_dict()


def test_req12_3_assistant_injection_misuse_is_explained(llm: LLMPromptBuilder) -> None:
    with pytest.raises(TypeError, match=r"\.assistant\(\) takes text \(a str\), not NoneType"):
        llm.assistant(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"\.request\(\) takes text"):
        llm.request(["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'robot' is not a valid Role"):
        TextMessage("hi", "robot")  # type: ignore[arg-type]


def test_req12_4_failed_delta_explains_and_changes_nothing(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("q").prompt_conversation()
    before = conversation.messages.copy()
    with pytest.raises(
        DeltaApplicationError, match=r"Unknown config key: 'colour' \(known: .*max_tool_rounds"
    ):
        conversation.apply_delta([TextMessage("x")], {"colour": "blue"})
    with pytest.raises(DeltaApplicationError, match="no tool call has id 'call_9'"):
        conversation.apply_delta([TextMessage("x")], tool_results=[ToolResult("call_9", 1)])
    with pytest.raises(DeltaApplicationError, match="delta message 1 is a str"):
        conversation.apply_delta([TextMessage("x"), "y"])  # type: ignore[list-item]
    with pytest.raises(DeltaApplicationError, match="temperature: must be a number from 0 to 2"):
        conversation.continuation.configure(temperature=5)
    with pytest.raises(
        DeltaApplicationError, match="preferred_provider: must be a non-empty string"
    ):
        llm.provider("  ")
    assert conversation.messages == before


def test_req12_5_malformed_conversation_gets_an_actionable_error() -> None:
    conversation = LLMConversation()
    conversation.messages = [TextMessage("hi")]  # type: ignore[assignment]
    with pytest.raises(
        ConversationConfigurationError,
        match=r"must be a MessageList, not list.*MessageList\.from_dict",
    ):
        _ = conversation.continuation
    with pytest.raises(ConversationConfigurationError, match="must be a MessageList"):
        LLMConversation([TextMessage("hi")])  # type: ignore[arg-type]
    with pytest.raises(ConversationConfigurationError, match="config must be a ConversationConfig"):
        LLMConversation(config={"provider": "x"})  # type: ignore[arg-type]
