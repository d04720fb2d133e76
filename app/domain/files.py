"""Reading and writing serialized MessageLists: file names, Paths, streams (requirement 11).

Imports only the standard library and the domain. Every failure is one of two errors: the file
or stream could not be used (ConversationFileError) or its content is not a MessageList
(MessageListDeserializationError, naming the source).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from app.domain.errors import ConversationFileError, MessageListDeserializationError
from app.domain.message_list import MessageList

Source = str | Path | IO[str] | IO[bytes] | Mapping[str, Any]
"""Where a MessageList is loaded from: a file name, a Path, a readable stream, or the dict."""

Target = str | Path | IO[str] | IO[bytes]
"""Where a MessageList is saved: a file name, a Path or a writable (text or binary) stream."""


def source_name(source: Any) -> str:
    """How an error names a file or stream."""
    if isinstance(source, str | Path):
        return repr(str(source))
    name = getattr(source, "name", None)
    return repr(name) if isinstance(name, str) else f"the {type(source).__name__} stream"


def load_message_list(source: Source) -> MessageList:
    """The MessageList in ``source``; errors name the source, and the message index and field."""
    if isinstance(source, Mapping):
        return MessageList.from_dict(source)
    data = _read_json(source)
    try:
        return MessageList.from_dict(data)
    except MessageListDeserializationError as exc:
        raise MessageListDeserializationError(f"{source_name(source)}: {exc}") from exc


def _read_json(source: str | Path | IO[str] | IO[bytes]) -> Any:
    try:
        if isinstance(source, str | Path):
            with Path(source).open("rb") as f:
                return json.load(f)
        if callable(getattr(source, "read", None)):
            return json.load(source)
    except OSError as exc:
        raise ConversationFileError(
            f"cannot read a conversation from {source_name(source)}: {exc}"
        ) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MessageListDeserializationError(
            f"{source_name(source)} is not a JSON document: {exc}"
        ) from exc
    raise TypeError(
        "load_conversation takes a file name, a Path, a readable stream or a dict, "
        f"not {type(source).__name__}"
    )


def save_message_list(messages: MessageList, target: Target) -> None:
    """Write ``messages.to_dict()`` as JSON; nothing is written when a message cannot be."""
    text = json.dumps(messages.to_dict(), ensure_ascii=False, indent=2) + "\n"
    try:
        if isinstance(target, str | Path):
            Path(target).write_text(text, encoding="utf-8")
            return
        write = getattr(target, "write", None)
        if not callable(write):
            raise TypeError(
                f"save takes a file name, a Path or a writable stream, not {type(target).__name__}"
            )
        try:
            write(text)
        except TypeError:  # a binary stream
            write(text.encode("utf-8"))
    except OSError as exc:
        raise ConversationFileError(
            f"cannot write the conversation to {source_name(target)}: {exc}"
        ) from exc
