"""What the repository returns: plain frozen values, never ORM rows; and the codecs it stores with.

Imports app.domain and the standard library. A message row holds that message's serialized JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.domain import (
    Attachment,
    Message,
    MessageListDeserializationError,
    MessageListSerializationError,
    ToolCallMessage,
)
from app.domain.messages import message_from_dict, message_to_dict
from app.storage.errors import (
    ConversationNotFound,
    DuplicateToolCall,
    InvalidCursor,
    StoredDataError,
)


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class ConversationRecord:
    """A conversation as stored, without its messages (``load_messages`` reads those)."""

    id: str
    owner: str
    created_at: datetime
    updated_at: datetime
    config: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    message_count: int
    pending_tool_call_ids: tuple[str, ...]
    lease_run_id: str | None
    lease_expires_at: datetime | None
    title: str | None = None
    archived: bool = False

    def is_running(self, now: datetime | None = None) -> bool:
        """Whether a run holds the lease and it has not expired at ``now`` (default: now)."""
        if self.lease_run_id is None or self.lease_expires_at is None:
            return False
        return self.lease_expires_at > (now or utcnow())


@dataclass(frozen=True)
class ToolOutcome:
    """The outcome a client posts for one of its pending tool calls: a result or an error."""

    tool_call_id: str
    result: Any = None
    error: str | None = None
    attachments: tuple[Attachment, ...] = ()
    """Files the result carries, by reference (recorded in ``file_refs`` with it)."""


# --- ids and cursors -------------------------------------------------------------------------


def new_conversation_id() -> str:
    """A fresh conversation id: a random UUID as 32 lowercase hex digits."""
    return uuid.uuid4().hex


def conversation_key(conversation_id: str) -> str:
    """The stored form of an id (any UUID spelling is accepted); ConversationNotFound if none."""
    try:
        return uuid.UUID(conversation_id).hex
    except (ValueError, TypeError, AttributeError):
        raise ConversationNotFound(str(conversation_id)) from None


def encode_cursor(created_at: datetime, conversation_id: str) -> str:
    """An opaque cursor for the position just after this conversation in a listing."""
    raw = json.dumps([created_at.isoformat(), conversation_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (created_at, id) position a cursor stands for; InvalidCursor if it is not ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, key = json.loads(raw)
        position = datetime.fromisoformat(created)
        if position.tzinfo is None or conversation_key(key) != key:
            raise ValueError("not a cursor")
        position = position.astimezone(UTC)  # a date near the calendar's end overflows here
    except (
        ValueError,
        TypeError,
        OverflowError,
        RecursionError,
        binascii.Error,
        ConversationNotFound,
    ):
        raise InvalidCursor(cursor) from None
    return position, key


# --- message rows ----------------------------------------------------------------------------


def dump_message(message: Message, index: int) -> str:
    """The JSON text stored for the message at ``index`` (the "1.0" message object)."""
    data = message_to_dict(message, index)
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise MessageListSerializationError(f"message {index} is not valid JSON: {exc}") from exc


def load_message(conversation_id: str, index: int, data: str) -> Message:
    """The message a stored row holds; StoredDataError naming conversation and index if bad."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise StoredDataError(conversation_id, index, f"not JSON ({exc})") from exc
    try:
        return message_from_dict(parsed, index, copy=False)  # parsed for it alone
    except MessageListDeserializationError as exc:
        raise StoredDataError(conversation_id, index, str(exc)) from exc


def stored_type(conversation_id: str, index: int, data: str) -> str:
    """The ``type`` tag of a stored message, without reading the rest of it."""
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise StoredDataError(conversation_id, index, f"not JSON ({exc})") from exc
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    if not isinstance(kind, str):
        raise StoredDataError(conversation_id, index, "no message type")
    return kind


def message_rows(key: str, start: int, messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The rows that store ``messages`` at ``start``, ``start + 1``, ... of conversation ``key``."""
    return [
        {
            "conversation_id": key,
            "idx": index,
            "data": dump_message(message, index),
            "pending_call_id": (
                message.tool_call_id
                if isinstance(message, ToolCallMessage) and message.pending
                else None
            ),
        }
        for index, message in enumerate(messages, start)
    ]


def check_unique_pending(key: str, rows: Iterable[dict[str, Any]], stored: set[str]) -> None:
    """DuplicateToolCall if a new pending call repeats another's id (stored or in ``rows``)."""
    seen = set(stored)
    for row in rows:
        call_id = row["pending_call_id"]
        if call_id is None:
            continue
        if call_id in seen:
            raise DuplicateToolCall(key, call_id)
        seen.add(call_id)


def to_record(row: Mapping[Any, Any], pending: tuple[str, ...]) -> ConversationRecord:
    """A conversations row (as a mapping by column name) as a record."""
    return ConversationRecord(
        id=row["id"],
        owner=row["owner"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        config=dict(row["config"]),
        metadata=dict(row["metadata"]),
        version=row["version"],
        message_count=row["message_count"],
        pending_tool_call_ids=pending,
        lease_run_id=row["lease_run_id"],
        lease_expires_at=row["lease_expires_at"],
        title=row.get("title"),
        archived=bool(row.get("archived", False)),
    )


def referenced_files(rows: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """The files new message rows refer to (their messages' ``attachments``), by conversation."""
    found: dict[str, list[str]] = {}
    for row in rows:
        data = row["data"]
        if '"attachments"' not in data:  # the rows of most messages: not parsed again
            continue
        items = json.loads(data).get("attachments") or ()
        found.setdefault(row["conversation_id"], []).extend(a["file_id"] for a in items)
    return found
