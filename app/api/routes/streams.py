"""Routes that run the model and follow runs: the SSE stream (POST starts a run, applying a
delta first; GET only follows the running run or resumes one), background runs, cancel, and the
runs of a conversation. May import FastAPI, schemas, deps and the runs layer.

Events (DESIGN §4, app/runs/events.py): each has a name, an ``id`` ``<run id>:<seq>`` and a
JSON body. Errors before the first event are problem+json; after it, an ``error`` event, then
``done``. A stream only reads its run: the run goes on in its own task, so a reader that
disconnects cancels it only when it started it with ``on_disconnect=cancel`` (the default).
No GET starts a run (GET is safe: a prefetcher, a link preview or a page load spends nothing).
A response is made by a ``Respond`` (``sse_response``: Parley's named events), so a stream
route can answer in another wire protocol by choosing another one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Body, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from app.api import attach, convert
from app.api.ai_sdk.response import ChatStreamer, chat_streamer, from_start
from app.api.bodies import ParsedBodyRoute, quick
from app.api.deps import Caller, CallerDep, CursorQuery, IfMatchDep, get_caller
from app.api.event_stream import EventStream
from app.api.idempotency import IdempotencyKeyHeader, idempotent, replay_from
from app.api.paths import public_path
from app.api.routes.conversations import IdPath
from app.api.schemas import CancelOut, DeltaBundle, RunOut, RunPage
from app.api.sse import frames as sse_frames
from app.api.sse import retry as sse_retry
from app.runs.events import EVENT_ID_PATTERN, OnDisconnect, RunEvent
from app.runs.follow import Resume, follow_live
from app.runs.live import LiveRun
from app.runs.services import Services

router = APIRouter(prefix="/conversations", tags=["runs"], route_class=ParsedBodyRoute)
log = logging.getLogger(__name__)

SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A Server-Sent Events stream: a `retry:` field, then `run_started`, "
        "`content_block_start`, `content_block_delta`, `content_block_stop`, `tool_use`, "
        "`message`, `message_stop`, `requires_action`, `error`, and `done` last. Each event's "
        "`id` is `<run id>:<n>`; each event, its `data` parsed, is a `StreamEvent` "
        "(components; `x-parley-event`).",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    503: {"description": "The server is shutting down; retry (`Retry-After`)."},
}
STARTS_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"description": "A run already holds the conversation, or tool results are missing."}
}

_RUN_LOCATION = {
    "description": "The run's URL path (`GET` it for its status).",
    "required": True,
    "schema": {"type": "string"},
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


class Respond(Protocol):
    """Makes a stream's response from a run's events (the wire protocol is its choice)."""

    def __call__(
        self,
        services: Services,
        run_id: str,
        batches: AsyncIterator[list[RunEvent]],
        on_close: Callable[[], None] | None = None,
    ) -> Response: ...


def sse_response(
    services: Services,
    run_id: str,
    batches: AsyncIterator[list[RunEvent]],
    on_close: Callable[[], None] | None = None,
) -> Response:
    """Parley's named events as ``text/event-stream``, after a ``retry:`` field."""
    settings = services.settings

    async def frames() -> AsyncIterator[bytes]:
        yield sse_retry(settings.sse_retry_ms)
        async for batch in batches:
            yield sse_frames(batch, run_id)

    headers = {"X-Run-Id": run_id}
    return EventStream(frames(), headers=headers, on_close=on_close)


def _respond(caller: Caller, conversation_id: str, protocol: str) -> Respond:
    """The response maker of the wire protocol asked for."""
    if protocol != "ai-sdk":
        return sse_response
    streamer: ChatStreamer = chat_streamer(caller, conversation_id)

    def ai_sdk(
        services: Services,
        run_id: str,
        batches: AsyncIterator[list[RunEvent]],
        on_close: Callable[[], None] | None = None,
    ) -> Response:
        return streamer(run_id, batches, on_close)

    return ai_sdk


def _started(services: Services, run: LiveRun, respond: Respond) -> Response:
    """The stream of a run this request started: from its first event; closing it early
    detaches the run's starter (which cancels it unless ``on_disconnect=continue``) — and so
    does a response whose body was never read."""
    events = follow_live(services, run, 0)
    return respond(services, run.run_id, events, lambda: services.manager.detached(run))


async def _follow(caller: Caller, resume: Resume | None, respond: Respond) -> Response:
    """A reader's stream of a run (never a new run): 204 when there is nothing to read."""
    if resume is None:
        return Response(status_code=204)
    return respond(caller.services, resume.run.id, caller.reader().follow(resume))


LastEventIdHeader = Annotated[
    str | None,
    Header(
        description="Resume: the `id` of the last event you received. The events after it are "
        "replayed, then the run is followed live until `done` (any server).",
        json_schema_extra={"pattern": EVENT_ID_PATTERN},
    ),
]
RetryLastEventIdHeader = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        description="On a retry with the same `Idempotency-Key` (as `fetch-event-source` "
        "sends it): the `id` of the last event received; the same run's stream goes on after "
        "it instead of from its first event. A request without the key ignores it.",
        json_schema_extra={"pattern": EVENT_ID_PATTERN},
    ),
]


