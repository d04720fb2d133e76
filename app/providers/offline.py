"""The offline adapter: deterministic, no key, no network (DESIGN §6).

It answers with the text of the last user message, one ``ContentBlockDelta`` per word, waiting
``delay_ms`` before each. A last user message ``call <tool_name> <JSON arguments>`` makes it
call that tool instead; once the call's result is in the conversation it answers with that
result as text. Imports the domain only.
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
from app.domain.context import message_text

_CALL = re.compile(r"^\s*call\s+([A-Za-z_][A-Za-z0-9_-]*)\s*(.*)$", re.DOTALL)


class OfflineAdapter:
    """Echoes the last user message word by word; ``call <tool> <json>`` calls a tool."""

    name = "offline"
    default_model = "echo"

    def __init__(self, delay_ms: float = 0) -> None:
        self.delay = max(delay_ms, 0) / 1000

    async def send_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> ModelResponse:
        return await collect_response(self.stream_message(messages, tools, options))

    async def stream_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> AsyncIterator[StreamChunk]:
        text, call = _reply(messages)
        words = re.findall(r"\S+", text)
        usage_in = sum(approximate_tokens(message_text(m)) for m in messages)
        yield ContentBlockStart(0)
        for i, word in enumerate(words):
            await asyncio.sleep(self.delay)
            yield ContentBlockDelta(word if i == 0 else f" {word}")
        yield ContentBlockStop(0)
        if call is not None:
            yield call
        stop = "tool_use" if call is not None else "end_turn"
        yield MessageStop(stop, Usage(usage_in, len(words) + (call is not None)))


def _reply(messages: Sequence[Message]) -> tuple[str, ToolUse | None]:
    """The text to answer with, and the tool call to make (if any)."""
    last = messages[-1] if messages else None
    if isinstance(last, ToolCallMessage) and not last.pending:
        return last.result_text(), None
    user = next(
        (m for m in reversed(messages) if isinstance(m, TextMessage) and m.role is Role.USER),
        None,
    )
    if user is None:
        return "", None
    match = _CALL.match(user.text)
    if match is None:
        return user.text, None
    raw = match.group(2).strip()
    try:
        params = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return user.text, None
    if not isinstance(params, dict):
        return user.text, None
    calls_so_far = sum(isinstance(m, ToolCallMessage) for m in messages)
    return "", ToolUse(match.group(1), params, f"call_{calls_so_far + 1}")
