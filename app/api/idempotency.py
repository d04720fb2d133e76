"""The ``Idempotency-Key`` header of the write routes, and serving a request at most once.

May import FastAPI, Starlette and the runs layer. ``idempotent`` wraps a route's work: the first
request with a key is served and its result stored; a retry with the same key and request gets
that result again (``Idempotent-Replayed: true``); for a stream, the same run, replayed from
its first event by ``replay_run`` (after the ``Last-Event-ID`` it carries, ``replay_from``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Header, Request
from starlette.responses import Response

from app.conversations.idempotency import IdempotencyService

# Headers a replayed response repeats (the body and status are kept as they were).
_KEPT_HEADERS = ("content-type", "location", "etag")
# Characters the ``idempotency_keys.scope`` column holds.
_SCOPE_LENGTH = 255

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Make a retry safe: a request repeated with the same key (1–255 visible "
        "ASCII characters, e.g. a UUID) within 24 h gets the first result — for a stream, "
        "the same run from its first event, or after the `Last-Event-ID` the retry sends — "
        "never a second effect. The same key with "
        "another request is a 422; while the first is still served, a 409.",
        # No example: a tool that sends the documented example (Swagger's "Try it out",
        # schemathesis, a generated client's tests) would reuse one key for every request.
    ),
]


def replay_from(run_id: str, last_event_id: str | None) -> str:
    """Where a retry's replay of run ``run_id`` starts: after the ``Last-Event-ID`` the retry
    carries when it names an event of that run (a client that got part of the stream), else
    at its first event."""
    if last_event_id is not None and last_event_id.partition(":")[0] == run_id:
        return last_event_id
    return f"{run_id}:0"


def _canonical(body: bytes) -> bytes:
    """A JSON body as one spelling (sorted keys, no spaces, ASCII), so that a retry that
    serializes the same document differently is the same request; any other body as it is."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return body
    try:
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    except RecursionError:
        return body


def _scope(request: Request) -> str:
    """The route a key is scoped to: method and path — or the path's digest when it is longer
    than the column holds (no conversation id is, but a client may send any path)."""
    scope = f"{request.method} {request.url.path}"
    if len(scope) <= _SCOPE_LENGTH:
        return scope
    return f"{request.method} sha256:{hashlib.sha256(request.url.path.encode()).hexdigest()}"


async def _request_hash(request: Request) -> str:
    digest = hashlib.sha256()
    for part in (
        request.method.encode(),
        request.url.path.encode(),
        str(sorted(request.query_params.multi_items())).encode(),
        request.headers.get("if-match", "").encode("latin-1"),
        _canonical(await request.body()),
    ):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


async def idempotent(
    request: Request,
    key: str | None,
    service: IdempotencyService,
    produce: Callable[[], Awaitable[Response]],
    replay_run: Callable[[str], Awaitable[Response]] | None = None,
) -> Response:
    """Serve ``produce()`` once per key; a retry gets the first result."""
    if key is None:
        return await produce()
    scope = _scope(request)
    replay = await service.begin(scope, key, await _request_hash(request))
    if replay is not None:
        if replay.run_id is not None and replay_run is not None:
            response = await replay_run(replay.run_id)
        else:
            response = Response(replay.body, replay.status_code, headers=replay.headers)
        response.headers["Idempotent-Replayed"] = "true"
        return response
    try:
        response = await produce()
    except BaseException:
        await service.release(scope, key)
        raise
    run_id = response.headers.get("x-run-id")
    body = b"" if run_id is not None else bytes(response.body)
    kept = {h: response.headers[h] for h in _KEPT_HEADERS if h in response.headers}
    try:
        await service.complete(scope, key, response.status_code, body, kept, run_id)
    except BaseException:
        # The response will never be sent: its background task (a started run's close hook)
        # detaches the run, as a dropped connection would (on_disconnect decides); the key is
        # freed.
        if response.background is not None:
            await response.background()
        await service.release(scope, key)
        raise
    return response
