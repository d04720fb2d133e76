"""Messages: immutable values tagged by ``type``, and their one codec (seed 001, format "1.0").

Imports only the standard library. A message has no identity of its own: its place in a
MessageList (its index) is what storage and the API call it by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, ClassVar, Self

from app.domain.attachments import (
    Attachment,
    attachments_from_data,
    checked_attachments,
    write_attachments,
)
from app.domain.errors import MessageListDeserializationError, MessageListSerializationError


class Role(StrEnum):
    """Who speaks a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class Message:
    """Base of every message; subclasses carry a literal ``type`` tag."""

    type: ClassVar[str] = "Message"

    @property
    def role(self) -> Role:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def to_serializable_dict(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def from_serializable_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read one serialized message of this type (seed 001); ``type`` may be absent.

        ``Message.from_serializable_dict`` reads a message of any type, by its ``type``. Raises
        MessageListDeserializationError naming the bad field, as ``MessageList.from_dict`` does.
        """
        if cls is not Message and isinstance(data, Mapping) and "type" not in data:
            data = {**data, "type": cls.type}
        message = _read_message(data, "message")
        if not isinstance(message, cls):
            raise MessageListDeserializationError(
                f"message.type: expected {cls.type!r}, not {data.get('type')!r}"
            )
        return message


@dataclass(frozen=True)
class TextMessage(Message):
    """Plain text from the user or the assistant.

    ``incomplete`` marks an assistant message cut short by an abort or an upstream
    failure; it is serialized only when true (an optional field, see docs/format.md).
    """

    text: str
    role: Role = Role.USER
    incomplete: bool = False
    attachments: tuple[Attachment, ...] = ()
    """Files the message refers to (by id; version "1.2", see docs/format.md)."""
    type: ClassVar[str] = "TextMessage"

    def __post_init__(self) -> None:
        _check_text(self)
        object.__setattr__(self, "role", Role(self.role))  # "assistant" becomes Role.ASSISTANT
        object.__setattr__(self, "attachments", checked_attachments(self.attachments))

    def to_serializable_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "text": self.text, "role": self.role.value}
        if self.incomplete:
            data["incomplete"] = True
        write_attachments(self.attachments, data)
        return data


@dataclass(frozen=True)
class AgentMessage(Message):
    """A system prompt: instructions to the model."""

    text: str
    type: ClassVar[str] = "AgentMessage"

    def __post_init__(self) -> None:
        _check_text(self)

    @property
    def role(self) -> Role:
        return Role.SYSTEM

    def to_serializable_dict(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text, "role": Role.SYSTEM.value}


@dataclass(frozen=True)
class ToolCallMessage(Message):
    """A tool call by the assistant together with its result or error (seed 000/001).

    ``message`` is the assistant text that came with the call; when one reply makes several
    calls, the text rides on the first and the others carry "". ``pending`` marks a call to a
    client tool whose result the client has not posted yet; a pending call has neither result
    nor error. ``result`` is always a JSON value. ``error`` is a text or, as seed 001's
    ``_execute_tool_call`` returns it, the exception the tool raised: it serializes as the
    exception's message text and loads back as that text (``error_text``).
    """

    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | BaseException | None = None
    message: str = ""
    pending: bool = False
    attachments: tuple[Attachment, ...] = ()
    """Files the tool's result carries (images a tool returns), by reference."""
    type: ClassVar[str] = "ToolCallMessage"

    def __post_init__(self) -> None:
        object.__setattr__(self, "attachments", checked_attachments(self.attachments))
        if self.error is not None and not isinstance(self.error, str | BaseException):
            raise TypeError(
                "ToolCallMessage.error must be a str, an exception or None, "
                f"not {type(self.error).__name__}"
            )

    @property
    def error_text(self) -> str | None:
        """The error as text: an exception's message (its class name when it has none)."""
        return error_text(self.error)

    @property
    def role(self) -> Role:
        return Role.ASSISTANT

    def completed(
        self, result: Any = None, error: str | BaseException | None = None
    ) -> ToolCallMessage:
        """This call with its outcome filled in and no longer pending."""
        return replace(self, result=result, error=error, pending=False)

    def result_text(self) -> str:
        """The outcome as the text a model reads: the error, or the result as JSON."""
        if self.error is not None:
            return f"Error: {self.error_text}"
        if isinstance(self.result, str):
            return self.result
        return json.dumps(self.result, ensure_ascii=False)

    def to_serializable_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.type,
            "message": self.message,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error_text,
            "role": Role.ASSISTANT.value,
        }
        if self.pending:
            data["pending"] = True
        write_attachments(self.attachments, data)
        return data


