"""The AI SDK's chat request (``DefaultChatTransport``'s default body) and what it asks of
Parley: the delta to run with, and how far to rewind first.

May import pydantic, the settings, the api's convert module, the runs layer and the domain.
The body carries the whole chat as the client holds it; Parley's stored conversation is the
truth, so only the end of it is read:

- ``submit-message``, last message a user's: its text parts (joined by a blank line) are the
  delta's user message, its ``file`` parts the message's attachments (``files``: a ``data:``
  URL, as ``useChat`` sends an attached file, is stored as a file on arrival; a file's content
  URL, as ``?format=ai-sdk`` shows it, refers to that file). With ``messageId`` naming one of
  Parley's user messages (an edit), the conversation is first rewound to just before it.
- ``submit-message``, last message an assistant's: the tool parts in state
  ``output-available`` / ``output-error`` whose calls are pending (``addToolResult``) are the
  delta's tool results.
- ``regenerate-message``: the last reply (or the one ``messageId`` names) is rewound away and
  the model runs again on what is left; nothing else is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.ai_sdk.messages import index_of
from app.api.convert import check_text, check_unicode
from app.domain import AgentMessage, Message, Role, TextMessage, ToolResult
from app.runs.delta import Delta
from app.runs.errors import InvalidInput
from app.settings import Settings

MAX_PARTS = 200
MAX_FILES = 20  # as a delta's user message (UserMessageIn.attachments)

Loc = tuple[str | int, ...]
FilePart = tuple[Loc, str, str | None]


class UIMessageIn(BaseModel):
    """A message as `useChat` holds it (`UIMessage`): only the parts Parley reads are
    checked (`text`; `file` with `url`, a `data:` URL or a file's content URL, and
    `filename`; tool parts with `toolCallId`, `state`, `output` or `errorText`)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(max_length=200)
    role: Literal["system", "user", "assistant"]
    # Any JSON object (the body is JSON: checked as it came in); read by ``ask`` alone.
    parts: list[dict[str, Any]] = Field(max_length=MAX_PARTS)


class ChatRequest(BaseModel):
    """`DefaultChatTransport`'s request body. `id` is the Parley conversation's id (give it to
    `useChat({id})`); other fields a transport adds (its `body` option) are ignored."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "id": "0123456789abcdef0123456789abcdef",
                    "trigger": "submit-message",
                    "messages": [
                        {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
                    ],
                }
            ]
        },
    )

    id: str = Field(min_length=1, max_length=200, description="The conversation id.")
    messages: list[UIMessageIn] = Field(min_length=1, max_length=10_000)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(
        None, max_length=200, description="The message to replace (an edit) or regenerate."
    )


@dataclass(frozen=True)
class ChatAsk:
    """What a chat request asks: rewind to ``keep`` messages first (None: no rewind), then
    run with ``delta``."""

    keep: int | None
    delta: Delta
    files: tuple[FilePart, ...] = ()
    """The user message's ``file`` parts: (where, url, filename), for ``attach`` to store."""


def ask(
    body: ChatRequest, stored: Sequence[Message], pending: Sequence[str], settings: Settings
) -> ChatAsk:
    """The request read against the stored conversation and its pending client calls."""
    check_unicode(body.model_dump(exclude_unset=True), ("body",))
    named = index_of(body.id, body.messageId)
    if body.trigger == "regenerate-message":
        return ChatAsk(_regenerate_keep(stored, named), Delta())
    last = body.messages[-1]
    loc = ("body", "messages", len(body.messages) - 1)
    if last.role == "assistant":
        return ChatAsk(None, Delta(tool_results=_tool_results(last, pending, loc)))
    if last.role != "user":
        raise InvalidInput((*loc, "role"), "the last message must be a user's (or tool results)")
    text, files = _text(last, loc)
    text = check_text(text, (*loc, "parts"), settings)
    keep = named if named is not None and _is_user(stored, named) else None
    return ChatAsk(keep, Delta(messages=[TextMessage(text, Role.USER)]), tuple(files))


def _is_user(stored: Sequence[Message], index: int) -> bool:
    return (
        index < len(stored)
        and isinstance(stored[index], TextMessage)
        and (stored[index].role is Role.USER)
    )


def _regenerate_keep(stored: Sequence[Message], named: int | None) -> int | None:
    """How many messages to keep to regenerate: up to the user message before the named
    reply (the last one when none is named); None when there is nothing to drop."""
    end = len(stored) if named is None or named > len(stored) else named + 1
    for index in range(end - 1, -1, -1):
        message = stored[index]
        if isinstance(message, TextMessage) and message.role is Role.USER:
            return None if index + 1 == len(stored) else index + 1
    if any(not isinstance(m, AgentMessage) for m in stored):
        raise InvalidInput(("body", "messageId"), "there is no user message to answer again")
    return None


def _text(message: UIMessageIn, loc: Loc) -> tuple[str, list[FilePart]]:
    """The message's text (its text parts) and its file parts."""
    texts: list[str] = []
    files: list[FilePart] = []
    for i, part in enumerate(message.parts):
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(str(part["text"]))
        elif kind == "file":
            url, name = part.get("url"), part.get("filename")
            if not isinstance(url, str) or not url:
                raise InvalidInput((*loc, "parts", i, "url"), "a file part needs its url")
            files.append(((*loc, "parts", i, "url"), url, name if isinstance(name, str) else None))
    if len(files) > MAX_FILES:
        raise InvalidInput((*loc, "parts"), f"{len(files)} files; at most {MAX_FILES} allowed")
    text = "\n\n".join(t for t in texts if t.strip()).strip()
    if not text and not files:
        raise InvalidInput((*loc, "parts"), "the user message has no text")
    return text, files


def _tool_results(
    message: UIMessageIn, pending: Sequence[str], loc: tuple[str | int, ...]
) -> list[ToolResult]:
    """The outcomes the client added to the pending calls (``addToolResult``)."""
    results: list[ToolResult] = []
    for part in message.parts:
        call_id = part.get("toolCallId")
        if call_id not in pending or not _is_tool(part):
            continue
        if part.get("state") == "output-available":
            results.append(ToolResult(str(call_id), part.get("output")))
        elif part.get("state") == "output-error":
            results.append(ToolResult(str(call_id), None, str(part.get("errorText") or "error")))
    if not results:
        raise InvalidInput(
            (*loc, "parts"),
            "the last message is the assistant's but adds no result to a pending tool call",
            pending=list(pending),
        )
    return results


def _is_tool(part: dict[str, Any]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")
