"""Routes for whoever runs Parley: liveness, readiness and Prometheus metrics.

May import FastAPI, deps, problems, storage's schema check and app.observability. None of them
needs a key: keep ``/metrics`` to your network (a proxy or a firewall) if it must stay private.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel

from app.api.deps import ServicesDep
from app.api.problems import Unavailable
from app.observability import metrics
from app.runs.events import ErrorCode
from app.storage.schema import schema_state

router = APIRouter(tags=["operations"])
log = logging.getLogger(__name__)

READINESS_TIMEOUT_SECONDS = 3.0
_PROBLEM: dict[int | str, dict[str, Any]] = {
    503: {
        "description": "Not ready: the database does not answer, its schema is not at the "
        "revision this version needs, or the process is shutting down (`/problems/not_ready`).",
    }
}


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    schema_revision: list[str]


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: 200 while the process serves requests. It does not touch the database: a
    database outage should not get every replica restarted (see `/readyz`)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses=_PROBLEM)
async def readyz(services: ServicesDep) -> Readiness:
    """Readiness: 200 when the database answers and its schema is at the revision this version
    of Parley needs (the migrations' head), and the process is not shutting down; 503
    problem+json otherwise, saying which (`reason`: `database`, `schema`, `shutting_down`)."""
    if services.manager.shutting_down:  # SIGTERM: out of the rotation while the runs drain
        raise Unavailable(
            "shutting down: no new runs here", slug=ErrorCode.NOT_READY, reason="shutting_down"
        )
    try:
        async with asyncio.timeout(READINESS_TIMEOUT_SECONDS):
            state = await schema_state(services.database)
    except Exception as exc:  # any failure to answer means "not ready"; the cause is logged
        log.warning("readiness: the database does not answer (%s)", type(exc).__name__)
        raise Unavailable(
            f"the database does not answer ({type(exc).__name__})",
            slug=ErrorCode.NOT_READY,
            reason="database",
        ) from exc
    if not state.at_head:
        raise Unavailable(state.describe(), slug=ErrorCode.NOT_READY, reason="schema")
    return Readiness(status="ready", schema_revision=sorted(state.current))


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format."}},
)
async def prometheus_metrics() -> Response:
    """Metrics in the Prometheus text format (every process's, in multiprocess mode)."""
    body, content_type = metrics.scrape()
    return Response(body, media_type=content_type)
