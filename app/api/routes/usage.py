"""``GET /usage``: the usage ledger summed by key, conversation, model or day (docs/spend.md).

May import FastAPI, schemas, deps and app/spend. The admin token sees every caller's usage; a
key (or, on an open service, any caller) its own.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AwareDatetime

from app.api.deps import bearer, bearer_token, get_services
from app.api.problems import BadRequest
from app.api.routes.admin import is_admin
from app.api.schemas.usage import GroupBy, UsageReport
from app.spend.ledger import usage_report

router = APIRouter(tags=["usage"])


@router.get("/usage", response_model=UsageReport, response_model_by_alias=True)
async def get_usage(
    request: Request,
    _scheme: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    group_by: Annotated[GroupBy, Query(description="What to sum by.")] = "day",
    start: Annotated[
        AwareDatetime | None,
        Query(alias="from", description="From this time on (inclusive; with a UTC offset)."),
    ] = None,
    end: Annotated[
        AwareDatetime | None, Query(alias="to", description="Before this time (exclusive).")
    ] = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> dict[str, Any]:
    """Model calls, tokens by kind and cost from the usage ledger, summed by `group_by`
    over `[from, to)`: everyone's with the admin token, else the caller's own."""
    services = await get_services(request)
    token = bearer_token(authorization)
    owner = None if is_admin(services, token) else (await services.keys.grant(token)).owner
    if start is not None and end is not None and end < start:
        raise BadRequest("`to` is before `from`")
    async with services.database.session(readonly=True) as session:
        items = await usage_report(session, group_by, owner, start, end)
    return {"group_by": group_by, "from": start, "to": end, "items": items}
