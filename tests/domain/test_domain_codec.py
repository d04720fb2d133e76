"""The serialized format "1.0": exactly seed 001's shape, readable by the seed's own reader."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from app.domain import (
    FORMAT_VERSION,
    AgentMessage,
    Message,
    MessageList,
    MessageListDeserializationError,
    MessageListSerializationError,
    Role,
    TextMessage,
    ToolCallMessage,
)

# Seed 001's example document, verbatim.
SEED_EXAMPLE = json.loads("""
{
    "messages": [
        {"type": "AgentMessage", "text": "You are a helpful assistant", "role": "system"},
        {"type": "TextMessage", "text": "Hello! How can I help you today?", "role": "assistant"},
        {"type": "TextMessage", "text": "What's the weather in Paris?", "role": "user"},
        {
            "type": "ToolCallMessage",
            "message": "I'll check the weather for you",
            "tool_name": "get_weather",
            "tool_call_id": "call_123",
            "arguments": {"location": "Paris"},
            "result": "Sunny, 22°C",
            "error": null,
            "role": "assistant"
        }
    ],
    "version": "1.0"
}
""")


def seed_reader(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Seed 001's MessageList.from_dict, with each message's from_serializable_dict.

    It checks the version, dispatches on ``type`` and reads the fields the seed reads; it knows
    nothing of Parley's optional fields.
    """
    if data.get("version") != "1.0":
        raise ValueError(f"Unsupported version: {data.get('version')}")
    read = {
        "TextMessage": lambda d: {"text": d["text"], "role": Role(d["role"])},
        "AgentMessage": lambda d: {"text": d["text"]},
        "ToolCallMessage": lambda d: {
            "message": d["message"],
            "tool_name": d["tool_name"],
            "tool_call_id": d["tool_call_id"],
            "arguments": d["arguments"],
            "result": d["result"],
            "error": d["error"],
        },
    }
    out = []
    for msg_data in data["messages"]:
        msg_type = msg_data["type"]
        if msg_type not in read:
            raise ValueError(f"Unknown message type: {msg_type}")
        out.append((msg_type, read[msg_type](msg_data)))
    return out


def parley_messages() -> MessageList:
    return MessageList(
        [
            AgentMessage("sys"),
            TextMessage("cut", Role.ASSISTANT, incomplete=True),
            ToolCallMessage("ask", "c1", {"q": "?"}, pending=True, message="Asking."),
            ToolCallMessage("f", "c2", {}, result=[1, {"a": None}]),
        ]
    )


def test_the_seed_example_reads_and_writes_back_identically() -> None:
    messages = MessageList.from_dict(SEED_EXAMPLE)
    assert messages[3] == ToolCallMessage(
        "get_weather", "call_123", {"location": "Paris"}, "Sunny, 22°C", None,
        "I'll check the weather for you",
    )  # fmt: skip
    assert messages.to_dict() == SEED_EXAMPLE
    assert messages.to_dict()["version"] == FORMAT_VERSION == "1.0"


def test_written_documents_have_exactly_the_seed_keys_plus_documented_options() -> None:
    document = json.loads(json.dumps(parley_messages().to_dict()))
    keys = [set(m) for m in document["messages"]]
    seed_call_keys = {"type", "message", "tool_name", "tool_call_id", "arguments", "result"}
    assert keys == [
        {"type", "text", "role"},
        {"type", "text", "role", "incomplete"},
        seed_call_keys | {"error", "role", "pending"},
        seed_call_keys | {"error", "role"},
    ]
    assert document["messages"][1]["incomplete"] is True
    assert document["messages"][2]["pending"] is True
    assert document["messages"][2]["result"] is None and document["messages"][2]["error"] is None
    plain = TextMessage("x", Role.ASSISTANT).to_serializable_dict()
    assert "incomplete" not in plain  # written only when true


