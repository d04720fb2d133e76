"""The payloads of a run's events (DESIGN §4); names mirror seed 004's StreamChunk.

May import the domain and storage errors. Event names: ``run_started``,
``content_block_start``, ``content_block_delta``, ``content_block_stop``, ``tool_use``,
``message``, ``message_stop``, ``requires_action``, ``error``, ``done``.
"""

from __future__ import annotations

from typing import Any

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ContextWindowError,
    ConversationConfigurationError,
    MessageStop,
    ProviderError,
    StreamChunk,
    ToolRoundLimitError,
    ToolUse,
)
from app.storage import LeaseLost


def chunk_payload(chunk: StreamChunk) -> dict[str, Any]:
    """The JSON body of a chunk's event."""
    if isinstance(chunk, ContentBlockDelta):
        return {"index": chunk.index, "delta": chunk.delta}
    if isinstance(chunk, ContentBlockStart | ContentBlockStop):
        return {"index": chunk.index}
    if isinstance(chunk, ToolUse):
        return {"tool_call_id": chunk.id, "tool_name": chunk.tool_name, "params": chunk.params}
    if isinstance(chunk, MessageStop):
        usage = {
            "input_tokens": chunk.usage.input_tokens,
            "output_tokens": chunk.usage.output_tokens,
        }
        return {"stop_reason": chunk.stop_reason, "usage": usage}
    raise TypeError(f"not a stream chunk: {chunk!r}")  # pragma: no cover


def error_payload(exc: Exception) -> dict[str, Any]:
    """The body of an ``error`` event: stable ``code``, ``detail``, ``retryable``."""
    if isinstance(exc, ProviderError):
        payload: dict[str, Any] = {
            "code": exc.code,
            "detail": exc.detail,
            "retryable": exc.retryable,
        }
        if exc.retry_after is not None:
            payload["retry_after"] = exc.retry_after
        return payload
    if isinstance(exc, ToolRoundLimitError):
        return {"code": "max_tool_rounds", "detail": str(exc), "retryable": False}
    if isinstance(exc, ContextWindowError):
        return {"code": "context_too_long", "detail": str(exc), "retryable": False}
    if isinstance(exc, ConversationConfigurationError):
        return {"code": "configuration", "detail": str(exc), "retryable": False}
    if isinstance(exc, LeaseLost):
        return {
            "code": "lease_lost",
            "detail": "another run took over this conversation",
            "retryable": True,
        }
    return {
        "code": "internal",
        "detail": "the run failed unexpectedly; it has been logged",
        "retryable": True,
    }
