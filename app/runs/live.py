"""The runs this process executes, in memory: their recent events, their readers, stopping them.

May import the runs layer's events and the domain's chunk type. A ``LiveRun`` numbers the events
it sends next (``next_events``, ``next_chunk``) and hands them to any number of readers on this
process; readers on other processes follow the stored log instead (app/runs/follow.py). Memory
stays bounded: once the log holds an event, only the last ``KEEP_EVENTS`` are kept here, and a
reader further behind is told so (``Behind``) and reads the log first. What a reader is sent is
what the run may still own: events not yet stored only while the ``SendGate`` is open (the
writer's database keeps up) and the run's lease is known to hold; when the lease's term passes
unrenewed, readers get the stored events, then a ``lease_lost`` notice, and the run stops.
The ``RunManager`` finds a local run by id (to cancel it, to follow it), knows when the process is
shutting down, and wakes readers of other processes' runs when the database says they have new
events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.domain import StreamChunk
from app.runs.events import (
    LEASE_LOST_ERROR,
    EventName,
    OnDisconnect,
    RunEvent,
    chunk_event,
    notice,
    numbered,
)
from app.runs.payloads import EventData

log = logging.getLogger(__name__)

StopReason = Literal["cancel", "disconnect", "shutdown", "lease_lost", "storage_failed"]

KEEP_EVENTS = 256
"""Stored events a run keeps in memory for readers just behind it."""
LEASE_GRACE = 1.0
"""Seconds a run waits, its lease's term over, for a renewal before it stops."""
_TRIM_EVERY = 1024
"""Stored events dropped at a time (dropping from a list's front costs its length)."""


class Behind(Exception):
    """A reader asked for events no longer kept in memory: they are in the stored log."""


class SendGate:
    """Whether events not yet stored may be sent: open while the writer's database keeps up
    (the event writer closes it when a flush fails or takes too long)."""

    def __init__(self) -> None:
        self.open = True
        self.closings = 0
        self._said_at = -math.inf

    def close(self, why: str) -> None:
        """Readers get stored events only, until ``reopen``; said once a minute at most (under
        load a slow flush comes and goes)."""
        if not self.open:
            return
        self.open = False
        self.closings += 1
        now = time.monotonic()
        if now - self._said_at >= 60:
            self._said_at = now
            log.warning(
                "event writer: %s (%d times so far): readers were sent stored events only until "
                "the next flush landed",
                why,
                self.closings,
            )

    def reopen(self, runs: Sequence[LiveRun]) -> None:
        """A flush landed: unstored events may be sent again; the runs' readers look again."""
        if not self.open:
            self.open = True
            for run in runs:
                run.wake()


@dataclass(eq=False)
class LiveRun:
    """A run executing on this process, and every event it has sent so far."""

    run_id: str
    conversation_id: str
    owner: str
    on_disconnect: OnDisconnect
    persisted: int
    """How many of the conversation's messages are stored."""
    version: int
    """The conversation's version after the run's last stored change."""
    events: list[RunEvent] = field(default_factory=list)
    """The events from position ``base + 1`` on."""
    stored: int = 0
    """The position of the last event the log holds."""
    gate: SendGate | None = None
    """None: events are not logged — every event is sent, and kept until the run ends."""
    base: int = 0
    lease_unconfirmed: bool = False
    """The lease's term passed without a renewal: until one comes, the run may no longer own
    what it has not stored, and readers are sent stored events only."""
    lease_gone: bool = False
    """The lease is lost, or went unconfirmed past its grace: readers are told, the run stops."""
    _lease_timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None
    first_output: Callable[..., None] | None = None
    """Its start's answer (app/runs/priority.py): called once its model request is under way
    (at the latest at its first output, when it is cleared)."""
    running: bool = False
    """Its task has begun: a stop cancels it (before that, the task sees ``stop_reason``)."""
    stop_reason: StopReason | None = None
    finishing: bool = False
    """The run's model stream is over; it is storing its ending and can no longer be stopped."""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def seq(self) -> int:
        """The position of the last event (events are numbered 1, 2, … in order)."""
        return self.base + len(self.events)

    @property
    def done(self) -> bool:
        return bool(self.events) and self.events[-1].name == EventName.DONE

    def next_events(self, bodies: Sequence[EventData]) -> list[RunEvent]:
        """The events of ``bodies``, numbered after the last event this run published."""
        return numbered(self.seq, bodies)

    def next_chunk(self, chunk: StreamChunk) -> RunEvent:
        """The event of a model stream chunk, numbered after the last one published."""
        return chunk_event(self.seq, chunk)

    def publish(self, events: list[RunEvent]) -> None:
        """Hand events to the readers (they must continue the numbering)."""
        self.events.extend(events)
        self._trim()
        self._wake()

    def mark_stored(self, seq: int) -> None:
        """The log holds the events up to ``seq`` (the writer committed them)."""
        if seq > self.stored:
            self.stored = seq
            self._trim()
            self._wake()

    def hold_lease_until(self, deadline: float) -> None:
        """The lease is known to hold until ``deadline`` (the event loop's clock). Past it with
        no renewal, readers get stored events only; ``LEASE_GRACE`` later, still none, they are
        told (``lease_lost``) and the run stops — another process may have ended it by then."""
        self._cancel_lease_timer()
        if self.lease_unconfirmed and not self.lease_gone:
            self.lease_unconfirmed = False
            self._wake()
        self._lease_timer = asyncio.get_running_loop().call_at(deadline, self._lease_ran_out)

    def lease_lost(self) -> None:
        """Another process holds the conversation now: stop, and tell the readers."""
        self._cancel_lease_timer()
        self.lease_unconfirmed = self.lease_gone = True
        self.stop("lease_lost")
        self._wake()

    def release(self) -> None:
        """The run is over on this process: no lease to watch."""
        self._cancel_lease_timer()

    def wake(self) -> None:
        """Readers look again (the gate opened)."""
        self._wake()

    async def follow(self, after: int) -> AsyncIterator[list[RunEvent]]:
        """The events after position ``after``, in batches as they may be sent, until ``done``;
        none when the run ends before reaching ``after`` (an id past its end). ``Behind`` when
        the events after ``after`` are no longer kept here; a ``lease_lost`` notice (no id) ends
        the batches when the lease ran out before ``done``."""
        position = max(0, after)
        while True:
            changed = self._changed
            if position < self.base:
                raise Behind(position)
            end = self._sendable()
            if position < end:
                batch = self.events[position - self.base : end - self.base]
                position = end
                yield batch
                if batch[-1].name == EventName.DONE:
                    return
            elif self.lease_gone and not self.done:
                yield [notice(LEASE_LOST_ERROR)]
                return
            elif self.done and position >= self.seq:
                return
            else:
                await changed.wait()

    def _sendable(self) -> int:
        """The position up to which events may be sent now."""
        if self.lease_unconfirmed or (self.gate is not None and not self.gate.open):
            return min(self.stored, self.seq)
        return self.seq

    def _trim(self) -> None:
        if self.gate is None:  # nothing is logged: the events exist only here
            return
        excess = min(self.stored, self.seq) - KEEP_EVENTS - self.base
        if excess >= _TRIM_EVERY:
            del self.events[:excess]
            self.base += excess

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def stop(self, reason: StopReason) -> bool:
        """Stop the model stream (once); False when it is already stopping or finishing."""
        if self.finishing or self.stop_reason is not None or self.task is None:
            return False
        self.stop_reason = reason
        if self.running:  # a task cancelled before its first step would never run its ending
            self.task.cancel()
        return True

    def _lease_ran_out(self) -> None:
        self._lease_timer = None
        if self.lease_unconfirmed:  # the grace is over too
            log.warning("run %s: its lease went unrenewed past its term; stopping it", self.run_id)
            self.lease_lost()
            return
        self.lease_unconfirmed = True
        self._lease_timer = asyncio.get_running_loop().call_later(LEASE_GRACE, self._lease_ran_out)

    def _cancel_lease_timer(self) -> None:
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = None


