"""RunRepository: runs and their event logs in SQL (DESIGN.md §4a), on the caller's session.

Imports SQLAlchemy and app.storage. It flushes and never commits, like ConversationRepository.
An event row holds events ``seq`` .. ``seq + count - 1`` of one run; what their ``data`` says
is app/runs/events.py's business, not this module's.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import bindparam, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.driver import Direct
from app.storage.errors import ConversationNotFound, RunNotFound
from app.storage.paging import newest_first
from app.storage.records import (
    conversation_key,
    utcnow,
)
from app.storage.tables import CONVERSATIONS, RUN_EVENTS, RUNS

_R = RUNS.c
_E = RUN_EVENTS.c
_C = CONVERSATIONS.c
NOTIFY_CHANNEL = "parley_runs"
"""The PostgreSQL channel that carries ``e:<run ids>`` (new events) and ``c:<run id>`` (cancel)."""

FinalStatus = Literal["completed", "requires_action", "aborted", "failed", "interrupted"]
"""How a run ended (DESIGN §4: ``done``'s ``status``)."""
RunStatus = Literal["running", FinalStatus]
"""A run's status: ``running`` until it ends (app/runs re-exports both)."""


@dataclass(frozen=True)
class RunRecord:
    """A run as stored."""

    id: str
    conversation_id: str
    owner: str
    status: RunStatus
    on_disconnect: str
    cancel_requested: bool
    error_code: str | None
    usage: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class EventRow:
    """Stored events ``seq`` .. ``seq + count - 1`` of run ``run_id``."""

    run_id: str
    seq: int
    count: int
    name: str
    data: str

    @property
    def last_seq(self) -> int:
        return self.seq + self.count - 1


@dataclass(frozen=True)
class RunEnding:
    """How a run ended, for its row."""

    run_id: str
    status: FinalStatus
    error_code: str | None = None
    usage: Mapping[str, Any] | None = None


# A run's ending, for many runs in one statement; a finished run keeps its first ending.
_FINISH = Direct(
    update(RUNS)
    .where(_R.id == bindparam("run"), _R.finished_at.is_(None))
    .values(
        status=bindparam("new_status"),
        error_code=bindparam("new_error_code"),
        usage=bindparam("new_usage"),
        finished_at=bindparam("new_finished_at"),
    )
)


# Built once (see app/storage/conversations/statements.py): the statements every run or flush
# runs, those without expanding parameters on the driver's cursor (app/storage/driver).
_INSERT_RUN = Direct(insert(RUNS))
_INSERT_EVENTS = Direct(insert(RUN_EVENTS))
_CANCEL_REQUESTED = select(_R.id).where(
    _R.id.in_(bindparam("ids", expanding=True)), _R.cancel_requested.is_(True)
)
_RENEW_LEASES = (
    update(CONVERSATIONS)
    .where(_C.lease_run_id.in_(bindparam("ids", expanding=True)))
    .values(lease_expires_at=bindparam("expires"))
    .returning(_C.lease_run_id)
)


def new_run_id() -> str:
    """A fresh run id: a random UUID as 32 lowercase hex digits."""
    return uuid.uuid4().hex


def run_key(run_id: str) -> str:
    """The stored form of a run id; RunNotFound if it is not one."""
    try:
        return uuid.UUID(run_id).hex
    except (ValueError, TypeError, AttributeError):
        raise RunNotFound(str(run_id)) from None


class RunRepository:
    """Reads and changes runs and their events through one AsyncConnection (the caller commits)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session
        self._postgres = session.dialect.name == "postgresql"

    # --- runs ---------------------------------------------------------------------------------

    async def create(
        self, run_id: str, conversation_id: str, owner: str, on_disconnect: str
    ) -> RunRecord:
        """A new run in status ``running``."""
        values = {
            "id": run_id,
            "conversation_id": conversation_key(conversation_id),
            "owner": owner,
            "status": "running",
            "on_disconnect": on_disconnect,
            "cancel_requested": False,
            "error_code": None,
            "usage": None,
            "created_at": utcnow(),
            "finished_at": None,
        }
        await _INSERT_RUN.execute(self._session, values)
        return _record(values)

    async def get(
        self, run_id: str, conversation_id: str | None = None, owner: str | None = None
    ) -> RunRecord:
        """The run; RunNotFound if unknown, or not of that conversation or owner."""
        row = (
            (await self._session.execute(select(RUNS).where(_R.id == run_key(run_id))))
            .mappings()
            .one_or_none()
        )
        if (
            row is None
            or (conversation_id is not None and row["conversation_id"] != _key(conversation_id))
            or (owner is not None and row["owner"] != owner)
        ):
            raise RunNotFound(run_id)
        return _record(row)

    async def list(
        self, conversation_id: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[RunRecord], str | None]:
        """A page of the conversation's runs, newest first, and the next page's cursor."""
        where = _R.conversation_id == conversation_key(conversation_id)
        page, next_cursor = await newest_first(self._session, RUNS, where, limit, cursor)
        return [_record(row) for row in page], next_cursor

    async def delete(self, run_id: str) -> None:
        """Forget a run (one that could not start after all), with its events."""
        await self._session.execute(delete(RUN_EVENTS).where(_E.run_id == run_id))
        await self._session.execute(delete(RUNS).where(_R.id == run_id))

    async def finish(
        self,
        run_id: str,
        status: FinalStatus,
        *,
        error_code: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        """Record how the run ended (once: a finished run keeps its first ending)."""
        await self.finish_many([RunEnding(run_id, status, error_code, usage)])

    async def finish_many(self, endings: Sequence[RunEnding]) -> None:
        """``finish`` for many runs, in one statement."""
        if endings:
            now = utcnow()
            await _FINISH.execute(
                self._session,
                [
                    {
                        "run": e.run_id,
                        "new_status": e.status,
                        "new_error_code": e.error_code,
                        "new_usage": dict(e.usage) if e.usage is not None else None,
                        "new_finished_at": now,
                    }
                    for e in endings
                ],
            )

    async def add_usage(self, run_id: str, counts: Mapping[str, int]) -> None:
        """Add ``counts`` to an ended run's usage, by kind (a title made after its end)."""
        key = run_key(run_id)
        usage = (
            await self._session.execute(select(_R.usage).where(_R.id == key).with_for_update())
        ).scalar()
        added = dict(usage or {})
        for kind, count in counts.items():
            added[kind] = (added.get(kind) or 0) + count
        await self._session.execute(update(RUNS).where(_R.id == key).values(usage=added))

    async def request_cancel(self, run_id: str) -> None:
        """Mark the run for cancelling; on PostgreSQL also tell every process at commit."""
        await self._session.execute(
            update(RUNS)
            .where(_R.id == run_id, _R.finished_at.is_(None))
            .values(cancel_requested=True)
        )
        await self.notify(f"c:{run_id}")

    async def cancel_requested(self, run_ids: Iterable[str]) -> set[str]:
        """Those of ``run_ids`` that someone asked to cancel."""
        ids = list(run_ids)
        if not ids:
            return set()
        result = await self._session.execute(_CANCEL_REQUESTED, {"ids": ids})
        return set(result.scalars())

    async def running(self, conversation_id: str) -> RunRecord | None:
        """The conversation's unfinished run, if any (its process may be dead)."""
        row = (
            (
                await self._session.execute(
                    select(RUNS)
                    .where(
                        _R.conversation_id == conversation_key(conversation_id),
                        _R.finished_at.is_(None),
                    )
                    .order_by(_R.created_at.desc())
                    .limit(1)
                )
            )
            .mappings()
            .one_or_none()
        )
        return _record(row) if row is not None else None

    async def abandoned(self, expired_before: datetime) -> builtins.list[str]:
        """Conversations whose unfinished run's lease expired before ``expired_before``."""
        result = await self._session.execute(
            select(_R.conversation_id)
            .join(CONVERSATIONS, _C.id == _R.conversation_id)
            .where(
                _R.finished_at.is_(None),
                _C.lease_run_id == _R.id,
                _C.lease_expires_at < expired_before,
            )
        )
        return list(result.scalars())

    async def renew_leases(self, run_ids: Sequence[str], ttl_seconds: float) -> set[str]:
        """Extend the leases these runs hold, in one statement; the ids that still hold one."""
        if not run_ids:
            return set()
        expires = datetime.now(UTC) + timedelta(seconds=ttl_seconds)
        result = await self._session.execute(
            _RENEW_LEASES, {"ids": list(run_ids), "expires": expires}
        )
        return {run_id for run_id in result.scalars() if run_id is not None}

    # --- events -------------------------------------------------------------------------------

    async def add_events(self, rows: Sequence[EventRow]) -> None:
        """Append event rows (of any runs) in one statement."""
        if rows:
            await _INSERT_EVENTS.execute(
                self._session,
                [
                    {
                        "run_id": r.run_id,
                        "seq": r.seq,
                        "count": r.count,
                        "name": r.name,
                        "data": r.data,
                    }
                    for r in rows
                ],
            )

    async def events_after(
        self, run_id: str, seq: int, limit: int | None = None
    ) -> builtins.list[EventRow]:
        """The rows holding the run's events after ``seq``, in order (the first may start
        at or before ``seq`` when it holds several events); at most ``limit`` more rows."""
        columns = (_E.seq, _E.count, _E.name, _E.data)
        covering = await self._session.execute(  # the row that holds ``seq`` itself, if merged
            select(*columns)
            .where(_E.run_id == run_id, _E.seq <= seq)
            .order_by(_E.seq.desc())
            .limit(1)
        )
        rows = [EventRow(run_id, *row) for row in covering if row.seq + row.count - 1 > seq]
        after = await self._session.execute(
            select(*columns).where(_E.run_id == run_id, _E.seq > seq).order_by(_E.seq).limit(limit)
        )
        return rows + [EventRow(run_id, *row) for row in after]

    async def has_events(self, run_id: str) -> bool:
        """Whether any event of the run is still stored (finished runs' events are pruned)."""
        found = await self._session.scalar(select(func.count()).where(_E.run_id == run_id))
        return bool(found)

    async def prune_events(self, finished_before: datetime) -> int:
        """Delete the events of runs finished before ``finished_before``; how many rows went."""
        finished = select(_R.id).where(_R.finished_at < finished_before)
        result = await self._session.execute(delete(RUN_EVENTS).where(_E.run_id.in_(finished)))
        return int(getattr(result, "rowcount", 0) or 0)

    async def notify(self, payload: str) -> None:
        """Tell every listening process ``payload`` when this transaction commits (PostgreSQL;
        other databases have no NOTIFY, and their processes poll)."""
        if self._postgres:
            await self._session.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": NOTIFY_CHANNEL, "payload": payload},
            )


def _key(conversation_id: str) -> str:
    try:
        return conversation_key(conversation_id)
    except ConversationNotFound:
        return ""


def _record(row: Mapping[Any, Any]) -> RunRecord:
    return RunRecord(
        id=row["id"],
        conversation_id=row["conversation_id"],
        owner=row["owner"],
        status=row["status"],
        on_disconnect=row["on_disconnect"],
        cancel_requested=bool(row["cancel_requested"]),
        error_code=row["error_code"],
        usage=dict(row["usage"]) if row["usage"] is not None else None,
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )
