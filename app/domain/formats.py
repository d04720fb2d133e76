"""A MessageList in the OpenAI chat and Anthropic messages shapes (seed 002, DESIGN §2).

Imports only the standard library; the shapes are plain dicts, no SDK types. Consecutive
ToolCallMessages are one assistant turn, except that one carrying its own text starts a new
turn: that is how several calls from one reply are stored. A call's result follows its turn as
a ``tool`` message (OpenAI) or a ``tool_result`` block (Anthropic). Pending calls are left out
when ``include_pending`` is false, so nothing unresolved is sent to a model. Reasoning goes only
into the shape of the provider that made it: Anthropic's ``thinking`` and ``redacted_thinking``
blocks, exactly as received; the OpenAI chat shape has no place for reasoning and leaves it out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from app.domain.attachment_blocks import (
    Files,
    anthropic_blocks,
    notes,
    openai_chat_parts,
)
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)

ANTHROPIC = "anthropic"
"""The provider name whose reasoning the Anthropic shape carries."""
THINKING_BLOCKS = ("thinking", "redacted_thinking")


def tool_call_turns(
    messages: Sequence[Message], include_pending: bool = True
) -> Iterator[Message | list[ToolCallMessage]]:
    """Messages in order, with each assistant turn of tool calls gathered into a list."""
    turn: list[ToolCallMessage] = []
    for message in messages:
        if isinstance(message, ToolCallMessage):
            if message.pending and not include_pending:
                continue
            if turn and message.message:
                yield turn
                turn = []
            turn.append(message)
            continue
        if turn:
            yield turn
            turn = []
        yield message
    if turn:
        yield turn


def to_openai_format(
    messages: Sequence[Message], include_pending: bool = True, files: Files | None = None
) -> list[dict[str, Any]]:
    """Chat-completions messages: ``{"role", "content"}`` plus ``tool_calls`` and ``tool``.

    A user message's attachments are content parts (``image_url``, ``file``) whose bytes come
    from ``files`` (by file id); a file not there, or in a place that takes only text, is a note.

    An empty assistant text between two turns of tool calls only keeps the turns apart in a
    MessageList (see ``provider_import``); the tool messages between them do that here, so
    it is left out.
    """
    out: list[dict[str, Any]] = []
    items = list(tool_call_turns(messages, include_pending))
    shown = [i for i in items if not isinstance(i, ReasoningMessage)]
    for n, item in enumerate(shown):
        if _separator(shown, n):
            continue
        if isinstance(item, list):
            text = item[0].message
            out.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": call.tool_call_id,
                            "type": "function",
                            "function": {
                                "name": call.tool_name,
                                "arguments": json.dumps(call.arguments, ensure_ascii=False),
                            },
                        }
                        for call in item
                    ],
                }
            )
            out.extend(
                {"role": "tool", "tool_call_id": call.tool_call_id, "content": _with_notes(call)}
                for call in item
                if not call.pending
            )
        elif isinstance(item, AgentMessage):
            out.append({"role": "system", "content": item.text})
        elif isinstance(item, TextMessage):
            out.append({"role": item.role.value, "content": _openai_content(item, files or {})})
    return out


def _openai_content(message: TextMessage, files: Files) -> str | list[dict[str, Any]]:
    if not message.attachments:
        return message.text
    if message.role is not Role.USER:
        return _with_notes(message)
    text = [{"type": "text", "text": message.text}] if message.text else []
    return text + openai_chat_parts(message.attachments, files)


def _with_notes(message: TextMessage | ToolCallMessage) -> str:
    """The message's text (a call's result) followed by notes for its attachments."""
    text = message.text if isinstance(message, TextMessage) else message.result_text()
    if not message.attachments:
        return text
    return f"{text}\n{notes(message.attachments)}" if text else notes(message.attachments)


def _separator(items: Sequence[Message | list[ToolCallMessage]], n: int) -> bool:
    item = items[n]
    return (
        isinstance(item, TextMessage)
        and item.role is Role.ASSISTANT
        and item.text == ""
        and 0 < n < len(items) - 1
        and isinstance(items[n - 1], list)
        and isinstance(items[n + 1], list)
    )


def to_anthropic_format(
    messages: Sequence[Message], include_pending: bool = True, files: Files | None = None
) -> dict[str, Any]:
    """Messages-API shape: ``{"system": str, "messages": [...]}``, same-role turns merged.

    A user message's attachments (and a tool result's) are ``image``/``document`` blocks with
    the bytes from ``files`` inlined as base64, before the text; what cannot be sent is a note.

    System prompts (and system-role text) are joined into ``system``; tool calls become
    ``tool_use`` blocks and their results ``tool_result`` blocks in the following user turn.
    Empty texts are left out: the API refuses an empty text block.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for item in tool_call_turns(messages, include_pending):
        if isinstance(item, list):
            add("assistant", _tool_use_blocks(item))
            results = [_tool_result_block(call, files or {}) for call in item if not call.pending]
            if results:
                add("user", results)
        elif isinstance(item, ReasoningMessage):
            block = thinking_block(item)
            if block is not None:
                add("assistant", [block])
        elif isinstance(item, AgentMessage) or (
            isinstance(item, TextMessage) and item.role is Role.SYSTEM
        ):
            system.append(item.text)
        elif isinstance(item, TextMessage) and item.attachments:
            add(item.role.value, _anthropic_blocks(item, files or {}))
        elif isinstance(item, TextMessage) and item.text.strip():
            add(item.role.value, [{"type": "text", "text": item.text}])
    return {"system": "\n\n".join(t for t in system if t.strip()), "messages": turns}


def thinking_block(message: ReasoningMessage) -> dict[str, Any] | None:
    """The Anthropic block of reasoning Anthropic made, as it was received; None for other
    reasoning (another provider's, or cut short)."""
    payload = message.payload
    if message.provider != ANTHROPIC or not message.replayable or payload is None:
        return None
    kind = payload.get("type")
    if kind not in THINKING_BLOCKS:
        return None
    block: dict[str, Any] = {"type": kind}
    if kind == "thinking":
        block["thinking"] = message.text
    block.update((k, v) for k, v in payload.items() if k != "type")
    return block


def _tool_use_blocks(turn: list[ToolCallMessage]) -> list[dict[str, Any]]:
    """The assistant blocks of one turn of tool calls: its text, then a tool_use per call."""
    blocks: list[dict[str, Any]] = []
    if turn[0].message.strip():
        blocks.append({"type": "text", "text": turn[0].message})
    blocks.extend(
        {"type": "tool_use", "id": c.tool_call_id, "name": c.tool_name, "input": c.arguments}
        for c in turn
    )
    return blocks


def _anthropic_blocks(message: TextMessage, files: Files) -> list[dict[str, Any]]:
    """A message with attachments: the files first (as Anthropic advises), then the text; an
    assistant's files (images it made) are notes, as the API takes no image from it."""
    if message.role is not Role.USER:
        return [{"type": "text", "text": _with_notes(message)}]
    text = [{"type": "text", "text": message.text}] if message.text.strip() else []
    return anthropic_blocks(message.attachments, files) + text


def _tool_result_block(call: ToolCallMessage, files: Files) -> dict[str, Any]:
    result = call.result_text()
    content: str | list[dict[str, Any]] = result
    if call.attachments:
        text = [{"type": "text", "text": result}] if result.strip() else []
        content = text + anthropic_blocks(call.attachments, files)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call.tool_call_id,
        "content": content,
    }
    if call.error is not None:
        block["is_error"] = True
    return block
