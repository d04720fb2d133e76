"""The runs this process executes, in memory: their events so far, their readers, stopping them.

May import the runs layer's events and the domain's chunk type. A ``LiveRun`` keeps every
event of its run until it ends, so any number of readers on this process follow it from any
position, and numbers the events it sends next (``next_events``, ``next_chunk``); readers on
other processes follow the stored log instead (app/runs/follow.py). The ``RunManager`` finds a
local run by id (to cancel it, to follow it), knows when the process is shutting down, and wakes
readers of other processes' runs when the database says they have new events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.domain import StreamChunk
from app.runs.events import EventName, OnDisconnect, RunEvent, chunk_event, numbered
from app.runs.payloads import EventData

log = logging.getLogger(__name__)

StopReason = Literal["cancel", "disconnect", "shutdown", "lease_lost", "storage_failed"]


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
    task: asyncio.Task[None] | None = None
    running: bool = False
    """Its task has begun: a stop cancels it (before that, the task sees ``stop_reason``)."""
    stop_reason: StopReason | None = None
    finishing: bool = False
    """The run's model stream is over; it is storing its ending and can no longer be stopped."""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def seq(self) -> int:
        """The position of the last event (events are numbered 1, 2, … in order)."""
        return len(self.events)

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
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after: int) -> AsyncIterator[list[RunEvent]]:
        """The events after position ``after``, in batches as they come, until ``done``; none
        when the run ends before reaching ``after`` (an id past its end)."""
        position = max(0, after)
        while True:
            changed = self._changed
            if position < len(self.events):
                batch = self.events[position:]
                position += len(batch)
                yield batch
                if batch[-1].name == EventName.DONE:
                    return
            elif self.done:
                return
            else:
                await changed.wait()

    def stop(self, reason: StopReason) -> bool:
        """Stop the model stream (once); False when it is already stopping or finishing."""
        if self.finishing or self.stop_reason is not None or self.task is None:
            return False
        self.stop_reason = reason
        if self.running:  # a task cancelled before its first step would never run its ending
            self.task.cancel()
        return True


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
