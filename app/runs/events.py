"""The one owner of a run's event vocabulary (DESIGN §4, §4a): names, payloads, ids, codes.

May import the domain and storage. Every event a run sends, live or replayed from the log, is
built here; ``ErrorCode`` spells every stable error code, shared by ``error`` events and
problem+json responses (``type`` ``/problems/<code>`` and ``code``).

Events, in the order a run sends them:

    run_started          {run_id, conversation_id, message_count, version}
    content_block_start  {index, type}                 type: "text" or "reasoning"
    content_block_delta  {index, delta}
    content_block_stop   {index}
    tool_use             {tool_call_id, tool_name, params}
    message_stop         {stop_reason, usage: {input_tokens, output_tokens, reasoning_tokens,
                          cache_read_tokens, cache_write_tokens}}
    message              {index, version, message}      a message appended and already stored
    requires_action      {tool_calls: [{tool_call_id, tool_name, arguments}]}
    error                {code, detail, retryable[, retry_after]}
    done                 {status, message_count, version}   always last

An event's id is ``<run id>:<seq>``, seq counting from 1 within the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypedDict

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ContextWindowError,
    ConversationConfigurationError,
    Message,
    MessageStop,
    ProviderError,
    StreamChunk,
    ToolCallMessage,
    ToolRoundLimitError,
    ToolUse,
)
from app.storage import EventRow, LeaseLost


class ErrorCode(StrEnum):
    """Every stable error code, of ``error`` events and of problem+json alike."""

    # the model's provider (app/providers/errors.py raises these as ProviderError codes)
    RATE_LIMITED = "rate_limited"
    AUTHENTICATION = "authentication"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    TIMEOUT = "timeout"
    CONTEXT_TOO_LONG = "context_too_long"
    INVALID_REQUEST = "invalid_request"
    BAD_RESPONSE = "bad_response"
    # the run
    MAX_TOOL_ROUNDS = "max_tool_rounds"
    CONFIGURATION = "configuration"
    LEASE_LOST = "lease_lost"
    SHUTTING_DOWN = "shutting_down"
    NOT_READY = "not_ready"
    DATABASE_UNAVAILABLE = "database_unavailable"
    PROCESS_LOST = "process_lost"
    INTERNAL = "internal"
    # requests (problem+json)
    BAD_REQUEST = "bad_request"
    MALFORMED_JSON = "malformed_json"
    BAD_IF_MATCH = "bad_if_match"
    BAD_LAST_EVENT_ID = "bad_last_event_id"
    INVALID_CURSOR = "invalid_cursor"
    UNAUTHORIZED = "unauthorized"
    HOST_NOT_ALLOWED = "host_not_allowed"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    CORS_NOT_ALLOWED = "cors_not_allowed"
    NOT_FOUND = "not_found"
    CONVERSATION_NOT_FOUND = "conversation_not_found"
    RUN_NOT_FOUND = "run_not_found"
    RUN_EVENTS_EXPIRED = "run_events_expired"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    CONVERSATION_RUNNING = "conversation_running"
    TOOL_CALL_NOT_PENDING = "tool_call_not_pending"
    DUPLICATE_TOOL_CALL = "duplicate_tool_call"
    TOOL_RESULTS_REQUIRED = "tool_results_required"
    NO_ACTIVE_RUN = "no_active_run"
    NOTHING_TO_ANSWER = "nothing_to_answer"
    VERSION_MISMATCH = "version_mismatch"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_CONTENT_ENCODING = "unsupported_content_encoding"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    VALIDATION_ERROR = "validation_error"
    INVALID_CONVERSATION = "invalid_conversation"
    STORED_DATA_ERROR = "stored_data_error"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_KEY_IN_USE = "idempotency_key_in_use"


RunStatus = Literal["running", "completed", "requires_action", "aborted", "failed", "interrupted"]
FINAL_STATUSES: tuple[RunStatus, ...] = (
    "completed",
    "requires_action",
    "aborted",
    "failed",
    "interrupted",
)
OnDisconnect = Literal["cancel", "continue"]

RUN_STARTED = "run_started"
CONTENT_BLOCK_START = "content_block_start"
CONTENT_BLOCK_DELTA = "content_block_delta"
MESSAGE = "message"
REQUIRES_ACTION = "requires_action"
ERROR = "error"
DONE = "done"
EVENT_NAMES = (
    RUN_STARTED,
    CONTENT_BLOCK_START,
    CONTENT_BLOCK_DELTA,
    "content_block_stop",
    "tool_use",
    "message_stop",
    MESSAGE,
    REQUIRES_ACTION,
    ERROR,
    DONE,
)


class ErrorData(TypedDict, total=False):
    code: str
    detail: str
    retryable: bool
    retry_after: float


class DoneData(TypedDict):
    status: str
    message_count: int
    version: int


def _json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event of a run: its position, name and JSON body (``delta`` kept for merging)."""

    seq: int
    name: str
    data: str
    delta: str | None = None
    index: int = 0

    def frame(self, run_id: str) -> bytes:
        """The event as a Server-Sent Events frame; position 0 (a notice that is not part of
        the run, such as a reader cut by a shutdown) has no id."""
        if not self.seq:
            return f"event: {self.name}\ndata: {self.data}\n\n".encode()
        return f"id: {run_id}:{self.seq}\nevent: {self.name}\ndata: {self.data}\n\n".encode()


