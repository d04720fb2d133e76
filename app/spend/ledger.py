"""The usage ledger: one row per model call, written with the run's ending (or its recovery),
once — the row's key is (run, call) and a second write of it is ignored.

Imports SQLAlchemy, app.domain, app.storage and app.observability. What a run reports as it
goes is its ``message_stop`` events' usage; a run whose process died is charged from the
``message_stop`` events its log kept (``entries_from_log``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain import Usage
from app.observability.spend_metrics import charged
from app.spend.pricing import PriceTable
from app.storage import EventRow, utcnow
from app.storage.spend_tables import USAGE_LEDGER
from app.storage.tables import RUNS

_L = USAGE_LEDGER.c
TOKEN_KINDS = Usage.KINDS
GROUPS = ("key", "conversation", "model", "day")


@dataclass(frozen=True, slots=True)
class Charge:
    """One model call of a run: its number in the run (from 1), where, and what it used."""

    call: int
    provider: str
    model: str
    usage: Usage
    at: datetime


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a run's calls are charged to."""

    run_id: str
    conversation_id: str
    owner: str
    key_id: str | None


async def charge(
    session: AsyncConnection, payer: Payer, charges: Sequence[Charge], prices: PriceTable
) -> None:
    """Write the calls' rows (in the caller's transaction); a call already written is kept
    (and not counted again in the metrics)."""
    await charge_many(session, [(payer, charges)], prices)


async def charge_many(
    session: AsyncConnection,
    bills: Sequence[tuple[Payer, Sequence[Charge]]],
    prices: PriceTable,
) -> None:
    """``charge`` for several runs at once (the endings one flush stores): one statement."""
    rows = [_row(payer, c, prices) for payer, charges in bills for c in charges]
    if not rows:
        return
    dialect = postgresql if session.dialect.name == "postgresql" else sqlite
    statement = (
        dialect.insert(USAGE_LEDGER)
        .on_conflict_do_nothing(index_elements=[_L.run_id, _L.call])
        .returning(_L.run_id, _L.call)
    )
    written = {tuple(row) for row in await session.execute(statement, rows)}
    for row in rows:
        if (key := (row["run_id"], row["call"])) in written:
            written.discard(key)  # counted once, should a call come twice
            tokens = {kind: row[kind] for kind in TOKEN_KINDS}
            charged(row["provider"], row["model"], tokens, row["cost_usd"])


def _row(payer: Payer, c: Charge, prices: PriceTable) -> dict[str, Any]:
    tokens = {kind: int(getattr(c.usage, kind) or 0) for kind in TOKEN_KINDS}
    return {
        "run_id": payer.run_id,
        "call": c.call,
        "conversation_id": payer.conversation_id,
        "owner": payer.owner,
        "key_id": payer.key_id,
        "provider": c.provider,
        "model": c.model,
        **tokens,
        "cost_usd": prices.cost(c.model, c.usage),
        "at": c.at,
    }


def entries_from_log(rows: Sequence[EventRow]) -> list[Usage]:
    """The usage of each ``message_stop`` a run's stored log holds, in order."""
    found = []
    for row in rows:
        if row.name != "message_stop":
            continue
        usage = json.loads(row.data).get("usage") or {}
        found.append(Usage(**{k: usage.get(k) for k in TOKEN_KINDS}))
    return found


async def charge_abandoned(
    session: AsyncConnection, run_id: str, rows: Sequence[EventRow], prices: PriceTable
) -> None:
    """Charge a run its process abandoned for the model calls its log kept."""
    usages = entries_from_log(rows)
    if not usages:
        return
    r = RUNS.c
    statement = select(r.conversation_id, r.owner, r.key_id, r.provider, r.model).where(
        r.id == run_id
    )
    run = (await session.execute(statement)).one_or_none()
    if run is None:
        return
    payer = Payer(run_id, run.conversation_id, run.owner, run.key_id)
    now = utcnow()
    charges = [
        Charge(i + 1, run.provider or "unknown", run.model or "unknown", usage, now)
        for i, usage in enumerate(usages)
    ]
    await charge(session, payer, charges, prices)


def _totals() -> list[Any]:
    return [
        func.count().label("calls"),
        *(func.coalesce(func.sum(getattr(_L, k)), 0).label(k) for k in TOKEN_KINDS),
        func.sum(_L.cost_usd).label("cost_usd"),
        func.count(_L.cost_usd).label("priced_calls"),
    ]


def _out(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": int(row.calls)}
    out.update({k: int(getattr(row, k)) for k in TOKEN_KINDS})
    out["cost_usd"] = None if row.cost_usd is None else round(float(row.cost_usd), 9)
    out["unpriced_calls"] = int(row.calls) - int(row.priced_calls)
    return out


async def conversation_totals(session: AsyncConnection, conversation_id: str) -> dict[str, Any]:
    """A conversation's model calls, tokens by kind and cost, over all its runs."""
    statement = select(*_totals()).where(_L.conversation_id == conversation_id)
    return _out((await session.execute(statement)).one())


def _group_column(session: AsyncConnection, group_by: str) -> ColumnElement[Any]:
    if group_by == "key":
        return func.coalesce(_L.key_id, _L.owner)
    if group_by == "conversation":
        return _L.conversation_id
    if group_by == "model":
        return _L.provider + "/" + _L.model
    if session.dialect.name == "postgresql":
        return func.to_char(func.timezone("UTC", _L.at), "YYYY-MM-DD")
    return func.strftime("%Y-%m-%d", _L.at)


async def usage_report(
    session: AsyncConnection,
    group_by: str,
    owner: str | None,
    start: datetime | None,
    end: datetime | None,
) -> list[dict[str, Any]]:
    """The ledger summed by ``group_by`` (one of ``GROUPS``) over ``[start, end)``: every
    owner's rows when ``owner`` is None."""
    group = _group_column(session, group_by).label("group")
    statement = select(group, *_totals()).group_by(group).order_by(group)
    if owner is not None:
        statement = statement.where(_L.owner == owner)
    if start is not None:
        statement = statement.where(_L.at >= start)
    if end is not None:
        statement = statement.where(_L.at < end)
    rows = (await session.execute(statement)).all()
    return [{"group": str(row.group), **_out(row)} for row in rows]
