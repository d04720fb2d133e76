"""The group-commit writer: one task per process stores every run's events, messages and leases.

May import storage, the domain and the runs layer. Runs hand it events (``add``, stored within
one flush interval, text deltas of one block merged) and commits (``commit``: a run's finished
messages with their ``message`` events, or its ending; stored at once, together with whatever
events wait). Each flush is one transaction for all runs of the process. Between flushes it
renews the leases of all live runs in one statement, looks for cancels asked of them from other
processes, and prunes the events of runs finished longer ago than the retention period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from app.domain import Message
from app.runs.events import FinalStatus, RunEvent
from app.runs.live import LiveRun, RunManager, SendGate
from app.runs.log_codec import merged_rows
from app.runs.payloads import EventData
from app.runs.priority import FirstOutputs
from app.runs.recovery import recover
from app.settings import Settings
from app.spend import Charge, Payer, PriceTable, load_prices
from app.spend.ledger import charge_many
from app.spend.limits import prune_windows
from app.storage import (
    ConversationNotFound,
    ConversationRecord,
    ConversationRepository,
    DatabaseUnavailable,
    EventRow,
    LeaseLost,
    RunAppend,
    RunEnding,
    RunRepository,
    StorageError,
    driver_said,
    is_transient,
    utcnow,
)
from app.webhooks import RunEnded, enqueue_run_endings

log = logging.getLogger(__name__)


def _said(exc: BaseException) -> str:
    """A database error for the log: a DatabaseUnavailable with the driver's reason."""
    cause = exc.__cause__ if isinstance(exc, DatabaseUnavailable) else None
    return f"{exc} ({driver_said(cause)})" if cause is not None else str(exc)


@dataclass(frozen=True)
class Ending:
    """How a run ended, for its row; its model calls, for the usage ledger (app/spend)."""

    status: FinalStatus
    error_code: str | None = None
    usage: dict[str, Any] | None = None
    payer: Payer | None = None
    charges: Sequence[Charge] = ()