EVENT_ID_PATTERN = "^[0-9a-f]{32}:[0-9]{1,9}$"  # the ids event_id writes

RECOVERY_GAP = 1_000_000
"""How far past its stored log a recovered run's ending is numbered. The process that ran it
sent each event before storing it, so its clients may hold ids the log never got; numbered past
them all, the ending never reuses an id a client saw (a run's events between two flushes, or
kept while the database was out, are far fewer)."""


def event_id(run_id: str, seq: int) -> str:
    """The opaque id a client sends back as ``Last-Event-ID``."""
    return f"{run_id}:{seq}"


def parse_event_id(value: str) -> tuple[str, int]:
    """``(run id, seq)`` of an event id; ValueError if it is not one of ours."""
    run_id, sep, seq = value.strip().partition(":")
    if not sep or not run_id or not (seq.isascii() and seq.isdigit()) or len(seq) > 9:
        raise ValueError(f"not an event id of this service: {value[:80]!r}")
    return run_id, int(seq)


# --- payloads -----------------------------------------------------------------------------------


def make_event(seq: int, name: str, payload: Any) -> RunEvent:
    """The event ``name`` with ``payload`` at position ``seq``."""
    return RunEvent(seq, name, _json(payload))


def chunk_event(seq: int, chunk: StreamChunk) -> RunEvent:
    """The event of a model stream chunk."""
    if isinstance(chunk, ContentBlockDelta):
        data = _json({"index": chunk.index, "delta": chunk.delta})
        return RunEvent(seq, CONTENT_BLOCK_DELTA, data, chunk.delta, chunk.index)
    return make_event(seq, chunk.kind, chunk_payload(chunk))


def chunk_payload(chunk: StreamChunk) -> dict[str, Any]:
    """The JSON body of a chunk's event."""
    if isinstance(chunk, ContentBlockDelta):
        return {"index": chunk.index, "delta": chunk.delta}
    if isinstance(chunk, ContentBlockStart):
        return {"index": chunk.index, "type": chunk.type}
    if isinstance(chunk, ContentBlockStop):
        return {"index": chunk.index}
    if isinstance(chunk, ToolUse):
        return {"tool_call_id": chunk.id, "tool_name": chunk.tool_name, "params": chunk.params}
    if isinstance(chunk, MessageStop):
        return {"stop_reason": chunk.stop_reason, "usage": chunk.usage.as_dict()}
    raise TypeError(f"not a stream chunk: {chunk!r}")  # pragma: no cover


def run_started_payload(
    run_id: str, conversation_id: str, message_count: int, version: int
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "conversation_id": conversation_id,
        "message_count": message_count,
        "version": version,
    }


def message_payload(index: int, version: int, message: Message) -> dict[str, Any]:
    return {"index": index, "version": version, "message": message.to_serializable_dict()}


def requires_action_payload(pending: Sequence[ToolCallMessage]) -> dict[str, Any]:
    calls = [
        {"tool_call_id": m.tool_call_id, "tool_name": m.tool_name, "arguments": m.arguments}
        for m in pending
    ]
    return {"tool_calls": calls}