def test_the_seeds_own_reader_reads_what_parley_writes() -> None:
    read = seed_reader(json.loads(json.dumps(parley_messages().to_dict())))
    assert [kind for kind, _ in read] == [
        "AgentMessage",
        "TextMessage",
        "ToolCallMessage",
        "ToolCallMessage",
    ]
    assert read[1][1] == {"text": "cut", "role": Role.ASSISTANT}
    assert read[2][1]["tool_call_id"] == "c1" and read[2][1]["result"] is None
    assert read[3][1]["result"] == [1, {"a": None}]


def test_unknown_fields_are_ignored_and_optional_ones_default() -> None:
    document = {
        "version": "1.0",
        "saved_by": "a future Parley",
        "messages": [
            {"type": "AgentMessage", "text": "s"},
            {"type": "TextMessage", "text": "t", "role": "system", "tokens": 3},
            {"type": "ToolCallMessage", "tool_name": "f", "tool_call_id": "c"},
        ],
    }
    assert list(MessageList.from_dict(document)) == [
        AgentMessage("s"),
        TextMessage("t", Role.SYSTEM),
        ToolCallMessage("f", "c"),
    ]


def test_an_optional_field_written_as_null_reads_as_absent() -> None:
    # seed 001's run loop stores ``message=response.get("text", "")``, which is None for a
    # reply of tool calls without text: its documents may hold "message": null
    document = {
        "version": "1.0",
        "messages": [
            {"type": "AgentMessage", "text": "s", "role": None},
            {"type": "TextMessage", "text": "t", "role": "assistant", "incomplete": None},
            {
                "type": "ToolCallMessage",
                "message": None,
                "tool_name": "f",
                "tool_call_id": "c",
                "arguments": None,
                "result": None,
                "error": None,
                "role": None,
                "pending": None,
            },
        ],
    }
    messages = MessageList.from_dict(document)
    assert list(messages) == [
        AgentMessage("s"),
        TextMessage("t", Role.ASSISTANT),
        ToolCallMessage("f", "c", {}, message=""),
    ]
    for required in ("text", "role"):
        bad = {"type": "TextMessage", "text": "t", "role": "user", required: None}
        with pytest.raises(MessageListDeserializationError, match=rf"messages\[0\]\.{required}"):
            MessageList.from_dict({"version": "1.0", "messages": [bad]})


