"""Routes that run the model: the SSE stream (GET runs as is, POST applies a delta first) and
cancel. May import FastAPI, sse-starlette, schemas, deps and the runs layer.

Events (DESIGN §4): each has a name, an ``id`` that increases within the run, and a JSON body.
Errors before the first event are problem+json; after it, an ``error`` event, then ``done``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from app.api import convert
from app.api.conversations import IdPath
from app.api.deps import ConversationsDep, IfMatchDep, RunsDep, ServicesDep
from app.api.schemas import CancelOut, DeltaBundle
from app.runs.runner import Run, RunService

router = APIRouter(prefix="/conversations", tags=["runs"])

SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A Server-Sent Events stream: `run_started`, `content_block_start`, "
        "`content_block_delta`, `content_block_stop`, `tool_use`, `message`, `message_stop`, "
        "`requires_action`, `error`, and `done` last.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    409: {"description": "A run already holds the conversation, or tool results are missing."},
}


def _sse(runs: RunService, run: Run, ping: float) -> EventSourceResponse:
    async def encoded() -> AsyncIterator[bytes]:
        seq = 0
        async with contextlib.aclosing(runs.events(run)) as batches:
            async for batch in batches:
                chunks = []
                for name, payload in batch:
                    seq += 1
                    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
                    chunks.append(ServerSentEvent(data, event=name, id=str(seq)).encode())
                yield b"".join(chunks)

    return EventSourceResponse(
        encoded(),
        ping=ping,
        background=BackgroundTask(runs.abandon, run),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", "X-Run-Id": run.run_id},
    )


@router.get(
    "/{conversation_id}/stream", responses=SSE_RESPONSES, response_class=EventSourceResponse
)
async def stream_conversation(
    conversation_id: IdPath,
    runs: RunsDep,
    services: ServicesDep,
    last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    """Run the model on the conversation as it stands and stream the reply. Closing the
    connection aborts the run: the text so far is kept, marked incomplete.

    A browser `EventSource` reconnecting (it sends `Last-Event-ID`) gets 204, which tells it
    to stop: a run is never repeated by a reconnect; open a new stream to run again."""
    if last_event_id is not None:
        return Response(status_code=204)
    run = await runs.prepare(conversation_id)
    return _sse(runs, run, services.settings.sse_ping_seconds)


@router.post(
    "/{conversation_id}/stream", responses=SSE_RESPONSES, response_class=EventSourceResponse
)
async def post_and_stream(
    conversation_id: IdPath,
    body: DeltaBundle,
    runs: RunsDep,
    services: ServicesDep,
    expected_version: IfMatchDep,
) -> EventSourceResponse:
    """Apply a delta bundle, then run — continuation in one request. If the run cannot start,
    the bundle is not applied either."""
    delta = convert.delta(body, services.settings)
    run = await runs.prepare(conversation_id, delta, expected_version)
    return _sse(runs, run, services.settings.sse_ping_seconds)


@router.post("/{conversation_id}/cancel", status_code=202, response_model=CancelOut)
async def cancel_run(conversation_id: IdPath, conversations: ConversationsDep) -> CancelOut:
    """Abort the conversation's running run, whoever started it; its stream ends with `done`
    status `aborted`. 409 when nothing runs."""
    return CancelOut(run_id=await conversations.cancel(conversation_id))