def done_payload(status: str, message_count: int, version: int) -> DoneData:
    return {"status": status, "message_count": message_count, "version": version}


def error_payload(code: ErrorCode | str, detail: str, retryable: bool) -> ErrorData:
    return {"code": str(code), "detail": detail, "retryable": retryable}


def error_for(exc: BaseException) -> ErrorData:
    """The body of the ``error`` event a run sends when it fails with ``exc``."""
    if isinstance(exc, ProviderError):
        payload = error_payload(exc.code, exc.detail, exc.retryable)
        if exc.retry_after is not None:
            payload["retry_after"] = exc.retry_after
        return payload
    if isinstance(exc, ToolRoundLimitError):
        return error_payload(ErrorCode.MAX_TOOL_ROUNDS, str(exc), False)
    if isinstance(exc, ContextWindowError):
        return error_payload(ErrorCode.CONTEXT_TOO_LONG, str(exc), False)
    if isinstance(exc, ConversationConfigurationError):
        return error_payload(ErrorCode.CONFIGURATION, str(exc), False)
    if isinstance(exc, LeaseLost):
        return LEASE_LOST_ERROR
    return error_payload(
        ErrorCode.INTERNAL, "the run failed unexpectedly; it has been logged", True
    )


LEASE_LOST_ERROR = error_payload(
    ErrorCode.LEASE_LOST, "the run lost its hold on the conversation and stopped", True
)
SHUTTING_DOWN_ERROR = error_payload(
    ErrorCode.SHUTTING_DOWN,
    "the server is shutting down; the reply so far is stored: continue on another server",
    True,
)
PROCESS_LOST_ERROR = error_payload(
    ErrorCode.PROCESS_LOST,
    "the process running this run stopped; the reply streamed so far is stored",
    True,
)


# --- the stored log -----------------------------------------------------------------------------


def merged_rows(run_id: str, events: Sequence[RunEvent]) -> list[EventRow]:
    """The rows that store ``events`` (in order): consecutive text deltas of one block share one."""
    rows: list[EventRow] = []
    deltas: list[str] = []
    first: RunEvent | None = None

    def close() -> None:
        if first is None:
            return
        if len(deltas) == 1:
            rows.append(EventRow(run_id, first.seq, 1, first.name, first.data))
        else:
            data = _json({"index": first.index, "deltas": deltas})
            rows.append(EventRow(run_id, first.seq, len(deltas), CONTENT_BLOCK_DELTA, data))

    for event in events:
        if event.delta is not None:
            if (
                first is not None
                and first.index == event.index
                and (first.seq + len(deltas) == event.seq)
            ):
                deltas.append(event.delta)
                continue
            close()
            first, deltas = event, [event.delta]
            continue
        close()
        first, deltas = None, []
        rows.append(EventRow(run_id, event.seq, 1, event.name, event.data))
    close()
    return rows


def stored_events(row: EventRow) -> Iterator[RunEvent]:
    """The events a stored row holds, as they were sent."""
    if row.count == 1:
        if row.name == CONTENT_BLOCK_DELTA:
            body = json.loads(row.data)
            yield RunEvent(row.seq, row.name, row.data, body["delta"], body["index"])
        else:
            yield RunEvent(row.seq, row.name, row.data)
        return
    merged = json.loads(row.data)
    index = merged["index"]
    for offset, delta in enumerate(merged["deltas"]):
        data = _json({"index": index, "delta": delta})
        yield RunEvent(row.seq + offset, CONTENT_BLOCK_DELTA, data, delta, index)


def unfinished_reply(rows: Sequence[EventRow]) -> str:
    """The text a run streamed after its last stored message: the reply it was writing (its
    reasoning blocks' deltas left out)."""
    text: list[str] = []
    reasoning: set[int] = set()
    for row in rows:
        if row.name == MESSAGE:
            text.clear()
        elif row.name == CONTENT_BLOCK_START:
            body = json.loads(row.data)
            if body.get("type") == "reasoning":
                reasoning.add(body["index"])
            else:
                reasoning.discard(body["index"])
        elif row.name == CONTENT_BLOCK_DELTA:
            text.extend(e.delta or "" for e in stored_events(row) if e.index not in reasoning)
    return "".join(text)
