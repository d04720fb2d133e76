"""A run's events (DESIGN §4, §4a): how they are built, numbered and named by id.

May import the domain, storage and the runs layer's vocabulary (app/runs/payloads.py: the
names and body types) and codes (app/runs/codes.py). Every event a run sends, live or
replayed from the log, is a ``RunEvent``; ``numbered`` is the one place that gives a run's
events their positions (1, 2, … in the order sent), and everything else asks it: the start
(``first_event``), the run's task (through its ``LiveRun``), the writer, recovery.

An event's id is ``<run id>:<seq>``. How events are stored as rows: app/runs/log_codec.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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
from app.runs.codes import ErrorCode as ErrorCode  # re-exported, as every code
from app.runs.codes import code_for
from app.runs.payloads import (
    ContentBlockStartData,
    ContentBlockStopData,
    DoneData,
    ErrorEventData,
    EventData,
    MessageData,
    MessageStopData,
    PendingToolCall,
    RequiresActionData,
    RunStartedData,
    StreamUsage,
    ToolUseData,
    dumps,
)
from app.runs.payloads import EventName as EventName  # re-exported, with the bodies
from app.spend import BudgetExceeded
from app.storage import LeaseLost
from app.storage.runs import FinalStatus as FinalStatus  # how a run ended, re-exported
from app.storage.runs import RunStatus as RunStatus  # a run's status, re-exported

OnDisconnect = Literal["cancel", "continue"]


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event of a run: its position, name and JSON body (``delta`` kept for merging)."""

    seq: int
    name: EventName
    data: str
    delta: str | None = None
    index: int = 0


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


# --- numbering ----------------------------------------------------------------------------------


def numbered(after: int, bodies: Sequence[EventData]) -> list[RunEvent]:
    """The events of ``bodies``, in order, at the positions that follow ``after`` (the position
    of the run's last event): the one place a run's events are numbered."""
    return [RunEvent(after + i, body.event, body.to_json()) for i, body in enumerate(bodies, 1)]


def first_event(body: RunStartedData) -> RunEvent:
    """A run's first event."""
    return numbered(0, [body])[0]


def chunk_event(after: int, chunk: StreamChunk) -> RunEvent:
    """The event of a model stream chunk, at the position after ``after``. A text delta, sent
    for every token, is spelled here directly (the stream's hot path)."""
    if isinstance(chunk, ContentBlockDelta):
        data = dumps({"index": chunk.index, "delta": chunk.delta})
        return RunEvent(after + 1, EventName.CONTENT_BLOCK_DELTA, data, chunk.delta, chunk.index)
    return numbered(after, [chunk_data(chunk)])[0]


def recovered_after(last_stored: int) -> int:
    """The position a recovered run's ending is numbered after (``RECOVERY_GAP``)."""
    return last_stored + RECOVERY_GAP


def notice(body: EventData) -> RunEvent:
    """An event that is not part of the run (position 0: it has no id), such as a reader cut
    by a shutdown."""
    return RunEvent(0, body.event, body.to_json())


# --- bodies -------------------------------------------------------------------------------------


def chunk_data(chunk: StreamChunk) -> EventData:
    """The body of a chunk's event; its type names the event (chunk kind → event name)."""
    if isinstance(chunk, ContentBlockStart):
        image = chunk.attachment
        if image is None:
            return ContentBlockStartData(index=chunk.index, type=chunk.type)
        return ContentBlockStartData(
            index=chunk.index,
            type=chunk.type,
            file_id=image.file_id,
            media_type=image.media_type,
            width=image.width,
            height=image.height,
        )
    if isinstance(chunk, ContentBlockStop):
        return ContentBlockStopData(index=chunk.index)
    if isinstance(chunk, ToolUse):
        return ToolUseData(tool_call_id=chunk.id, tool_name=chunk.tool_name, params=chunk.params)
    if isinstance(chunk, MessageStop):
        usage = StreamUsage(**chunk.usage.as_dict())
        return MessageStopData(stop_reason=chunk.stop_reason, usage=usage)
    raise TypeError(f"not a chunk with an event: {chunk!r}")  # pragma: no cover


def run_started(
    run_id: str, conversation_id: str, message_count: int, version: int
) -> RunStartedData:
    return RunStartedData(
        run_id=run_id, conversation_id=conversation_id, message_count=message_count, version=version
    )


def message_data(index: int, version: int, message: Message) -> MessageData:
    return MessageData(index=index, version=version, message=message.to_serializable_dict())


def requires_action(pending: Sequence[ToolCallMessage]) -> RequiresActionData:
    calls = [
        PendingToolCall(tool_call_id=m.tool_call_id, tool_name=m.tool_name, arguments=m.arguments)
        for m in pending
    ]
    return RequiresActionData(tool_calls=calls)


def done(status: FinalStatus, message_count: int, version: int) -> DoneData:
    return DoneData(status=status, message_count=message_count, version=version)


def error_data(code: str, detail: str, retryable: bool) -> ErrorEventData:
    return ErrorEventData(code=code, detail=detail, retryable=retryable)


_RUN_FAILURES = (
    ToolRoundLimitError,
    ContextWindowError,
    ConversationConfigurationError,
    BudgetExceeded,  # the key's budget, crossed by the run's last model call (app/spend)
)
"""The domain's reasons a run fails, told as they are (their codes: app/runs/codes.py)."""


def error_for(exc: BaseException) -> ErrorEventData:
    """The body of the ``error`` event a run sends when it fails with ``exc``."""
    if isinstance(exc, ProviderError):
        return ErrorEventData(
            code=code_for(exc),
            detail=exc.detail,
            retryable=exc.retryable,
            retry_after=exc.retry_after,
        )
    if isinstance(exc, _RUN_FAILURES):
        return error_data(code_for(exc), str(exc), False)
    if isinstance(exc, LeaseLost):
        return LEASE_LOST_ERROR
    return error_data(ErrorCode.INTERNAL, "the run failed unexpectedly; it has been logged", True)


LEASE_LOST_ERROR = error_data(
    ErrorCode.LEASE_LOST, "the run lost its hold on the conversation and stopped", True
)
SHUTTING_DOWN_ERROR = error_data(
    ErrorCode.SHUTTING_DOWN,
    "the server is shutting down; the reply so far is stored: continue on another server",
    True,
)
PROCESS_LOST_ERROR = error_data(
    ErrorCode.PROCESS_LOST,
    "the process running this run stopped; the reply streamed so far is stored",
    True,
)
