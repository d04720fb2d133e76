"""Starts in shared write transactions: the runs a process starts at once commit together.

May import storage and the standard library. A run's start is one unit of work — the delta, the
lease, the run's row and first event (app/runs/runner.py) — and a herd of them (a hundred
clients sending at once) would be a hundred transactions queued on one database: on SQLite one
writer at a time, each paying its own connection, ``BEGIN`` and commit, with the event writer's
flush waiting behind all of them. ``StartGroups`` runs the starts waiting at one moment in one
transaction, as the event writer groups events: the first start of an idle process goes at once,
alone (no savepoint: it costs what it did before); those that arrive while a transaction is
under way form the next, each as in a savepoint of its own (``SavepointChain``), so a start that
is refused (a held lease, a version that does not match, a budget spent) rolls back its own
writes only and gets its own error, while the others commit. A transaction that fails as a whole
(a deadlock between two processes' groups) is retried start by start, so one start never costs
another its answer; a database that does not answer fails the group's starts at once (503), each
alone would wait for it again. Starts are taken in the order of their conversation ids, so two
processes' groups lock their rows in one order.

A caller that goes away (a cancelled request) before its start was taken is dropped; once its
start is taken, its outcome still commits, and the caller's ``orphan`` gets the result (the run
is then started and left, as a client that disconnects leaves it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage import Database, DatabaseUnavailable, SavepointChain

log = logging.getLogger(__name__)
T = TypeVar("T")

_LEAST = 8
"""A group shared out of a herd takes at least this many starts."""

Work = Callable[[AsyncConnection], Awaitable[T]]
"""A start's writes and reads, on the group's connection (its transaction uncommitted)."""


@dataclass(eq=False)
class _Start(Generic[T]):
    key: str
    work: Work[T]
    future: asyncio.Future[T]
    orphan: Callable[[T], None] | None = None
    """Set when the caller went away after its start was taken: it gets the result."""
    taken: bool = False


@dataclass
class StartGroups:
    """Runs starts in shared write transactions (``parallel`` groups at a time)."""

    database: Database
    parallel: int = 1
    """Groups in flight at once: 1 on SQLite (one writer); a few on PostgreSQL, whose
    statements wait on the network while the loop serves the others."""
    most: int = 100
    """Starts in one group at most."""
    transactions: int = 0
    """Transactions so far (for the benchmark and tests)."""
    _waiting: list[_Start[Any]] = field(default_factory=list)
    _groups: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self, key: str, work: Work[T], orphan: Callable[[T], None]) -> T:
        """``work`` in the next group's transaction; its result once that committed. ``key``
        (the conversation id) orders the group's starts."""
        start: _Start[T] = _Start(key, work, asyncio.get_running_loop().create_future())
        self._waiting.append(start)
        self._more()
        try:
            return await asyncio.shield(start.future)
        except asyncio.CancelledError:
            if not start.taken:  # not begun: it never happens
                start.future.cancel()
            elif start.future.done():  # settled, and the caller was cancelled just after
                if not start.future.cancelled() and start.future.exception() is None:
                    orphan(start.future.result())
            else:
                start.orphan = orphan
            raise

    def _more(self) -> None:
        while self._waiting and len(self._groups) < self.parallel:
            # With groups side by side (PostgreSQL), a herd is shared out among them: each
            # group's statements wait on the network while the others' run.
            share = max(_LEAST, -(-len(self._waiting) // self.parallel))
            size = min(self.most, share)
            group, self._waiting = self._waiting[:size], self._waiting[size:]
            task = asyncio.create_task(self._group(group), name="parley-start-group")
            self._groups.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._groups.discard(task)
        self._more()

    async def _group(self, group: list[_Start[Any]]) -> None:
        group = sorted((s for s in group if not s.future.cancelled()), key=lambda s: s.key)
        for start in group:
            start.taken = True
        if not group:
            return
        try:
            outcomes = await self._transaction(group)
        except Exception as exc:
            # One by one, each start its own answer — unless the database did not answer at all
            # (each alone would wait for it again, the last start a whole group's timeouts).
            if len(group) > 1 and not isinstance(exc, DatabaseUnavailable):
                for start in group:
                    await self._alone(start)
                return
            for start in group:
                _settle(start, exc)
            return
        except BaseException:  # the process is going away: so are the starts
            for start in group:
                start.future.cancel()
            raise
        for start, outcome in zip(group, outcomes, strict=True):
            _settle(start, outcome)

    async def _alone(self, start: _Start[Any]) -> None:
        try:
            (outcome,) = await self._transaction([start])
        except Exception as exc:
            outcome = exc
        _settle(start, outcome)

    async def _transaction(self, group: list[_Start[Any]]) -> list[Any]:
        """One transaction for the group: each start's result, or the exception it raised."""
        outcomes: list[Any] = []
        async with self.database.session() as session:
            if len(group) == 1:  # alone: no savepoint; its error rolls the transaction back
                outcomes.append(await group[0].work(session))
            else:
                chain = SavepointChain(session)
                for start in group:
                    await chain.run(start.work)
                outcomes = await chain.finish()
            await session.commit()
        self.transactions += 1
        return outcomes


def _settle(start: _Start[Any], outcome: Any) -> None:
    """Hand the start's outcome to its caller — or, for a caller gone, its run to ``orphan``."""
    if start.future.done():
        return
    if isinstance(outcome, BaseException):
        start.future.set_exception(outcome)
        start.future.exception()  # retrieved: a caller gone does not make it "never retrieved"
        return
    start.future.set_result(outcome)
    if start.orphan is not None:
        try:
            start.orphan(outcome)
        except Exception:
            log.exception("a start whose caller went away could not be handed on")