@dataclass(frozen=True)
class ReasoningMessage(Message):
    """The model's reasoning in its turn (DESIGN §2a): visible text and an opaque payload.

    ``text`` is what may be shown (the thinking, or a summary of it; possibly empty).
    ``provider`` names the adapter that made it; ``payload`` is that provider's opaque data
    (Anthropic's signature or redacted data, OpenAI's reasoning item with its encrypted
    content), stored and handed back to that provider exactly as received, never read by
    Parley; ``None`` for reasoning that cannot be handed back. ``incomplete`` marks reasoning
    cut short by an abort: it is shown, never sent to a model.
    """

    text: str
    provider: str
    payload: dict[str, Any] | None = None
    incomplete: bool = False
    type: ClassVar[str] = "ReasoningMessage"

    def __post_init__(self) -> None:
        _check_text(self)
        if not isinstance(self.provider, str) or not self.provider.strip():
            raise TypeError("ReasoningMessage.provider must be a non-empty str")
        if self.payload is not None and not isinstance(self.payload, dict):
            kind = type(self.payload).__name__
            raise TypeError(f"ReasoningMessage.payload must be a dict or None, not {kind}")

    @property
    def role(self) -> Role:
        return Role.ASSISTANT

    @property
    def replayable(self) -> bool:
        """Whether it can go back to its provider: complete, with the provider's payload."""
        return self.payload is not None and not self.incomplete

    def to_serializable_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.type,
            "text": self.text,
            "provider": self.provider,
            "payload": self.payload,
            "role": Role.ASSISTANT.value,
        }
        if self.incomplete:
            data["incomplete"] = True
        return data


MESSAGE_TYPES: tuple[type[Message], ...] = (
    TextMessage,
    AgentMessage,
    ToolCallMessage,
    ReasoningMessage,
)
"""Every message type the codec reads and writes."""


def json_copy(value: Any) -> Any:
    """A copy of a JSON value's objects and arrays, so a document and the messages read from or
    written to it never share a mutable part (changing one does not change the other)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_copy(v) for v in value]
    return value


def error_text(error: str | BaseException | None) -> str | None:
    """An error as the text that is stored and sent: a str as is, an exception's message."""
    if error is None or isinstance(error, str):
        return error
    return str(error) or type(error).__name__


def _check_text(message: TextMessage | AgentMessage | ReasoningMessage) -> None:
    if not isinstance(message.text, str):
        raise TypeError(
            f"{type(message).__name__}.text must be a str, not {type(message.text).__name__}"
        )


# --- the codec -------------------------------------------------------------------------------


def describe(message: Message) -> str:
    """A short name for a message in error texts: its type and, for a tool call, its id."""
    if isinstance(message, ToolCallMessage):
        return f"ToolCallMessage {message.tool_call_id!r} of tool {message.tool_name!r}"
    return type(message).__name__


def message_to_dict(message: Message, index: int, *, copy: bool = False) -> dict[str, Any]:
    """Serialize one message; raise MessageListSerializationError naming it when impossible.

    ``copy=True`` gives a dict that shares no object or array with the message.
    """
    if not isinstance(message, MESSAGE_TYPES):
        raise MessageListSerializationError(
            f"message {index} is a {type(message).__name__}, which cannot be serialized"
        )
    try:
        data = message.to_serializable_dict()
        json.dumps(data, allow_nan=False)  # NaN and infinity are not JSON
        if copy:
            data = json_copy(data)
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise MessageListSerializationError(
            f"message {index} ({describe(message)}) holds a value that is not JSON: {exc}"
        ) from exc
    if isinstance(message, ToolCallMessage):  # what is written must read back
        problem = _unreadable_call(message)
        if problem:
            raise MessageListSerializationError(
                f"message {index} ({describe(message)}) cannot be read back: {problem}"
            )
    return data


def _unreadable_call(call: ToolCallMessage) -> str | None:
    """Why the reader would refuse this call, or None."""
    for name in ("tool_name", "tool_call_id"):
        value = getattr(call, name)
        if not isinstance(value, str) or not value.strip():
            return f"its {name} must be a non-empty string"
    if not isinstance(call.arguments, dict):
        return "its arguments must be an object"
    if call.pending and (call.result is not None or call.error is not None):
        return "a pending call cannot already have a result or an error"
    return None


