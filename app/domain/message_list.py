"""MessageList: the mutable, serializable container of a conversation's messages (seed 001).

Imports only the standard library. It holds message data and the "1.0" serialization, nothing
about providers, models or tools (requirement 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from app.domain.errors import MessageListDeserializationError
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    ToolCallMessage,
    message_from_dict,
    message_to_dict,
)

FORMAT_VERSION = "1.0"
"""The version of a document holding only seed 001's message types: the seed's reader reads it."""
REASONING_FORMAT_VERSION = "1.1"
"""The version of a document that holds a ``ReasoningMessage`` (docs/format.md): a reader that
knows only "1.0" refuses it by its version instead of misreading it."""
ATTACHMENTS_FORMAT_VERSION = "1.2"
"""The version of a document whose messages carry attachments (file references, docs/format.md):
older readers refuse it by its version instead of dropping the files."""
SUPPORTED_VERSIONS = (FORMAT_VERSION, REASONING_FORMAT_VERSION, ATTACHMENTS_FORMAT_VERSION)


def format_version(messages: Iterable[Message]) -> str:
    """The lowest version that can hold ``messages``: "1.2" when one carries attachments,
    "1.1" when one is a ReasoningMessage, else "1.0"."""
    version = FORMAT_VERSION
    for m in messages:
        if getattr(m, "attachments", ()):
            return ATTACHMENTS_FORMAT_VERSION
        if isinstance(m, ReasoningMessage):
            version = REASONING_FORMAT_VERSION
    return version


class MessageList:
    """The single source of truth for a conversation's messages."""

    def __init__(self, messages: Iterable[Message] | None = None) -> None:
        self._messages: list[Message] = [_checked(m) for m in messages or ()]

    # --- mutation ---------------------------------------------------------------------------

    def append(self, message: Message) -> None:
        """Add one message at the end."""
        self._messages.append(_checked(message))

    def extend(self, messages: Iterable[Message]) -> None:
        """Add several messages at the end, in order."""
        self._messages.extend(_checked(m) for m in messages)

    def insert(self, index: int, message: Message) -> None:
        """Put ``message`` before the one at ``index``."""
        self._messages.insert(index, _checked(message))

    def replace(self, index: int, message: Message) -> None:
        """Put ``message`` in place of the one at ``index`` (completing a tool call)."""
        self._messages[index] = _checked(message)

    def clear(self) -> None:
        """Remove every message except the system prompts (seed 002)."""
        self._messages = [m for m in self._messages if isinstance(m, AgentMessage)]

    def copy(self) -> MessageList:
        """A new list holding the same (immutable) messages."""
        return MessageList(self._messages)

    # --- reading ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageList):
            return NotImplemented
        return self._messages == other._messages

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageList({self._messages!r})"

    def pending_tool_calls(self) -> list[tuple[int, ToolCallMessage]]:
        """The client tool calls still waiting for a result, with their indices."""
        return [
            (i, m)
            for i, m in enumerate(self._messages)
            if isinstance(m, ToolCallMessage) and m.pending
        ]

    def find_tool_call(self, tool_call_id: str) -> tuple[int, ToolCallMessage] | None:
        """The tool call with this id and its index, or None; the latest one if ids repeat."""
        for i in range(len(self._messages) - 1, -1, -1):
            m = self._messages[i]
            if isinstance(m, ToolCallMessage) and m.tool_call_id == tool_call_id:
                return i, m
        return None

    # --- serialization (only here) ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Serialize to the document ``{"messages": [...], "version": "1.0"}`` (``"1.1"`` when
        it holds reasoning, see ``format_version``).

        The document shares nothing with the messages: changing it leaves them as they are.
        """
        return {
            "messages": [message_to_dict(m, i, copy=True) for i, m in enumerate(self._messages)],
            "version": format_version(self._messages),
        }

    @classmethod
    def from_dict(cls, data: Any) -> MessageList:
        """Deserialize a "1.0", "1.1" or "1.2" document; errors name the bad index and field."""
        if not isinstance(data, Mapping):
            raise MessageListDeserializationError(
                f"a MessageList must be a JSON object, not {type(data).__name__}"
            )
        version = data.get("version")
        if version not in SUPPORTED_VERSIONS:
            expected = " or ".join(repr(v) for v in SUPPORTED_VERSIONS)
            raise MessageListDeserializationError(
                f"version: unsupported version {version!r} (expected {expected})"
            )
        raw = data.get("messages")
        if not isinstance(raw, list):
            raise MessageListDeserializationError("messages: must be an array of messages")
        return cls(message_from_dict(item, i) for i, item in enumerate(raw))


def _checked(message: Message) -> Message:
    if not isinstance(message, Message):
        raise TypeError(f"a MessageList holds messages, not {type(message).__name__}")
    return message
