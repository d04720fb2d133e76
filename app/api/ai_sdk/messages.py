"""A conversation's stored messages as the AI SDK's ``UIMessage[]`` (``useChat``'s initial
messages), with stable ids.

May import the domain. An id names a position: ``<conversation id>-<index>``, the index of the
message's first stored message. A user or system message is one UIMessage; the assistant
messages between two user messages (reasoning, text, tool calls with their results) are one
assistant UIMessage whose parts are grouped in steps (``step-start``, one per model round) —
as the stream builds it (``app.api.ai_sdk.chunks``), whose ``start`` carries the same id
(``reply_id``). The same messages always give the same ids; only a rewind (which drops
positions, then fills them anew) and a fork (a new conversation id) change which exist.

A message's attachments are ``file`` parts (``url``: the file's content route, ``file_url``):
a user's before its text (as ``useChat`` sends them), an assistant's (images a model made)
before its text (as the stream shows them), a tool result's after its tool part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.api.ai_sdk.chunks import FileUrl, content_path
from app.domain import (
    AgentMessage,
    Attachment,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)

UIMessage = dict[str, Any]
Part = dict[str, Any]


def message_id(conversation_id: str, index: int) -> str:
    """The UIMessage id of the message (or the assistant group) starting at ``index``."""
    return f"{conversation_id}-{index}"


def index_of(conversation_id: str, ui_message_id: str | None) -> int | None:
    """The index an id of ours names in this conversation; None for any other id (one a
    client made up, or another conversation's)."""
    if not ui_message_id:
        return None
    prefix, sep, index = ui_message_id.rpartition("-")
    if not sep or prefix != conversation_id or not (index.isascii() and index.isdigit()):
        return None
    return int(index) if len(index) <= 9 else None


def _assistant(message: Message) -> bool:
    return not isinstance(message, AgentMessage) and message.role is Role.ASSISTANT


def reply_id(conversation_id: str, messages: Sequence[Message]) -> str:
    """The id of the reply a run starting on ``messages`` makes: a new assistant message after
    a user's, or the assistant message it continues (after client tools' results)."""
    start = len(messages)
    while start > 0 and _assistant(messages[start - 1]):
        start -= 1
    return message_id(conversation_id, start)


def ui_messages(
    conversation_id: str, messages: Sequence[Message], file_url: FileUrl = content_path
) -> list[UIMessage]:
    """The conversation as UIMessages, oldest first."""
    out: list[UIMessage] = []
    for index, message in enumerate(messages):
        if not _assistant(message):
            role = "system" if message.role is Role.SYSTEM else "user"
            text = message.text if isinstance(message, TextMessage | AgentMessage) else ""
            parts = _files(message, file_url)
            if text or not parts:  # files alone (as useChat sends them): no empty text part
                parts.append({"type": "text", "text": text, "state": "done"})
            out.append({"id": message_id(conversation_id, index), "role": role, "parts": parts})
            continue
        if not out or out[-1]["role"] != "assistant":
            out.append({"id": message_id(conversation_id, index), "role": "assistant", "parts": []})
        _add_parts(out[-1]["parts"], message, file_url)
    return out


def _files(message: Message, file_url: FileUrl) -> list[Part]:
    attachments: tuple[Attachment, ...] = getattr(message, "attachments", ())
    return [file_part(a, file_url) for a in attachments]


def file_part(attachment: Attachment, file_url: FileUrl) -> Part:
    """An attachment as a UIMessage's ``file`` part."""
    part: Part = {"type": "file", "mediaType": attachment.media_type}
    if attachment.name:
        part["filename"] = attachment.name
    part["url"] = file_url(attachment.file_id)
    return part


def _add_parts(parts: list[Part], message: Message, file_url: FileUrl) -> None:
    """Append ``message``'s parts to its assistant UIMessage, a step begun where a model round
    began: first, and after a round's tool calls. A reply's images come before its text (as
    the stream shows them), a tool result's files after its tool part."""
    shown = [p for p in parts if p["type"] != "file"]
    after_calls = bool(shown) and shown[-1]["type"].startswith("tool-")
    if not parts or (after_calls and not isinstance(message, ToolCallMessage)):
        parts.append({"type": "step-start"})
    if isinstance(message, ReasoningMessage | TextMessage):
        parts.extend(_files(message, file_url))
        if message.text:  # nothing to show (reasoning that is only its payload): no part
            kind = "reasoning" if isinstance(message, ReasoningMessage) else "text"
            parts.append(_marked({"type": kind, "text": message.text, "state": "done"}, message))
    elif isinstance(message, ToolCallMessage):
        if message.message:
            parts.append({"type": "text", "text": message.message, "state": "done"})
        parts.append(tool_part(message))
        parts.extend(_files(message, file_url))


def _marked(part: Part, message: TextMessage | ReasoningMessage) -> Part:
    """A part cut short by a stop or a failure says so: ``providerMetadata.parley``."""
    if message.incomplete:
        part["providerMetadata"] = {"parley": {"incomplete": True}}
    return part


def tool_part(call: ToolCallMessage) -> Part:
    """A tool call as a (static) tool part: waiting for a client's result, or with its
    outcome."""
    part: Part = {
        "type": f"tool-{call.tool_name}",
        "toolCallId": call.tool_call_id,
        "input": call.arguments,
    }
    if call.pending:
        part["state"] = "input-available"
    elif call.error is not None:
        part.update(state="output-error", errorText=call.error_text or "")
    else:
        part.update(state="output-available", output=call.result)
    return part