class _Reader:
    """Reads the fields of one serialized message, naming where it is and the field on error."""

    def __init__(self, data: Mapping[str, Any], where: str, copy: bool) -> None:
        self.data = data
        self.where = where
        self.copy = copy

    def fail(self, field_name: str, problem: str) -> MessageListDeserializationError:
        return MessageListDeserializationError(f"{self.where}.{field_name}: {problem}")

    def text(self, name: str, *, required: bool = True, non_empty: bool = False) -> str:
        if name not in self.data:
            if required:
                raise self.fail(name, "is missing")
            return ""
        if self.data[name] is None and not required:  # an optional field: null is absent
            return ""
        value = self.data[name]
        if not isinstance(value, str):
            raise self.fail(name, f"must be a string, not {_json_type(value)}")
        if non_empty and not value.strip():
            raise self.fail(name, "must not be empty")
        return value

    def copied(self, name: str, value: Any) -> Any:
        """``value`` (the field ``name``) copied, so the message shares nothing with the data."""
        if not self.copy:
            return value
        try:
            return json_copy(value)
        except RecursionError:
            raise self.fail(name, "is nested too deeply") from None

    def flag(self, name: str) -> bool:
        value = self.data.get(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, not {_json_type(value)}")
        return value

    def role(self, allowed: tuple[Role, ...], default: Role | None = None) -> Role:
        if self.data.get("role") is None and default is not None:
            return default
        raw = self.data.get("role")
        for role in allowed:
            if raw == role.value:
                return role
        names = ", ".join(repr(r.value) for r in allowed)
        raise self.fail("role", f"must be one of {names}, not {raw!r}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def message_from_dict(data: Any, index: int, *, copy: bool = True) -> Message:
    """Deserialize one message; raise MessageListDeserializationError naming index and field.

    ``copy=False`` lets the message keep the data's objects and arrays: for data parsed just
    for it, which nothing else holds (storage's rows), the copy would be wasted work.
    """
    return _read_message(data, f"messages[{index}]", copy)


def _read_message(data: Any, where: str, copy: bool = True) -> Message:
    """Deserialize one message; errors start with ``where`` (``messages[3]``, ``message``)."""
    if not isinstance(data, Mapping):
        raise MessageListDeserializationError(f"{where}: must be an object, not {_json_type(data)}")
    r = _Reader(data, where, copy)
    kind = data.get("type")
    if kind == TextMessage.type:
        return TextMessage(
            text=r.text("text"),
            role=r.role((Role.USER, Role.ASSISTANT, Role.SYSTEM)),
            incomplete=r.flag("incomplete"),
            attachments=attachments_from_data(data.get("attachments"), where),
        )
    if kind == AgentMessage.type:
        r.role((Role.SYSTEM,), default=Role.SYSTEM)
        return AgentMessage(text=r.text("text"))
    if kind == ToolCallMessage.type:
        return _tool_call_from_dict(r)
    if kind == ReasoningMessage.type:
        return _reasoning_from_dict(r)
    known = ", ".join(t.type for t in MESSAGE_TYPES)
    raise r.fail("type", f"unknown message type {kind!r} (expected one of {known})")


def _tool_call_from_dict(r: _Reader) -> ToolCallMessage:
    r.role((Role.ASSISTANT,), default=Role.ASSISTANT)
    arguments = r.data.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise r.fail("arguments", f"must be an object, not {_json_type(arguments)}")
    error = r.data.get("error")
    if error is not None and not isinstance(error, str):
        raise r.fail("error", f"must be a string or null, not {_json_type(error)}")
    pending = r.flag("pending")
    result = r.data.get("result")
    if pending and (result is not None or error is not None):
        raise r.fail("pending", "a pending call cannot already have a result or an error")
    return ToolCallMessage(
        tool_name=r.text("tool_name", non_empty=True),
        tool_call_id=r.text("tool_call_id", non_empty=True),
        arguments=r.copied("arguments", arguments),
        result=r.copied("result", result),
        error=error,
        message=r.text("message", required=False),
        pending=pending,
        attachments=attachments_from_data(r.data.get("attachments"), r.where),
    )


def _reasoning_from_dict(r: _Reader) -> ReasoningMessage:
    r.role((Role.ASSISTANT,), default=Role.ASSISTANT)
    payload = r.data.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise r.fail("payload", f"must be an object or null, not {_json_type(payload)}")
    return ReasoningMessage(
        text=r.text("text", required=False),
        provider=r.text("provider", non_empty=True),
        payload=r.copied("payload", payload),
        incomplete=r.flag("incomplete"),
    )