def test_messages_coerce_roles_and_check_text() -> None:
    assert TextMessage("x", "assistant").role is Role.ASSISTANT  # type: ignore[arg-type]
    assert TextMessage("x").role is Role.USER and AgentMessage("s").role is Role.SYSTEM
    assert ToolCallMessage("f", "c").role is Role.ASSISTANT
    with pytest.raises(TypeError, match=r"TextMessage\.text must be a str, not int"):
        TextMessage(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AgentMessage\.text must be a str"):
        AgentMessage(None)  # type: ignore[arg-type]


def test_result_text_is_what_a_model_reads() -> None:
    assert ToolCallMessage("f", "c", result="plain").result_text() == "plain"
    assert ToolCallMessage("f", "c", result={"é": 1}).result_text() == '{"é": 1}'
    assert ToolCallMessage("f", "c", result=None).result_text() == "null"
    assert ToolCallMessage("f", "c", error="bad").result_text() == "Error: bad"


def test_message_list_reads_like_a_sequence() -> None:
    messages = parley_messages()
    assert len(messages) == 4 and bool(MessageList()) is False
    assert messages[1:3] == [messages[1], messages[2]]
    copy = messages.copy()
    copy.append(TextMessage("more"))
    assert len(messages) == 4 and copy != messages
    assert messages == parley_messages() and messages != list(messages)
    assert "MessageList([AgentMessage(text='sys')" in repr(messages)
    with pytest.raises(TypeError):
        hash(messages)
    with pytest.raises(TypeError, match="not str"):
        MessageList(["text"])  # type: ignore[list-item]


def test_each_message_type_reads_its_serialized_dict_as_seed_001_declares() -> None:
    data = SEED_EXAMPLE["messages"]
    assert AgentMessage.from_serializable_dict(data[0]) == AgentMessage(
        "You are a helpful assistant"
    )
    assert TextMessage.from_serializable_dict(data[1]) == TextMessage(
        "Hello! How can I help you today?", Role.ASSISTANT
    )
    call = ToolCallMessage.from_serializable_dict(data[3])
    assert call.tool_call_id == "call_123" and call.result == "Sunny, 22°C"
    for message in parley_messages():
        written = message.to_serializable_dict()
        assert type(message).from_serializable_dict(written) == message
        assert Message.from_serializable_dict(written) == message  # dispatches on ``type``
    assert TextMessage.from_serializable_dict({"text": "t", "role": "user"}) == TextMessage("t")


def test_a_message_types_reader_refuses_bad_data_naming_the_field() -> None:
    with pytest.raises(MessageListDeserializationError, match=r"^message\.role: must be one of"):
        TextMessage.from_serializable_dict({"type": "TextMessage", "text": "t", "role": "robot"})
    with pytest.raises(MessageListDeserializationError, match=r"^message\.tool_call_id: is miss"):
        ToolCallMessage.from_serializable_dict({"tool_name": "f"})
    with pytest.raises(MessageListDeserializationError, match="expected 'TextMessage', not 'Agen"):
        TextMessage.from_serializable_dict({"type": "AgentMessage", "text": "s"})
    with pytest.raises(MessageListDeserializationError, match=r"^message: must be an object"):
        AgentMessage.from_serializable_dict([])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (ToolCallMessage("", "c1"), "its tool_name must be a non-empty string"),
        (ToolCallMessage("f", " "), "its tool_call_id must be a non-empty string"),
        (ToolCallMessage("f", "c1", pending=True, result=1), "a pending call cannot already"),
        (ToolCallMessage("f", "c1", pending=True, error="x"), "a pending call cannot already"),
    ],
)
def test_a_call_that_could_not_be_read_back_is_not_written(
    call: ToolCallMessage, problem: str
) -> None:
    messages = MessageList([TextMessage("hi"), call])
    with pytest.raises(MessageListSerializationError, match=rf"^message 1 \(.*\) .*{problem}"):
        messages.to_dict()


def test_a_document_and_the_messages_read_from_or_written_to_it_share_nothing() -> None:
    document = json.loads(json.dumps(SEED_EXAMPLE))
    document["messages"][3]["result"] = {"sky": ["sunny"]}
    messages = MessageList.from_dict(document)
    document["messages"][3]["arguments"]["location"] = "Oslo"
    document["messages"][3]["result"]["sky"].append("rain")
    call = messages[3]
    assert isinstance(call, ToolCallMessage)
    assert call.arguments == {"location": "Paris"} and call.result == {"sky": ["sunny"]}
    written = messages.to_dict()
    written["messages"][3]["arguments"]["location"] = "Rome"
    written["messages"][3]["result"]["sky"].clear()
    assert call.arguments == {"location": "Paris"} and call.result == {"sky": ["sunny"]}
    assert messages.to_dict()["messages"][3]["result"] == {"sky": ["sunny"]}


def test_data_nested_past_what_python_can_copy_is_refused_naming_the_field() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    call = {"type": "ToolCallMessage", "tool_name": "f", "tool_call_id": "c", "result": deep}
    with pytest.raises(MessageListDeserializationError, match=r"messages\[0\]\.result: is nested"):
        MessageList.from_dict({"version": "1.0", "messages": [call]})
    with pytest.raises(MessageListSerializationError, match=r"^message 0 "):
        MessageList([ToolCallMessage("f", "c", result=deep)]).to_dict()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_number_json_cannot_hold_is_refused_naming_the_message(value: float) -> None:
    messages = MessageList([TextMessage("hi"), ToolCallMessage("f", "c9", {"x": value})])
    with pytest.raises(MessageListSerializationError, match=r"^message 1 \(ToolCallMessage 'c9'"):
        messages.to_dict()
