"""Shared request dependencies as ``Annotated`` aliases: services, owner, If-Match.

May import FastAPI, settings and the runs layer.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.problems import BadRequest, Unauthorized
from app.runs.conversations import ConversationService
from app.runs.events import ErrorCode
from app.runs.follow import RunReader
from app.runs.history import HistoryService
from app.runs.runner import RunService
from app.runs.services import Services

ANONYMOUS = "anonymous"
MAX_VERSION_DIGITS = 18  # a version is a 64-bit integer; longer is not one we issued


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


# Declares the bearer scheme in the OpenAPI document (app.api.contract names it ``bearer``);
# the header itself is read below, so a wrong scheme is a 401 rather than anonymous.
_bearer = HTTPBearer(auto_error=False, scheme_name="bearer")


async def get_owner(
    services: ServicesDep,
    _scheme: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> str:
    """Who is calling: derived from the bearer token (each token sees only its own)."""
    token = None
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("use 'Authorization: Bearer <token>'")
        token = value.strip()
    allowed = [k.encode() for k in services.settings.accepted_api_keys()]
    given = token.encode("utf-8", "surrogateescape") if token is not None else None
    if allowed and not any(given and hmac.compare_digest(given, k) for k in allowed):
        raise Unauthorized("a valid API key is required: 'Authorization: Bearer <key>'")
    if token is None:
        return ANONYMOUS
    return "key:" + hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()[:32]


OwnerDep = Annotated[str, Depends(get_owner)]


async def get_conversations(services: ServicesDep, owner: OwnerDep) -> ConversationService:
    return ConversationService(services, owner)


async def get_runs(services: ServicesDep, owner: OwnerDep) -> RunService:
    return RunService(services, owner)


async def get_reader(services: ServicesDep, owner: OwnerDep) -> RunReader:
    return RunReader(services, owner)


async def get_history(services: ServicesDep, owner: OwnerDep) -> HistoryService:
    return HistoryService(services, owner)


ConversationsDep = Annotated[ConversationService, Depends(get_conversations)]
HistoryDep = Annotated[HistoryService, Depends(get_history)]
RunsDep = Annotated[RunService, Depends(get_runs)]
ReaderDep = Annotated[RunReader, Depends(get_reader)]


async def get_if_match(
    if_match: Annotated[
        str | None,
        Header(description='The version you last saw, as its ETag (`"5"`); 412 if stale.'),
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