@router.get(
    "/{conversation_id}/stream",
    responses={
        **SSE_RESPONSES,
        204: {
            "description": "Nothing runs (and no id was given), "
            "or the run has nothing left to send."
        },
    },
    response_class=EventStream,
)
async def follow_stream(
    conversation_id: IdPath,
    caller: CallerDep,
    protocol: ProtocolQuery = "parley",
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: Annotated[
        str | None,
        Query(
            alias="last_event_id",
            description="`Last-Event-ID`, for clients without headers.",
            json_schema_extra={"pattern": EVENT_ID_PATTERN},
        ),
    ] = None,
) -> Response:
    """Follow the conversation's running run from its first event — or, with `Last-Event-ID`,
    resume a run's stream after that event. Never starts a run (start one with `POST …/stream`
    or `POST …/runs`): 204 when nothing runs. Closing the connection leaves the run alone."""
    respond = _respond(caller, conversation_id, protocol)
    resume_from = last_event_id if last_event_id is not None else last_event_id_query
    if protocol == "ai-sdk" and resume_from is not None:
        resume_from = from_start(resume_from)  # the AI SDK's resume replays the whole reply
    reader = caller.reader()
    if resume_from is None:
        return await _follow(caller, await reader.running(conversation_id), respond)
    return await _follow(caller, await reader.resume(conversation_id, resume_from), respond)


StreamBody = Annotated[
    DeltaBundle | None,
    Body(
        description="Messages and a config patch to apply first; none (an empty body) runs "
        "the conversation as it stands."
    ),
]


_SOLVED_HEADERS = frozenset((b"if-match", b"idempotency-key", b"last-event-id"))
"""The headers of a stream start that FastAPI reads (and refuses) for it."""


async def _plain_start(request: Request) -> Response | None:
    """A stream start with no query, no If-Match, no Idempotency-Key, no Last-Event-ID and a
    body the model takes — what a chat window sends — answered without FastAPI's solving
    (app/api/bodies.py, ``quick``): the caller read by ``get_caller``, the body validated by
    ``DeltaBundle`` as FastAPI would. None for any other request: FastAPI's way, its refusals."""
    if request.scope["query_string"] or any(
        name in _SOLVED_HEADERS for name, _ in request.scope["headers"]
    ):
        return None
    try:
        document = await request.json() if await request.body() else None
        body = None if document is None else DeltaBundle.model_validate(document)
    except (ValueError, RecursionError):  # not JSON, or not a bundle (a ValidationError)
        return None
    caller = await get_caller(request, None, request.headers.get("authorization"))
    conversation_id = request.path_params["conversation_id"]
    return await post_and_stream(request, conversation_id, caller, None, body)


@router.post(
    "/{conversation_id}/stream",
    responses={**SSE_RESPONSES, **STARTS_RESPONSES},
    response_class=EventStream,
)
@quick(_plain_start)
async def post_and_stream(
    request: Request,
    conversation_id: IdPath,
    caller: CallerDep,
    expected_version: IfMatchDep,
    body: StreamBody = None,
    on_disconnect: OnDisconnectQuery = "cancel",
    protocol: ProtocolQuery = "parley",
    idempotency_key: IdempotencyKeyHeader = None,
    last_event_id: RetryLastEventIdHeader = None,
) -> Response:
    """Apply a delta bundle (if any), then run and stream the reply — continuation in one
    request. If the run cannot start, the bundle is not applied either. With `Idempotency-Key`,
    a retry gets the same run's stream (never a second run): from its first event, or after
    the `Last-Event-ID` it sends."""
    respond = _respond(caller, conversation_id, protocol)
    services = caller.services

    async def start() -> Response:
        delta = await attach.delta(body or DeltaBundle(), caller)
        run = await caller.runs().start(conversation_id, delta, expected_version, on_disconnect)
        return _started(services, run, respond)

    async def replay(run_id: str) -> Response:
        after = replay_from(run_id, last_event_id)
        return await _follow(caller, await caller.reader().resume(conversation_id, after), respond)

    return await idempotent(request, idempotency_key, caller.idempotency(), start, replay)


@router.post(
    "/{conversation_id}/runs",
    status_code=202,
    response_model=RunOut,
    responses={
        202: {
            "description": "Started: the run (`status` `running`), going on in the background.",
            "headers": {"Location": _RUN_LOCATION},
        },
        **STARTS_RESPONSES,
    },
)
async def start_run(
    request: Request,
    conversation_id: IdPath,
    caller: CallerDep,
    expected_version: IfMatchDep,
    body: StreamBody = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response:
    """Start a run in the background (`on_disconnect=continue`) and answer at once with it:
    202 and its `Location`. Follow it with `GET …/stream` (an `EventSource`), or read its
    status at `Location`. With `Idempotency-Key`, a retry gets the same run."""
    services = caller.services

    async def start() -> Response:
        delta = await attach.delta(body or DeltaBundle(), caller)
        run = await caller.runs().start(conversation_id, delta, expected_version, "continue")
        services.manager.detached(run)  # nobody reads it here: it goes on (continue)
        record = await caller.reader().get(conversation_id, run.run_id)
        path = f"/conversations/{conversation_id}/runs/{run.run_id}"
        location = public_path(request.scope, path)
        return JSONResponse(
            convert.run_out(record).model_dump(mode="json"),
            status_code=202,
            headers={"Location": location},
        )

    return await idempotent(request, idempotency_key, caller.idempotency(), start)


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
