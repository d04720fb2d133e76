"""``GET /usage``: the usage ledger summed by key, conversation, model or day (docs/spend.md).

May import FastAPI, schemas, deps and app/spend. The admin token sees every caller's usage; a
key (or, on an open service, any caller) its own.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AwareDatetime, TypeAdapter, ValidationError

from app.api.deps import bearer, bearer_token, get_services
from app.api.problems import validation_problem
from app.api.routes.admin import is_admin
from app.api.schemas.usage import GroupBy, UsageReport, in_utc
from app.spend.service import UsageReader

router = APIRouter(tags=["usage"])

_TIME = TypeAdapter(AwareDatetime)
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]")
"""How a time given here begins: a date and time (pydantic alone would also take a number of
seconds since 1970, which the document does not offer)."""


def _time(name: str, value: str | None) -> datetime | None:
    """``value`` as a timezone-aware datetime (RFC 3339), or a 422 naming the parameter."""
    if value is None:
        return None
    try:
        if not _RFC3339.match(value):
            raise ValueError("not an RFC 3339 date-time")
        return in_utc(_TIME.validate_strings(value, strict=True))
    except (ValueError, ValidationError) as exc:
        msg = "a date-time with a UTC offset, such as 2026-11-01T00:00:00Z"
        errors = [{"loc": ["query", name], "msg": msg, "type": "value_error", "input": value}]
        raise validation_problem(errors) from exc


def _time_query(description: str, alias: str) -> Any:
    return Query(alias=alias, description=description, json_schema_extra={"format": "date-time"})


@router.get("/usage", response_model=UsageReport, response_model_by_alias=True)
async def get_usage(
    request: Request,
    _scheme: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    group_by: Annotated[GroupBy, Query(description="What to sum by.")] = "day",
    start: Annotated[
        str | None, _time_query("From this time on (inclusive; with a UTC offset).", "from")
    ] = None,
    end: Annotated[str | None, _time_query("Before this time (exclusive).", "to")] = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> dict[str, Any]:
    """Model calls, tokens by kind and cost from the usage ledger, summed by `group_by`
    over `[from, to)`: everyone's with the admin token, else the caller's own."""
    services = await get_services(request)
    token = bearer_token(authorization)
    owner = None if is_admin(services, token) else (await services.keys.grant(token)).owner
    since, until = _time("from", start), _time("to", end)  # `to` before `from`: no rows
    items = await UsageReader(services.database).report(group_by, owner, since, until)
    return {"group_by": group_by, "from": since, "to": until, "items": items}