class RunManager:
    """This process's live runs, its shutdown state, and the wake-ups of remote followers."""

    def __init__(self) -> None:
        self._runs: dict[str, LiveRun] = {}
        self._remote: dict[str, asyncio.Event] = {}
        self._remote_waiters: dict[str, int] = {}
        self._draining = False
        self.exit_requested: Callable[[], bool] = lambda: False
        """Whether the process has been told to stop (the app sets it: the signal's flags),
        which holds from the signal on — before the drain, which notices it, has begun."""

    @property
    def shutting_down(self) -> bool:
        """No new runs: the drain has begun, or the process was told to stop."""
        return self._draining or self.exit_requested()

    @shutting_down.setter
    def shutting_down(self, value: bool) -> None:
        self._draining = value

    def add(self, run: LiveRun) -> None:
        self._runs[run.run_id] = run

    def discard(self, run: LiveRun) -> None:
        run.release()
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]

    def get(self, run_id: str) -> LiveRun | None:
        return self._runs.get(run_id)

    def running(self) -> list[LiveRun]:
        """The runs still streaming from the model (not finishing)."""
        return [r for r in self._runs.values() if not r.finishing]

    def all(self) -> list[LiveRun]:
        return list(self._runs.values())

    def stop(self, run_id: str, reason: StopReason) -> bool:
        """Stop a run of this process; False if it is not here (or already stopping)."""
        run = self._runs.get(run_id)
        return run.stop(reason) if run is not None else False

    def detached(self, run: LiveRun) -> None:
        """The client that started ``run`` went away: cancel it unless it asked to continue."""
        if run.on_disconnect == "cancel":
            run.stop("disconnect")

    # --- readers of runs on other processes ----------------------------------------------------

    async def wait_remote(self, run_id: str, seconds: float) -> None:
        """Wait until ``run_id`` has new stored events (as far as we hear), at most ``seconds``."""
        event = self._remote.setdefault(run_id, asyncio.Event())
        self._remote_waiters[run_id] = self._remote_waiters.get(run_id, 0) + 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await event.wait()
        finally:
            # The last waiter forgets the run: without NOTIFY (SQLite) nothing else would, and
            # every remote run ever followed would stay here for the life of the process.
            left = self._remote_waiters.pop(run_id) - 1
            if left:
                self._remote_waiters[run_id] = left
            else:
                self._remote.pop(run_id, None)

    def wake_remote(self, run_ids: list[str]) -> None:
        """Stored events arrived for these runs (a NOTIFY from another process)."""
        for run_id in run_ids:
            event = self._remote.pop(run_id, None)
            if event is not None:
                event.set()

    def on_notification(self, payload: str) -> None:
        """A NOTIFY payload: ``c:<run id>`` cancels a local run, ``e:<ids>`` wakes followers."""
        kind, _, rest = payload.partition(":")
        if kind == "c":
            self.stop(rest, "cancel")
        elif kind == "e":
            self.wake_remote(rest.split(","))
