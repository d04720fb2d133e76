"""The offline adapter: deterministic, no key, no network (DESIGN §6).

It answers with the text of the last user message, one ``ContentBlockDelta`` per word (each
word with the whitespace before it, so the deltas join back into the exact text), waiting
``delay_ms`` before each. A last user message ``call <tool_name> <JSON object>`` makes it call
that tool instead (a JSON object that could not be stored, as ``unstorable_json`` says, is no
call: it is echoed); once a result of a call made after that message is in the conversation it
answers with the latest such result as text (an error as ``Error: …``). When the request asks for
reasoning (an effort other than ``none``) it first thinks: a short reasoning block, streamed word
by word too, whose payload is a signature of its text. When the request offers image generation
it draws a small PNG (``png.draw_png``: always when an image is required, for a message that
begins with ``draw`` when it is only offered) before its text. Imports the domain and
``png`` (the standard library) only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ModelResponse,
    ReasoningDone,
    RequestOptions,
    Role,
    StreamChunk,
    TextMessage,
    ToolCallMessage,
    ToolSpec,
    ToolUse,
    Usage,
    approximate_tokens,
    collect_response,
)
from app.domain.adapter import DEFAULT_OPTIONS, ImageDone
from app.domain.attachments import image_size
from app.domain.context import message_text
from app.domain.unicode import unstorable_json
from app.providers.png import draw_png

_CALL = re.compile(r"^\s*call\s+([A-Za-z_][A-Za-z0-9_-]*)\s*(.*)$", re.DOTALL)


class OfflineAdapter:
    """Echoes the last user message word by word; ``call <tool> <json>`` calls a tool."""

    name = "offline"
    default_model = "echo"

    def __init__(self, delay_ms: float = 0) -> None:
        self.delay = max(delay_ms, 0) / 1000

    async def send_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> ModelResponse:
        return await collect_response(self.stream_message(messages, tools, options))

    async def stream_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> AsyncIterator[StreamChunk]:
        text, call = _reply(messages)
        if call is None and not _answers_a_tool(messages):
            text = await _described(messages, options) + text
        words = re.findall(r"\s*\S+", text)
        usage_in = sum(approximate_tokens(message_text(m)) for m in messages)
        thinks = options.reasoning is not None and options.reasoning.on
        thought = _thought(words, call, _answers_a_tool(messages)) if thinks else []
        index = 0
        if thought:
            yield ContentBlockStart(0, "reasoning")
            async for chunk in self._words(thought, 0):
                yield chunk
            yield ContentBlockStop(0)
            yield ReasoningDone("".join(thought), _signed("".join(thought)), 0)
            index = 1
        if call is None and _draws(messages, options):
            yield ImageDone(draw_png(*DRAWING_SIZE, seed=text), "image/png", index)
            index += 1
        yield ContentBlockStart(index)
        async for chunk in self._words(words, index):
            yield chunk
        yield ContentBlockStop(index)
        if call is not None:
            yield call
        stop = "tool_use" if call is not None else "end_turn"
        out = len(words) + len(thought) + (call is not None)
        yield MessageStop(stop, Usage(usage_in, out, reasoning_tokens=len(thought)))

    async def _words(self, words: list[str], index: int) -> AsyncIterator[StreamChunk]:
        for word in words:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ContentBlockDelta(word, index)


DRAWING_SIZE = (64, 64)
"""The size of the offline model's drawings: small, a few hundred bytes."""


def _draws(messages: Sequence[Message], options: RequestOptions) -> bool:
    """The offline model draws when an image is required, or offered (``auto``) and the last
    user message begins with ``draw``; never in the reply to a tool's result."""
    if options.image_generation is None or _answers_a_tool(messages):
        return False
    if options.image_generation == "required":
        return True
    last = next(
        (m for m in reversed(messages) if isinstance(m, TextMessage) and m.role is Role.USER),
        None,
    )
    return last is not None and last.text.lstrip().lower().startswith("draw")


def _thought(words: list[str], call: ToolUse | None, tool_answered: bool) -> list[str]:
    """The offline model's reasoning, word by word: what it was given and what it will do."""
    if call is not None:
        text = f"I am asked to call the tool {call.tool_name}, so I will call it."
    elif tool_answered:
        text = f"The tool answered with {len(words)} words, so I will pass them on."
    else:
        text = f"The last message has {len(words)} words, so I will echo it back."
    return re.findall(r"\s*\S+", text)


def _answers_a_tool(messages: Sequence[Message]) -> bool:
    """The reply answers with a tool's result: a call was completed after the last user text."""
    for message in reversed(messages):
        if isinstance(message, TextMessage) and message.role is Role.USER:
            return False
        if isinstance(message, ToolCallMessage) and not message.pending:
            return True
    return False


async def _described(messages: Sequence[Message], options: RequestOptions) -> str:
    """What the last user message's attachments are, one description each, read from their
    bytes (an image's size from its header) — so a reply shows the bytes reached the model."""
    user = next(
        (m for m in reversed(messages) if isinstance(m, TextMessage) and m.role is Role.USER),
        None,
    )
    if user is None or not user.attachments:
        return ""
    files = await options.attachments.load(user.attachments) if options.attachments else {}
    lines = []
    for attachment in user.attachments:
        data = files.get(attachment.file_id)
        if data is None:
            lines.append(attachment.note("its content could not be read"))
            continue
        size = image_size(data) if attachment.kind == "image" else None
        if size is not None:
            attachment = replace(attachment, width=size[0], height=size[1])
        lines.append(attachment.description())
    return " ".join(lines) + ("\n" if user.text else "")


def _signed(text: str) -> dict[str, str]:
    """The offline reasoning's payload: a signature of its text, as a real provider signs."""
    return {"type": "offline", "signature": hashlib.sha256(text.encode()).hexdigest()[:32]}


def _reply(messages: Sequence[Message]) -> tuple[str, ToolUse | None]:
    """The text to answer with, and the tool call to make (if any)."""
    start, user = 0, None
    for i, message in enumerate(messages):
        if isinstance(message, TextMessage) and message.role is Role.USER:
            start, user = i + 1, message
    answered = [m for m in messages[start:] if isinstance(m, ToolCallMessage) and not m.pending]
    if answered:
        return answered[-1].result_text(), None
    if user is None:
        return "", None
    match = _CALL.match(user.text)
    if match is None:
        return user.text, None
    raw = match.group(2).strip()
    try:
        params = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        return user.text, None
    if not isinstance(params, dict) or unstorable_json(params) is not None:
        return user.text, None
    calls_so_far = sum(isinstance(m, ToolCallMessage) for m in messages)
    return "", ToolUse(match.group(1), params, f"call_{calls_so_far + 1}")
