"""The event vocabulary of a run (DESIGN §4): every event's name and the type of its body.

May import pydantic and storage (the run statuses). Declared once: app/runs/events.py builds
each event from these types, app/api documents the stream with them (the OpenAPI event schemas
are generated from these classes: their names are the schemas' names). A body type knows its
event's name (``event``).

Events, in the order a run sends them:

    run_started          {run_id, conversation_id, message_count, version}
    content_block_start  {index, type}                 type: "text" or "reasoning"
                         {index, type: "image", file_id, media_type[, width, height]}
    content_block_delta  {index, delta}
    content_block_stop   {index}
    tool_use             {tool_call_id, tool_name, params}
    message_stop         {stop_reason, usage: {input_tokens, output_tokens, reasoning_tokens,
                          cache_read_tokens, cache_write_tokens}}
    message              {index, version, message}      a message appended and already stored
    requires_action      {tool_calls: [{tool_call_id, tool_name, arguments}]}
    error                {code, detail, retryable[, retry_after]}
    done                 {status, message_count, version}   always last
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, JsonValue

from app.storage.runs import FinalStatus


class EventName(StrEnum):
    """The name of every event a run sends."""

    RUN_STARTED = "run_started"
    CONTENT_BLOCK_START = "content_block_start"
    CONTENT_BLOCK_DELTA = "content_block_delta"
    CONTENT_BLOCK_STOP = "content_block_stop"
    TOOL_USE = "tool_use"
    MESSAGE_STOP = "message_stop"
    MESSAGE = "message"
    REQUIRES_ACTION = "requires_action"
    ERROR = "error"
    DONE = "done"


INPUT_TOKENS = "Every token of the requests, cached ones included."
OUTPUT_TOKENS = "Every token of the replies, reasoning included."
REASONING_TOKENS = "The part of `output_tokens` spent reasoning."
CACHE_READ_TOKENS = "The part of `input_tokens` read from the provider's prompt cache."
CACHE_WRITE_TOKENS = "The part of `input_tokens` written to the provider's prompt cache."


class EventData(BaseModel):
    """The body of an event named ``event``."""

    event: ClassVar[EventName]

    def to_json(self) -> str:
        """The body as the stream and the log carry it: compact JSON, Unicode as is, fields
        left at their default (``retry_after``) left out."""
        return dumps(self.model_dump(exclude_defaults=True))


def dumps(payload: Any) -> str:
    """Compact JSON, Unicode as is: the spelling of every event body."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class RunStartedData(EventData):
    """`run_started`: the run began; its id, and the conversation as the run found it."""

    event = EventName.RUN_STARTED

    run_id: str
    conversation_id: str
    message_count: int
    version: int


class ContentBlockStartData(EventData):
    """`content_block_start`: a block of the model's reply begins; `index` is unique within
    the reply. A `reasoning` block streams the model's reasoning (its stored
    `ReasoningMessage` is announced by a `message` event); a `text` block, the reply's text; an
    `image` block, an image the model made, already stored as the file `file_id` (its content
    at `GET /files/{file_id}/content`); it has no deltas, and the reply's stored message
    carries it in its `attachments`."""

    event = EventName.CONTENT_BLOCK_START

    index: int
    type: Literal["text", "reasoning", "image"]
    file_id: str | None = Field(None, description="An `image` block's file.")
    media_type: str | None = Field(None, description="An `image` block's media type.")
    width: int | None = Field(None, description="An `image` block's width in pixels.")
    height: int | None = Field(None, description="An `image` block's height in pixels.")


class ContentBlockStopData(EventData):
    """`content_block_stop`: the block at `index` is complete."""

    event = EventName.CONTENT_BLOCK_STOP

    index: int


class ContentBlockDeltaData(EventData):
    """`content_block_delta`: the next piece of a block's text."""

    event = EventName.CONTENT_BLOCK_DELTA

    index: int
    delta: str


class ToolUseData(EventData):
    """`tool_use`: the model calls a tool."""

    event = EventName.TOOL_USE

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


class MessageStopData(EventData):
    """`message_stop`: the model's reply ended."""

    event = EventName.MESSAGE_STOP

    stop_reason: str
    usage: StreamUsage


class MessageData(EventData):
    """`message`: a message appended to the conversation and already stored, at `index`, in
    the serialized format; `version` is the conversation's after it. A `ReasoningMessage`
    carries its opaque `payload` here too (it may be several KB)."""

    event = EventName.MESSAGE

    index: int
    version: int
    message: dict[str, JsonValue]


class PendingToolCall(BaseModel):
    """A client tool call that waits for its result."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, JsonValue]


class RequiresActionData(EventData):
    """`requires_action`: the client tool calls whose results the run waits for."""

    event = EventName.REQUIRES_ACTION

    tool_calls: list[PendingToolCall]


class ErrorEventData(EventData):
    """`error`: why the run stopped (a stable `code`, as problem+json's), sent before `done`."""

    event = EventName.ERROR

    code: str
    detail: str
    retryable: bool
    retry_after: float | None = Field(
        None, description="Seconds to wait before retrying, when the provider named them."
    )


class DoneData(EventData):
    """`done`, always last: how the run ended and the conversation after it."""

    event = EventName.DONE

    status: FinalStatus
    message_count: int
    version: int


EVENT_DATA: dict[EventName, type[EventData]] = {
    data.event: data
    for data in (
        RunStartedData,
        ContentBlockStartData,
        ContentBlockDeltaData,
        ContentBlockStopData,
        ToolUseData,
        MessageStopData,
        MessageData,
        RequiresActionData,
        ErrorEventData,
        DoneData,
    )
}
"""Each event's body type, by name, in the order of ``EventName``."""
assert list(EVENT_DATA) == list(EventName)
