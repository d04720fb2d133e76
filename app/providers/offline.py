"""The offline adapter: deterministic, no key, no network (DESIGN §6).

It answers with the text of the last user message, one ``ContentBlockDelta`` per word (each
word with the whitespace before it, so the deltas join back into the exact text), waiting
``delay_ms`` before each. A last user message ``call <tool_name> <JSON object>`` makes it call
that tool instead (a JSON object that could not be stored, as ``unstorable_json`` says, is no
call: it is echoed); once a result of a call made after that message is in the conversation it
answers with the latest such result as text (an error as ``Error: …``). Imports the domain only.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ModelResponse,
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
from app.domain.adapter import DEFAULT_OPTIONS
from app.domain.context import message_text
from app.domain.unicode import unstorable_json

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
        words = re.findall(r"\s*\S+", text)
        usage_in = sum(approximate_tokens(message_text(m)) for m in messages)
        yield ContentBlockStart(0)
        for word in words:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ContentBlockDelta(word)
        yield ContentBlockStop(0)
        if call is not None:
            yield call
        stop = "tool_use" if call is not None else "end_turn"
        yield MessageStop(stop, Usage(usage_in, len(words) + (call is not None)))


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
