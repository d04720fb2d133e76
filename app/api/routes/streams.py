"""Routes that run the model and follow runs: the SSE stream (GET runs as is or resumes, POST
applies a delta first), cancel, and the runs of a conversation. May import FastAPI,
sse-starlette, schemas, deps and the runs layer.

Events (DESIGN §4, app/runs/events.py): each has a name, an ``id`` ``<run id>:<seq>`` and a
JSON body. Errors before the first event are problem+json; after it, an ``error`` event, then
``done``. A stream only reads its run: the run goes on in its own task, so a reader that
disconnects cancels it only when it started it with ``on_disconnect=cancel`` (the default).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.background import BackgroundTask
from starlette.types import Receive, Scope, Send

from app.api import convert
from app.api.ai_sdk.response import ChatStreamer, chat_streamer, from_start
from app.api.bodies import ParsedBodyRoute
from app.api.deps import CallerDep, CursorQuery, IfMatchDep
from app.api.idempotency import IdempotencyKeyHeader, idempotent
from app.api.reader_watch import ReaderWatch
from app.api.routes.conversations import IdPath
from app.api.schemas import CancelOut, DeltaBundle, RunOut, RunPage
from app.api.sse import frames as sse_frames
from app.runs.events import EVENT_ID_PATTERN, OnDisconnect, RunEvent
from app.runs.follow import follow_live
from app.runs.live import LiveRun
from app.runs.services import Services

router = APIRouter(prefix="/conversations", tags=["runs"], route_class=ParsedBodyRoute)
log = logging.getLogger(__name__)

SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A Server-Sent Events stream: `run_started`, `content_block_start`, "
        "`content_block_delta`, `content_block_stop`, `tool_use`, `message`, `message_stop`, "
        "`requires_action`, `error`, and `done` last. Each event's `id` is `<run id>:<n>`.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    409: {"description": "A run already holds the conversation, or tool results are missing."},
    503: {"description": "The server is shutting down; retry (`Retry-After`)."},
}

ProtocolQuery = Annotated[
    Literal["parley", "ai-sdk"],
    Query(
        description="`parley` (named events) or `ai-sdk`: the AI SDK's UI message stream "
        "(docs/frontend.md)."
    ),
]

OnDisconnectQuery = Annotated[
    OnDisconnect,
    Query(
        description="What a dropped connection does to the run: `cancel` stops it (the text "
        "so far is kept, marked incomplete); `continue` lets it finish without a reader — "
        "resume it with `Last-Event-ID`, or read the stored messages."
    ),
]


class _EventStream(EventSourceResponse):
    """An SSE response that treats a client which stopped reading as gone, quietly."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = ReaderWatch.of(scope, self.send_timeout or 0)
        watching = asyncio.create_task(watch.watch()) if watch is not None else None
        try:
            await super().__call__(scope, receive, send)
        except* SendTimeoutError:
            log.info("a client read nothing for %ss: its stream was closed", self.send_timeout)
        finally:
            if watching is not None:
                watching.cancel()


def _sse(
    services: Services,
    run_id: str,
    batches: AsyncIterator[list[RunEvent]],
    on_close: Callable[[], None] | None = None,
    ai_sdk: ChatStreamer | None = None,
) -> EventSourceResponse:
    if ai_sdk is not None:  # ?protocol=ai-sdk: the same run, in the AI SDK's chunks
        return ai_sdk(run_id, batches, on_close)

    async def frames() -> AsyncIterator[bytes]:
        try:
            async for batch in batches:
                yield sse_frames(batch, run_id)
        finally:
            if on_close is not None:
                on_close()

    async def closed() -> None:  # async: a plain function would cost a worker-thread trip
        if on_close is not None:
            on_close()

    settings = services.settings
    return _EventStream(
        frames(),
        ping=settings.sse_ping_seconds,
        sep="\n",  # as the events' frames: sse-starlette's default ends its pings in CRLF
        send_timeout=settings.sse_send_timeout_seconds,
        shutdown_grace_period=settings.shutdown_drain_seconds,
        background=BackgroundTask(closed) if on_close is not None else None,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", "X-Run-Id": run_id},
    )


def _started(
    services: Services, run: LiveRun, ai_sdk: ChatStreamer | None = None
) -> EventSourceResponse:
    """The stream of a run this request started: from its first event; closing it early
    detaches the run's starter (which cancels it unless ``on_disconnect=continue``) — and so
    does a response whose body was never read."""
    events = follow_live(services, run, 0)
    return _sse(services, run.run_id, events, lambda: services.manager.detached(run), ai_sdk)