@dataclass(eq=False)
class Commit:
    """Messages of a run to store now, with the events built from the stored record.

    ``events(record)`` gives the events' bodies (numbered by the run, after its last event); with
    ``ending`` the run's lease is released and its row finished in the same transaction.
    """

    run: LiveRun
    messages: Sequence[Message]
    events: Callable[[ConversationRecord], list[EventData]]
    ending: Ending | None = None
    future: asyncio.Future[list[RunEvent]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


Repositories = Callable[[], AbstractAsyncContextManager[ConversationRepository]]


class EventWriter:
    """Stores the runs' events in group commits; renews leases; notices remote cancels."""

    def __init__(
        self,
        settings: Settings,
        manager: RunManager,
        repository: Repositories,
        reader: Repositories,
        prices: PriceTable | None = None,
    ) -> None:
        self._settings = settings
        self._prices = prices or load_prices(settings.prices_file)
        self._manager = manager
        self._repository = repository
        self._reader = reader
        self._wake = asyncio.Event()
        self._events: list[tuple[LiveRun, RunEvent]] = []
        self._commits: list[Commit] = []
        self._first_event_at: float | None = None
        self._commits_at: float | None = None
        self.first_outputs = FirstOutputs()
        """Starts being set up: flushes wait meanwhile (app/runs/priority.py)."""
        self.first_outputs.on_clear = self._wake.set
        self._paused_until = 0.0
        """After a flush the database did not take, the next waits until then."""
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.transactions = 0
        """Write transactions so far (for the benchmark and operators)."""
        self.on_flush: Callable[[float, int], None] | None = None
        """Called with (seconds, events stored) after each flush."""
        self.gate = SendGate()
        """Closed while flushes fail or hang: readers are then sent stored events only."""
        self._gate_patience = max(1.0, 10 * settings.event_flush_seconds)

    # --- what runs call -------------------------------------------------------------------------

    def add(self, run: LiveRun, event: RunEvent) -> None:
        """Store ``event`` of ``run`` with the next flush (within one flush interval)."""
        if not self._settings.run_event_log:
            return
        if not self._events:
            self._first_event_at = self._now()
            self._wake.set()
        self._events.append((run, event))

    async def commit(self, commit: Commit) -> list[RunEvent]:
        """Store ``commit`` now (with every event waiting); its events, numbered and stored.

        Cancelling the caller does not cancel the commit: await ``commit.future`` to know.
        """
        if not self._commits:
            self._commits_at = self._now()
        self._commits.append(commit)
        self._wake.set()
        if self._task is None or self._task.done():  # not started (or gone): store it here
            await self._flush()
        return await asyncio.shield(commit.future)

    # --- the task -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="parley-event-writer")

    async def close(self) -> None:
        """Store what waits, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this close was cancelled (a shutdown that bounds it), not the task
            self._task = None
        await self._flush()

    async def _run(self) -> None:
        settings = self._settings
        loop = asyncio.get_running_loop()
        renew_every = settings.run_lease_seconds / 3
        next_renew = loop.time() + renew_every
        next_poll = loop.time()
        next_prune = loop.time()
        next_sweep = loop.time() + renew_every
        while not self._closing:
            deadline = min(next_renew, next_poll, next_prune, next_sweep)
            held = self.first_outputs.held_until
            if self._commits:
                deadline = min(deadline, max(self._paused_until, held(self._commits_at)))
            elif self._events and self._first_event_at is not None:
                due = self._first_event_at + settings.event_flush_seconds
                deadline = min(deadline, max(due, self._paused_until, held(self._first_event_at)))
            await self._sleep_until(deadline)
            try:
                if self._flush_ready():
                    await self._flush()
                now = loop.time()
                if now >= next_renew:  # first: after a stall, our leases before others' runs
                    next_renew = now + renew_every
                    await self._renew_leases()
                if now >= next_sweep:
                    next_sweep = now + renew_every
                    await self._end_abandoned_runs()
                if now >= next_poll:
                    next_poll = now + settings.cancel_poll_seconds
                    await self._poll_cancels()
                if now >= next_prune:
                    next_prune = now + settings.prune_interval_seconds
                    await self._prune()
            except Exception as exc:  # the writer must outlive a database hiccup
                if isinstance(exc, DatabaseUnavailable):  # said once a cycle, no traceback
                    log.warning("event writer: %s", _said(exc))
                else:
                    log.exception("event writer: a periodic task failed")

    async def _sleep_until(self, deadline: float) -> None:
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        self._wake.clear()

    def _flush_ready(self) -> bool:
        """Commits wait, or events have waited a flush interval — and no start is owed the
        loop first (``first_outputs``), nor is the database being given a rest."""
        now, since = self._now(), self._first_event_at
        interval = self._settings.event_flush_seconds
        events_due = bool(self._events) and since is not None and now - since >= interval
        if now < self._paused_until or not (self._commits or events_due or self._closing):
            return False
        since = self._commits_at if self._commits else since
        return self._closing or now >= self.first_outputs.held_until(since)

    # --- one flush: one transaction for every run -----------------------------------------------

    async def _flush(self) -> None:
        events, self._events = self._events, []
        commits, self._commits = self._commits, []
        first_event_at, self._first_event_at = self._first_event_at, None
        self._commits_at = None
        if not events and not commits:
            return
        started = time.monotonic()
        groups: dict[str, _Group] = {}
        for run, event in events:
            groups.setdefault(run.run_id, _Group(run)).events.append(event)
        for commit in commits:
            groups.setdefault(commit.run.run_id, _Group(commit.run)).commits.append(commit)
        hanging = asyncio.get_running_loop().call_later(self._gate_patience, self._close_gate)
        try:
            await self._store(list(groups.values()))
            self.gate.reopen(self._manager.all())
        except Exception as exc:
            self._close_gate()
            if not is_transient(exc):
                await self._store_each_alone(list(groups.values()))
            elif not self._closing:  # unreachable or busy: keep everything, in order, retry
                log.warning(
                    "event writer: the database did not take a flush (%s); retrying", _said(exc)
                )
                self._events = events + self._events
                self._commits = commits + self._commits
                self._first_event_at = first_event_at or self._now()
                self._paused_until = self._now() + self._settings.event_flush_seconds * 5
                return
            else:
                log.exception("event writer: the last flush failed; %d events lost", len(events))
        finally:
            hanging.cancel()
        if self.on_flush is not None:
            self.on_flush(time.monotonic() - started, len(events) + len(commits))

    def _close_gate(self) -> None:
        self.gate.close(f"a flush failed or took over {self._gate_patience:.2f} s")

    async def _store_each_alone(self, groups: list[_Group]) -> None:
        """One run's bad data must not cost the others theirs: store each run alone. A run
        whose events cannot be stored at all is stopped: its log would have a hole."""
        for group in groups:
            try:
                await self._store([group])
            except Exception as exc:
                log.exception("event writer: run %s: events not stored", group.run.run_id)
                for commit in group.commits:
                    if not commit.future.done():
                        commit.future.set_exception(exc)
                group.run.stop("storage_failed")

    async def _store(self, groups: list[_Group]) -> None:
        """One transaction storing the groups; commit futures are resolved once it committed."""
        commits = [commit for group in groups for commit in group.commits]
        async with self._repository() as repo:
            run_repo = RunRepository(repo.session)
            # Only the run holding its conversation writes to its log. A run whose lease was
            # taken while this process stood still (past the lease: another process ended the
            # run) has its events dropped and is stopped; its commits meet LeaseLost.
            landing = await _land(repo, commits, self._prices) if commits else _Landing()
            lost = landing.lost
            committing = {commit.run.run_id for commit in commits}
            waiting = [g.run for g in groups if g.run.run_id not in committing]
            if waiting:
                holders = await repo.lease_holders([run.conversation_id for run in waiting])
                lost += [run for run in waiting if holders.get(run.conversation_id) != run.run_id]
            rows: list[EventRow] = []
            for group in groups:
                if group.run in lost:
                    continue
                stored = [*group.events, *landing.events.get(group.run.run_id, ())]
                rows.extend(merged_rows(group.run.run_id, stored))
            await run_repo.add_events(rows)
            for payload in _notifications([g.run.run_id for g in groups]):
                await run_repo.notify(payload)
        self.transactions += 1
        for commit, outcome in zip(commits, landing.outcomes, strict=True):
            if isinstance(outcome, StorageError):
                commit.future.set_exception(outcome)
            else:
                commit.future.set_result(outcome)
        for group in groups:
            stored = [*group.events, *landing.events.get(group.run.run_id, ())]
            if stored and group.run not in lost:
                group.run.mark_stored(max(event.seq for event in stored))
        for run in lost:
            self._lease_lost(run)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    # --- between flushes ------------------------------------------------------------------------

    async def _end_abandoned_runs(self) -> None:
        """End the runs of processes that died (their leases expired), so their rows do not say
        ``running`` — nor their partial replies go missing from the history — while the
        conversation already reads ``idle``. A run of this process that outlived its lease (a
        stall) is renewed, not ended (app/runs/recovery.py knows this process's runs)."""
        cutoff, lease = datetime.now(UTC), self._settings.run_lease_seconds
        async with self._reader() as reader:
            abandoned = await RunRepository(reader.session).abandoned(cutoff)
        for conversation_id in abandoned:
            async with self._repository() as repo:
                await recover(repo, self._manager, lease, conversation_id, self._prices)
            self.transactions += 1

    async def _renew_leases(self) -> None:
        live = self._manager.running()
        if not live:
            return
        asked_at = self._now()  # each renewed lease runs from no earlier than this
        async with self._repository() as repo:
            held = await RunRepository(repo.session).renew_leases(
                [r.run_id for r in live], self._settings.run_lease_seconds
            )
        self.transactions += 1
        for run in live:
            if run.run_id not in held:
                self._lease_lost(run)
            else:
                run.hold_lease_until(asked_at + self._settings.run_lease_seconds)

    def _lease_lost(self, run: LiveRun) -> None:
        """Stop ``run``: another process holds its conversation now (a finishing run's ending
        meets LeaseLost on its own)."""
        if not run.lease_gone:
            log.warning("run %s lost its lease; stopping it", run.run_id)
        run.lease_lost()

    async def _poll_cancels(self) -> None:
        live = self._manager.running()
        if not live:
            return
        async with self._reader() as repo:
            asked = await RunRepository(repo.session).cancel_requested([r.run_id for r in live])
        for run_id in asked:
            self._manager.stop(run_id, "cancel")

    async def _prune(self) -> None:
        cutoff = datetime.now(UTC) - timedelta(seconds=self._settings.run_event_retention_seconds)
        async with self._repository() as repo:
            pruned = await RunRepository(repo.session).prune_events(cutoff)
            await prune_windows(repo.session, utcnow())
        self.transactions += 1
        if pruned:
            log.info("pruned %d stored events of runs finished before %s", pruned, cutoff)


@dataclass
class _Group:
    """What one flush stores for one run."""

    run: LiveRun
    events: list[RunEvent] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)


@dataclass
class _Landing:
    """What a flush's commits did: each commit's events (or why it was refused), the events
    by run, and the runs that no longer hold their conversations."""

    outcomes: list[list[RunEvent] | StorageError] = field(default_factory=list)
    events: dict[str, list[RunEvent]] = field(default_factory=dict)
    lost: list[LiveRun] = field(default_factory=list)


async def _land(
    repo: ConversationRepository, commits: list[Commit], prices: PriceTable
) -> _Landing:
    """Store the commits' messages and endings in ``repo``'s transaction, and the ending runs'
    model calls in the usage ledger; number their events (each run numbers its own)."""
    landing = _Landing()
    records = await repo.append_for_runs([_append(c) for c in commits])
    endings: list[RunEnding] = []
    ended: list[RunEnded] = []
    bills: list[tuple[Payer, Sequence[Charge]]] = []
    for commit, record in zip(commits, records, strict=True):
        if isinstance(record, StorageError):
            landing.outcomes.append(record)
            if isinstance(record, LeaseLost | ConversationNotFound):
                landing.lost.append(commit.run)
            continue
        run = commit.run
        numbered = run.next_events(commit.events(record))
        landing.outcomes.append(numbered)
        landing.events.setdefault(run.run_id, []).extend(numbered)
        if (ending := commit.ending) is not None:
            endings.append(RunEnding(run.run_id, ending.status, ending.error_code, ending.usage))
            if ending.payer is not None:
                bills.append((ending.payer, ending.charges))
            ended.append(
                RunEnded(
                    run.owner, run.conversation_id, run.run_id, ending.status, ending.error_code
                )
            )
    await charge_many(repo.session, bills, prices)
    await RunRepository(repo.session).finish_many(endings)
    await enqueue_run_endings(repo.session, ended)  # the webhooks' outbox, in this transaction
    return landing


def _append(commit: Commit) -> RunAppend:
    run = commit.run
    return RunAppend(run.conversation_id, run.run_id, commit.messages, commit.ending is not None)


def _notifications(run_ids: list[str]) -> list[str]:
    """NOTIFY payloads naming the runs with new events (each under PostgreSQL's 8000 bytes)."""
    payloads: list[str] = []
    batch: list[str] = []
    for run_id in run_ids:
        batch.append(run_id)
        if len(batch) == 200:
            payloads.append("e:" + ",".join(batch))
            batch = []
    if batch:
        payloads.append("e:" + ",".join(batch))
    return payloads
