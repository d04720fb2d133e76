"""Reading a run's events from any position, on any process: resume with ``Last-Event-ID``.

May import storage and the runs layer. A run of this process is followed in memory
(``LiveRun.follow``); any other run through its stored log, woken by PostgreSQL NOTIFY or
polling (``follow_poll_seconds``). A reader of a run whose process died ends that run (the
next writer would anyway), so every reader ends with ``done``. A resume never starts a run;
nor does joining the running run (``running``) from its first event.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass

from app.runs.errors import BadEventId, EventsExpired
from app.runs.events import SHUTTING_DOWN_ERROR, EventName, RunEvent, notice, parse_event_id
from app.runs.live import Behind, LiveRun
from app.runs.log_codec import stored_events
from app.runs.recovery import recover
from app.runs.services import Services
from app.storage import RunRecord, RunRepository, utcnow

_LIVENESS_EVERY = 1.0
"""Seconds between checks that a followed run's process is still alive."""
_CATCH_UP_ROWS = 500
"""Stored rows read at a time by a reader behind what a run of this process keeps in memory."""


async def follow_live(
    services: Services, live: LiveRun, after: int
) -> AsyncIterator[builtins.list[RunEvent]]:
    """The events of a run of this process after position ``after``, in batches, until
    ``done``: from memory, and from the stored log for what memory no longer keeps."""
    position = after
    while True:
        try:
            async for batch in live.follow(position):
                if batch[-1].seq:  # a notice (no position) ends the batches
                    position = batch[-1].seq
                yield batch
            return
        except Behind:
            async with services.reader(None) as reader:
                rows = await RunRepository(reader.session).events_after(
                    live.run_id, position, _CATCH_UP_ROWS
                )
            batch = [e for row in rows for e in stored_events(row) if e.seq > position]
            if not batch:  # pruned or never stored: nothing more to give this reader
                return
            position = batch[-1].seq
            yield batch


@dataclass(frozen=True)
class Resume:
    """Where a reader resumes: after event ``after`` of run ``run``."""

    run: RunRecord
    after: int
    live: LiveRun | None


class RunReader:
    """Opens and follows runs for one owner."""

    def __init__(self, services: Services, owner: str) -> None:
        self.services = services
        self.owner = owner

    async def resume(self, conversation_id: str, last_event_id: str) -> Resume | None:
        """Check a ``Last-Event-ID`` before the first byte; None when nothing is left to send.

        BadEventId if it is not ours, RunNotFound (ConversationNotFound) if the run is not of
        this conversation (owner), EventsExpired if a finished run's events were pruned.
        """
        try:
            run_id, seq = parse_event_id(last_event_id)
        except ValueError:
            raise BadEventId(last_event_id) from None
        async with self.services.reader(self.owner) as reader:
            await reader.get(conversation_id)
            runs = RunRepository(reader.session)
            run = await runs.get(run_id, conversation_id, self.owner)
            live = self.services.manager.get(run.id)
            if live is not None and live.done and seq >= live.seq:
                return None  # its `done` was sent, and the reader had it: its task is ending
            if live is None and run.finished and not await runs.events_after(run.id, seq):
                if not await runs.has_events(run.id):
                    raise EventsExpired(run.id)
                return None
        return Resume(run, seq, live)

    async def running(self, conversation_id: str) -> Resume | None:
        """The conversation's running run, to follow from its first event (a reader that
        connects before, or without, any ``Last-Event-ID``); None when nothing runs."""
        async with self.services.reader(self.owner) as reader:
            await reader.get(conversation_id)
            run = await RunRepository(reader.session).running(conversation_id)
        if run is None:
            return None
        return Resume(run, 0, self.services.manager.get(run.id))

    async def list(
        self, conversation_id: str, limit: int, cursor: str | None
    ) -> tuple[builtins.list[RunRecord], str | None]:
        """A page of the conversation's runs, newest first."""
        async with self.services.reader(self.owner) as reader:
            await reader.get(conversation_id)
            return await RunRepository(reader.session).list(conversation_id, limit, cursor)

    async def get(self, conversation_id: str, run_id: str) -> RunRecord:
        """One run of the conversation."""
        async with self.services.reader(self.owner) as reader:
            await reader.get(conversation_id)
            return await RunRepository(reader.session).get(run_id, conversation_id, self.owner)

    async def follow(self, resume: Resume) -> AsyncIterator[builtins.list[RunEvent]]:
        """The run's events after the resume point, in batches, until ``done``."""
        live = resume.live or self.services.manager.get(resume.run.id)
        if live is not None:
            async for batch in follow_live(self.services, live, resume.after):
                yield batch
            return
        async for batch in self._follow_stored(resume.run, resume.after):
            yield batch

    async def _follow_stored(
        self, run: RunRecord, after: int
    ) -> AsyncIterator[builtins.list[RunEvent]]:
        """Another process's run, from its log. Ends after ``done``; also when the run ended
        without anything after ``after`` (an id past its end), and when this process shuts
        down: then with an ``error`` (``shutting_down``) that has no id, so the client resumes
        elsewhere from the last event it really got."""
        services = self.services
        seq = after
        loop = asyncio.get_running_loop()
        next_check = loop.time() + _LIVENESS_EVERY
        while True:
            async with services.reader(None) as reader:
                rows = await RunRepository(reader.session).events_after(run.id, seq)
            batch = [e for row in rows for e in stored_events(row) if e.seq > seq]
            if batch:
                seq = batch[-1].seq
                yield batch
                if batch[-1].name == EventName.DONE:
                    return
                continue
            if services.manager.shutting_down:
                yield [notice(SHUTTING_DOWN_ERROR)]
                return
            if loop.time() >= next_check:
                next_check = loop.time() + _LIVENESS_EVERY
                if await self._ended(run, seq):
                    return
            await services.manager.wait_remote(run.id, services.settings.follow_poll_seconds)

    async def _ended(self, run: RunRecord, seq: int) -> bool:
        """Whether the run is over with nothing stored after ``seq``; a run whose process died
        (its lease expired) is ended here first, so its log ends in ``done``."""
        async with self.services.reader(None) as reader:
            record = await reader.get(run.conversation_id)
            runs = RunRepository(reader.session)
            finished = (await runs.get(run.id)).finished
            if finished and not await runs.events_after(run.id, seq):
                return True
        expires = record.lease_expires_at
        if record.lease_run_id == run.id and expires is not None and expires <= utcnow():
            async with self.services.repository(None) as repo:
                lease = self.services.settings.run_lease_seconds
                await recover(
                    repo, self.services.manager, lease, run.conversation_id, self.services.prices
                )
        return False
