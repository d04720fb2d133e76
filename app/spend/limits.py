"""A key's limits, checked atomically in SQL (no per-process counter that replicas multiply).

Imports SQLAlchemy and app.storage. Requests per minute: one statement on a fixed-window
counter row. Concurrent runs, output tokens per day and dollars per month: in the run's start
transaction, with the key's row locked (PostgreSQL: ``FOR UPDATE``; SQLite's write transactions
are one at a time), from the ``runs`` rows still running and the usage ledger. The ledger is
charged as each run ends, so a start also counts the key's running runs at the average cost of
its runs this period (a budgeted key with no run charged yet runs one run at a time): a race of
starts for a key's last dollars ends at most about one run over, whatever the process count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import case, func, literal, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.spend.errors import BudgetExceeded, RateLimited, TooManyRuns
from app.spend.keys import KeyRecord, Limits
from app.storage.spend_tables import KEY_WINDOWS, KEYS, USAGE_LEDGER
from app.storage.tables import RUNS

_W = KEY_WINDOWS.c
_L = USAGE_LEDGER.c
_R = RUNS.c


def _window(now: datetime) -> int:
    return int(now.timestamp() // 60)


async def take_request(session: AsyncConnection, key_id: str, limit: int, now: datetime) -> None:
    """Count one request of the key in this minute's window, unless it has had ``limit``:
    then ``RateLimited`` (one statement; the caller commits)."""
    postgres = session.dialect.name == "postgresql"
    if postgres:  # a count lost with the server's last moments is no loss: no flush to wait for
        await session.execute(text("SET LOCAL synchronous_commit TO OFF"))
    dialect = postgresql if postgres else sqlite
    window = _window(now)
    statement = dialect.insert(KEY_WINDOWS).values(key_id=key_id, window=window, n=1)
    statement = statement.on_conflict_do_update(
        index_elements=[_W.key_id, _W.window],
        set_={"n": KEY_WINDOWS.c.n + 1},
        where=KEY_WINDOWS.c.n < limit,
    ).returning(KEY_WINDOWS.c.n)
    if limit < 1 or (await session.execute(statement)).first() is None:
        retry = (window + 1) * 60 - now.timestamp()
        raise RateLimited(f"this key may make {limit} requests a minute", retry)


async def prune_windows(session: AsyncConnection, now: datetime) -> None:
    """Forget the request counts of past minutes."""
    await session.execute(KEY_WINDOWS.delete().where(_W.window < _window(now) - 1))


@dataclass(frozen=True)
class Spent:
    """What a key spent: output tokens today, dollars this month (UTC), and in how many runs."""

    day_tokens: int = 0
    day_runs: int = 0
    month_usd: float = 0.0
    month_runs: int = 0


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    return day_start(now).replace(day=1)


def next_month(now: datetime) -> datetime:
    start = month_start(now)
    return (start + timedelta(days=32)).replace(day=1)


async def spent(session: AsyncConnection, key_id: str, now: datetime) -> Spent:
    """The key's spending so far, from the ledger (one indexed range of this month's rows)."""
    today = _L.at >= day_start(now)
    statement = select(
        func.coalesce(func.sum(case((today, _L.output_tokens), else_=literal(0))), 0),
        func.count(func.distinct(case((today, _L.run_id), else_=None))),
        func.coalesce(func.sum(_L.cost_usd), 0.0),
        func.count(func.distinct(_L.run_id)),
    ).where(_L.key_id == key_id, _L.at >= month_start(now))
    row = (await session.execute(statement)).one()
    return Spent(int(row[0]), int(row[1]), float(row[2]), int(row[3]))


def check_budget(
    limits: Limits, spent: Spent, now: datetime, running: int = 0, tokens: int = 0, usd: float = 0
) -> None:
    """``BudgetExceeded`` when the key spent its tokens of the day or dollars of the month —
    counting ``tokens`` and ``usd`` more (a run's own so far) and ``running`` runs at the
    period's average (a run with no average yet: all it may spend)."""
    day_limit, usd_limit = limits.output_tokens_per_day, limits.budget_usd_per_month
    if day_limit is not None:
        used = spent.day_tokens + tokens
        ahead = running * (spent.day_tokens / spent.day_runs if spent.day_runs else day_limit)
        if used >= day_limit or (running and used + ahead >= day_limit):
            retry = (day_start(now) + timedelta(days=1) - now).total_seconds()
            raise BudgetExceeded(f"this key spent its {day_limit} output tokens of today", retry)
    if usd_limit is not None:
        used_usd = spent.month_usd + usd
        average = spent.month_usd / spent.month_runs if spent.month_runs else usd_limit
        ahead_usd = running * average
        if used_usd >= usd_limit or (running and used_usd + ahead_usd >= usd_limit):
            retry = (next_month(now) - now).total_seconds()
            raise BudgetExceeded(f"this key spent its USD {usd_limit:g} of this month", retry)


async def admit_run(session: AsyncConnection, key: KeyRecord, now: datetime) -> None:
    """In the start's write transaction: lock the key's row, then refuse the run if the key has
    as many runs going as it may (``TooManyRuns``) or spent its budget (``BudgetExceeded``)."""
    limits = key.limits
    if limits.max_concurrent_runs is None and not limits.budgeted:
        return
    lock = select(KEYS.c.id).where(KEYS.c.id == key.id)
    if session.dialect.name == "postgresql":
        lock = lock.with_for_update()
    await session.execute(lock)
    running = await session.scalar(
        select(func.count()).select_from(RUNS).where(_R.key_id == key.id, _R.status == "running")
    )
    running = int(running or 0)
    if limits.max_concurrent_runs is not None and running >= limits.max_concurrent_runs:
        raise TooManyRuns(f"this key may have {limits.max_concurrent_runs} runs going", 1)
    if limits.budgeted:
        check_budget(limits, await spent(session, key.id, now), now, running)


async def check_run_budget(
    session: AsyncConnection, key: KeyRecord, tokens: int, usd: float, now: datetime
) -> None:
    """Between a run's rounds: ``BudgetExceeded`` when what the key was charged, with what
    this run spent so far (``tokens`` of output, ``usd``), reaches a budget."""
    if key.limits.budgeted:
        check_budget(key.limits, await spent(session, key.id, now), now, 0, tokens, usd)