@router.get(
    "/{conversation_id}/stream", responses=SSE_RESPONSES, response_class=EventSourceResponse
)
async def stream_conversation(
    conversation_id: IdPath,
    caller: CallerDep,
    on_disconnect: OnDisconnectQuery = "cancel",
    protocol: ProtocolQuery = "parley",
    last_event_id: Annotated[
        str | None,
        Header(
            description="Resume: the `id` of the last event you received. The events after "
            "it are replayed, then the run is followed live until `done` (any server).",
            json_schema_extra={"pattern": EVENT_ID_PATTERN},
        ),
    ] = None,
    last_event_id_query: Annotated[
        str | None,
        Query(
            alias="last_event_id",
            description="`Last-Event-ID`, for clients without headers.",
            json_schema_extra={"pattern": EVENT_ID_PATTERN},
        ),
    ] = None,
) -> Response:
    """Run the model on the conversation as it stands and stream the reply — or, with
    `Last-Event-ID`, resume the stream of a run (never a new run): 204 when nothing is left.
    Closing the connection aborts a run it started, unless `on_disconnect=continue`."""
    resume_from = last_event_id if last_event_id is not None else last_event_id_query
    ai_sdk = chat_streamer(caller, conversation_id) if protocol == "ai-sdk" else None
    if ai_sdk is not None and resume_from is not None:
        resume_from = from_start(resume_from)  # the AI SDK's resume replays the whole reply
    if resume_from is not None:
        reader = caller.reader()
        resume = await reader.resume(conversation_id, resume_from)
        if resume is None:
            return Response(status_code=204)
        return _sse(caller.services, resume.run.id, reader.follow(resume), None, ai_sdk)
    run = await caller.runs().start(conversation_id, on_disconnect=on_disconnect)
    return _started(caller.services, run, ai_sdk)


@router.post(
    "/{conversation_id}/stream", responses=SSE_RESPONSES, response_class=EventSourceResponse
)
async def post_and_stream(
    request: Request,
    conversation_id: IdPath,
    body: DeltaBundle,
    caller: CallerDep,
    expected_version: IfMatchDep,
    on_disconnect: OnDisconnectQuery = "cancel",
    protocol: ProtocolQuery = "parley",
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response:
    """Apply a delta bundle, then run — continuation in one request. If the run cannot start,
    the bundle is not applied either. With `Idempotency-Key`, a retry gets the same run's
    stream from its first event (never a second run)."""
    services = caller.services
    ai_sdk = chat_streamer(caller, conversation_id) if protocol == "ai-sdk" else None

    async def start() -> Response:
        delta = convert.delta(body, services.settings)
        run = await caller.runs().start(conversation_id, delta, expected_version, on_disconnect)
        return _started(services, run, ai_sdk)

    async def replay(run_id: str) -> Response:
        reader = caller.reader()
        resume = await reader.resume(conversation_id, f"{run_id}:0")
        if resume is None:
            return Response(status_code=204)
        return _sse(services, resume.run.id, reader.follow(resume), None, ai_sdk)

    return await idempotent(request, idempotency_key, caller.idempotency(), start, replay)


@router.post("/{conversation_id}/cancel", status_code=202, response_model=CancelOut)
async def cancel_run(conversation_id: IdPath, caller: CallerDep) -> CancelOut:
    """Abort the conversation's running run, whoever started it and on whichever server: it
    stops within a second, stores its partial reply and ends with `done` status `aborted`.
    409 when nothing runs."""
    return CancelOut(run_id=await caller.conversations().cancel(conversation_id))


@router.get("/{conversation_id}/runs", response_model=RunPage)
async def list_runs(
    conversation_id: IdPath,
    caller: CallerDep,
    limit: Annotated[int | None, Query(ge=1, description="Page size.")] = None,
    cursor: CursorQuery = None,
) -> RunPage:
    """The conversation's runs, newest first, a page at a time."""
    settings = caller.services.settings
    size = min(limit or settings.page_size, settings.max_page_size)
    records, next_cursor = await caller.reader().list(conversation_id, size, cursor)
    return RunPage(items=[convert.run_out(r) for r in records], next_cursor=next_cursor)


@router.get("/{conversation_id}/runs/{run_id}", response_model=RunOut)
async def get_run(conversation_id: IdPath, run_id: str, caller: CallerDep) -> RunOut:
    """One run: its status, how it ended, its token usage."""
    return convert.run_out(await caller.reader().get(conversation_id, run_id))
