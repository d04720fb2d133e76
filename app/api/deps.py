"""Shared request dependencies as ``Annotated`` aliases: the caller (services and owner), the
services alone, If-Match, the page cursor.

May import FastAPI, settings and the runs layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.problems import BadRequest, Unauthorized
from app.conversations.history import HistoryService
from app.conversations.idempotency import IdempotencyService
from app.conversations.service import ConversationService
from app.runs.events import ErrorCode
from app.runs.follow import RunReader
from app.runs.runner import RunService
from app.runs.services import Services
from app.spend import KeyRecord

MAX_VERSION_DIGITS = 18  # a version is a 64-bit integer; longer is not one we issued
# Shapes the document states for values the server parses itself: a value of another shape is
# its 400 (bad_if_match, invalid_cursor), so they are documented, not validated, by pydantic.
IF_MATCH_PATTERN = rf'^(\*|(W/)?"?[0-9]{{1,{MAX_VERSION_DIGITS}}}"?)$'
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"  # base64url, as next_cursor is written


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


# Declares the bearer scheme in the OpenAPI document (app.api.contract names it ``bearer``);
# the header itself is read below, so a wrong scheme is a 401 rather than anonymous.
bearer = HTTPBearer(auto_error=False, scheme_name="bearer")


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None without one)."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("use 'Authorization: Bearer <token>'")
    return value.strip()


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling and the process's services: the one dependency a route takes for both.

    FastAPI solves each dependency of a route, and each of theirs, on every request, cached or
    not: a stream start took 18 such solves with a dependency per use case (services, owner,
    runs, reader, idempotency), 4 with this; the use cases are made when the route needs them.
    """

    services: Services
    owner: str
    key: KeyRecord | None = None
    """The database key calling (app/spend: its limits), if it is one."""
    root_path: str = ""
    """The root path the request came under (``--root-path``): the paths Parley writes."""

    def conversations(self) -> ConversationService:
        return ConversationService(self.services, self.owner)

    def history(self) -> HistoryService:
        return HistoryService(self.services, self.owner)

    def runs(self) -> RunService:
        return RunService(self.services, self.owner, self.key)

    def reader(self) -> RunReader:
        return RunReader(self.services, self.owner)

    def idempotency(self) -> IdempotencyService:
        return IdempotencyService(self.services, self.owner)


async def get_caller(
    request: Request,
    _scheme: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    services = await get_services(request)  # called, not declared: no dependency to solve
    grant = await services.keys.grant(bearer_token(authorization))
    return Caller(services, grant.owner, grant.key, request.scope.get("root_path", ""))


CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_if_match(
    if_match: Annotated[
        str | None,
        Header(
            description='The version you last saw, as its ETag (`"5"`); 412 if stale.',
            json_schema_extra={"pattern": IF_MATCH_PATTERN},
        ),
    ] = None,
) -> int | None:
    """The version an ``If-Match`` header names (``"5"``, ``W/"5"`` or ``5``; ``*`` = any)."""
    if if_match is None or if_match.strip() == "*":
        return None
    raw = if_match.strip().removeprefix("W/").strip('"')
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_VERSION_DIGITS:
        raise BadRequest(
            f'If-Match must be a version ETag such as "3", not {if_match!r}',
            slug=ErrorCode.BAD_IF_MATCH,
        )
    return int(raw)


IfMatchDep = Annotated[int | None, Depends(get_if_match)]

CursorQuery = Annotated[
    str | None,
    Query(
        description="From the previous page (its `next_cursor`).",
        json_schema_extra={"minLength": 1, "pattern": CURSOR_PATTERN},
    ),
]
