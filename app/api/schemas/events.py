"""The bodies of the stream's events, as the OpenAPI document describes them (app/runs/events.py
builds them).

May import pydantic and the other schema modules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, JsonValue

from app.api.schemas.runs import (
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
)


class RunStartedData(BaseModel):
    """`run_started`: the run began; its id, and the conversation as the run found it."""

    run_id: str
    conversation_id: str
    message_count: int
    version: int


class ContentBlockStartData(BaseModel):
    """`content_block_start`: a block of the model's reply begins; `index` is unique within
    the reply. A `reasoning` block streams the model's reasoning (its stored
    `ReasoningMessage` is announced by a `message` event); a `text` block, the reply's text."""

    index: int
    type: Literal["text", "reasoning"]


class ContentBlockStopData(BaseModel):
    """`content_block_stop`: the block at `index` is complete."""

    index: int


class ContentBlockDeltaData(BaseModel):
    """`content_block_delta`: the next piece of a block's text."""

    index: int
    delta: str


class ToolUseData(BaseModel):
    """`tool_use`: the model calls a tool."""

    tool_call_id: str
    tool_name: str
    params: dict[str, JsonValue]


class StreamUsage(BaseModel):
    """Tokens the provider counted for one model reply, by kind (null for a kind it did not
    count)."""

    input_tokens: int | None = Field(description=INPUT_TOKENS)
    output_tokens: int | None = Field(description=OUTPUT_TOKENS)
    reasoning_tokens: int | None = Field(description=REASONING_TOKENS)
    cache_read_tokens: int | None = Field(description=CACHE_READ_TOKENS)
    cache_write_tokens: int | None = Field(description=CACHE_WRITE_TOKENS)


class MessageStopData(BaseModel):
    """`message_stop`: the model's reply ended."""

    stop_reason: str
    usage: StreamUsage


class MessageData(BaseModel):
    """`message`: a message appended to the conversation and already stored, at `index`, in
    the serialized format; `version` is the conversation's after it. A `ReasoningMessage`
    carries its opaque `payload` here too (it may be several KB)."""

    index: int
    version: int
    message: dict[str, JsonValue]


class PendingToolCall(BaseModel):
    """A client tool call that waits for its result."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, JsonValue]


class RequiresActionData(BaseModel):
    """`requires_action`: the client tool calls whose results the run waits for."""

    tool_calls: list[PendingToolCall]


class ErrorEventData(BaseModel):
    """`error`: why the run stopped (a stable `code`, as problem+json's), sent before `done`."""

    code: str
    detail: str
    retryable: bool
    retry_after: float | None = Field(
        None, description="Seconds to wait before retrying, when the provider named them."
    )


class DoneData(BaseModel):
    """`done`, always last: how the run ended and the conversation after it."""

    status: Literal["completed", "requires_action", "aborted", "failed", "interrupted"]
    message_count: int
    version: int
