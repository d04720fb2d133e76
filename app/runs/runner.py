"""Running a conversation: the lease, the run's row and log, persistence as messages arrive, abort.

May import the domain, storage and the runs layer; no web framework. ``RunService.start`` does
everything that can fail before the first byte (so it becomes problem+json) in one write
transaction — the delta, the lease, the run's row and its ``run_started`` event — then starts
the run's task, which outlives the request: readers follow it (app/runs/follow.py).

The task drives the conversation's stream. Chunks become events at once (readers see them, the
writer stores them within a flush interval); a finished message is stored together with its
``message`` event before any reader sees that event; the ending — what is left of the reply
(incomplete when cut short), ``requires_action``/``error``, ``done``, the run's status, the
lease released — is one more commit. Stopping the task (cancel, disconnect, shutdown, a lost
lease) never interrupts those commits, so every stored reply is announced exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain import (
    AgentMessage,
    ConversationConfig,
    ConversationConfigurationError,
    LLMConversation,
    MessageAppended,
    MessageList,
    MessageStop,
    ReasoningDone,
)
from app.runs.delta import Delta, config_update, rewound
from app.runs.errors import InvalidInput, NothingToAnswer, PendingToolCalls, ShuttingDown
from app.runs.events import (
    LEASE_LOST_ERROR,
    SHUTTING_DOWN_ERROR,
    FinalStatus,
    OnDisconnect,
    RunEvent,
    done,
    error_for,
    first_event,
    message_data,
    requires_action,
    run_started,
)
from app.runs.files import OwnerFiles
from app.runs.live import LiveRun
from app.runs.log_codec import merged_rows
from app.runs.observe import RunObserver
from app.runs.outcome import (
    STOPPED_STATUS,
    Progress,
    complete_last_reply,
    ending_of,
    expected,
    lost,
    natural_status,
)
from app.runs.payloads import ErrorEventData, EventData
from app.runs.recovery import recovering
from app.runs.services import Services
from app.runs.titles import TitleRequest, first_user_text
from app.runs.writer import Commit
from app.spend import KeyRecord, Payer
from app.spend.limits import admit_run, check_run_budget
from app.storage import (
    ConversationNotFound,
    ConversationRecord,
    ConversationRepository,
    LeaseLost,
    RunRepository,
    driver_said,
    new_run_id,
    utcnow,
)

log = logging.getLogger(__name__)


_Begun = tuple[ConversationRecord, MessageList, ConversationConfig, tuple[str, str], RunEvent]
"""What a start's transaction gives the live run: the record, its messages, the config, the
provider and model chosen, and the ``run_started`` event."""


@dataclass(frozen=True)
class _StartRequest:
    conversation_id: str
    run_id: str
    delta: Delta
    expected_version: int | None
    on_disconnect: OnDisconnect
    answered: Callable[..., None]
    """Tells the writer the start is set up (its model request under way, or never to be):
    app/runs/priority.py."""


class RunService:
    """Starts runs for one owner."""

    def __init__(self, services: Services, owner: str, key: KeyRecord | None = None) -> None:
        self.services = services
        self.owner = owner
        self.key = key
        """The database key starting the runs: its limits are checked (app/spend)."""

    async def start(
        self,
        conversation_id: str,
        delta: Delta | None = None,
        expected_version: int | None = None,
        on_disconnect: OnDisconnect = "cancel",
    ) -> LiveRun:
        """Apply the delta (if any), take the lease, record the run, and start it: at once."""
        services = self.services
        if services.manager.shutting_down:
            raise ShuttingDown()
        run_id = new_run_id()
        delta = delta or Delta()
        asked_at = asyncio.get_running_loop().time()  # the lease runs from no earlier than this
        answered = services.writer.first_outputs.asked()
        request = _StartRequest(
            conversation_id, run_id, delta, expected_version, on_disconnect, answered
        )

        def begin(session: AsyncConnection) -> Awaitable[_Begun]:
            return self._begin(session, request)

        def launch(begun: _Begun) -> LiveRun:
            return self._launch(begun, request, asked_at)

        def orphan(begun: _Begun) -> None:  # the caller went away: started, then left
            services.manager.detached(launch(begun))

        try:  # a dead run's expired lease in the way: recovered, then this start once more
            begun = await recovering(
                services, self.owner, lambda: services.starts.run(conversation_id, begin, orphan)
            )
            return launch(begun)
        except BaseException:
            answered()
            raise

    def _launch(self, begun: _Begun, request: _StartRequest, asked_at: float) -> LiveRun:
        """The started run, live: its task begun, in the manager."""
        services = self.services
        run_id, on_disconnect = request.run_id, request.on_disconnect
        record, messages, config, (adapter_name, model), started = begun
        files = OwnerFiles(services.files, self.owner)  # its messages' attachments, its images
        conversation = LLMConversation(messages, dataclasses.replace(config, attachments=files))
        observer = RunObserver(adapter_name, record.id, run_id)
        logged = services.settings.run_event_log
        key_id = self.key.id if self.key is not None else None
        payer = Payer(run_id, record.id, self.owner, key_id)
        run = LiveRun(
            run_id,
            record.id,
            self.owner,
            on_disconnect,
            len(messages),
            record.version,
            [started],
            stored=started.seq,  # stored with the start
            gate=services.writer.gate if logged else None,
            first_output=request.answered,
        )
        run.hold_lease_until(asked_at + services.settings.run_lease_seconds)
        services.manager.add(run)
        progress = Progress(payer=payer, provider=adapter_name, model=model)
        run.task = asyncio.create_task(
            self._run(run, conversation, observer, progress), name=f"run-{run_id}"
        )
        run.task.add_done_callback(request.answered)  # ended before its model answered
        if services.manager.shutting_down:  # the drain began while this run was starting
            run.stop("shutdown")
        return run

    async def _begin(self, session: AsyncConnection, start: _StartRequest) -> _Begun:
        """The start's writes, in ``session``'s transaction (app/runs/starts.py: shared with
        other starts, committed once): the delta (its rewind first), the lease, the run and its
        first event, and the messages read under the lock. A refusal rolls them all back."""
        services = self.services
        conversation_id, delta = start.conversation_id, start.delta
        repo = ConversationRepository(session, owner=self.owner)
        expected_version = await rewound(repo, conversation_id, delta, start.expected_version)
        record, messages = await repo.begin_run(
            conversation_id,
            start.run_id,
            services.settings.run_lease_seconds,
            messages=delta.messages,
            tool_results=delta.outcomes(),
            update_config=config_update(services.configs, delta.config_patch),
            expected_version=expected_version,
        )
        if record.pending_tool_call_ids:
            raise PendingToolCalls(record.pending_tool_call_ids)
        if all(isinstance(m, AgentMessage) for m in messages):
            raise NothingToAnswer(conversation_id)
        config = services.configs.build(record.config, record.id)
        try:
            adapter, model = config.select()
        except ConversationConfigurationError as exc:
            available = services.configs.selector.available
            raise InvalidInput(("config", "provider"), str(exc), available=available) from exc
        started = await self._record_run(session, start, record, adapter.name, model)
        return record, messages, config, (adapter.name, model), started

    async def _record_run(
        self,
        session: AsyncConnection,
        start: _StartRequest,
        record: ConversationRecord,
        provider: str,
        model: str,
    ) -> RunEvent:
        """The run's row and its first event (the key's limits checked first, its row locked)."""
        run_id = start.run_id
        started = first_event(run_started(run_id, record.id, record.message_count, record.version))
        key = self.key
        if key is not None:  # its concurrent runs and budget, with its row locked
            await admit_run(session, key, utcnow())
        spend = {"key_id": key.id if key else None, "provider": provider, "model": model}
        runs = RunRepository(session)
        await runs.create(run_id, record.id, self.owner, start.on_disconnect, **spend)
        await runs.add_events(merged_rows(run_id, [started]))
        return started

    # --- the run's task -------------------------------------------------------------------------

    async def _run(
        self,
        run: LiveRun,
        conversation: LLMConversation,
        observer: RunObserver,
        progress: Progress,
    ) -> None:
        observer.started()
        run.running = True
        error: ErrorEventData | None = None
        try:
            if run.stop_reason is not None:  # stopped before it began
                raise asyncio.CancelledError
            status = await self._drive(run, conversation, progress, observer)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # stopped on purpose (run.stop): the task goes on to finish
            status, error = self._stopped(run, conversation, progress)
        except Exception as exc:
            error = LEASE_LOST_ERROR if lost(exc) else error_for(exc)
            if expected(exc):  # the provider layer logged upstream failures, without their text
                log.info("run %s failed: %s", run.run_id, error.code)
            elif not lost(exc):
                log.exception("run %s failed unexpectedly", run.run_id)
            status = "aborted" if lost(exc) else "failed"
        run.finishing = True
        observer.finished(status)  # before `done` is sent: a scrape after it counts the run
        try:
            await asyncio.shield(self._finish(run, conversation, progress, status, error))
        finally:
            self.services.manager.discard(run)

    def _stopped(
        self, run: LiveRun, conversation: LLMConversation, progress: Progress
    ) -> tuple[FinalStatus, ErrorEventData | None]:
        """The status of a run whose task was stopped (``run.stop_reason`` says why)."""
        if progress.reply_complete:  # stopped after the model's last word: it did complete
            return natural_status(conversation), None
        if progress.model_finished and complete_last_reply(conversation):
            return natural_status(conversation), None
        if run.stop_reason == "storage_failed":
            return "failed", error_for(RuntimeError("the run's events could not be stored"))
        if run.stop_reason == "shutdown":
            return "interrupted", SHUTTING_DOWN_ERROR
        if run.stop_reason == "lease_lost":
            return "aborted", error_for(LeaseLost(run.conversation_id, run.run_id))
        return STOPPED_STATUS.get(run.stop_reason or "", "aborted"), None

    async def _drive(
        self,
        run: LiveRun,
        conversation: LLMConversation,
        progress: Progress,
        observer: RunObserver,
    ) -> FinalStatus:
        writer = self.services.writer
        if run.first_output is not None:  # its start presses no more once its model call waits
            asyncio.get_running_loop().call_soon(run.first_output)  # (app/runs/priority.py)
        async with contextlib.aclosing(conversation.stream()) as stream:
            async for event in stream:
                if isinstance(event, MessageAppended):
                    if event.last:  # stored with the run's ending
                        progress.reply_complete = True
                    else:
                        await self._store(run, conversation, progress, event.index + 1)
                        if progress.round_over and event.index + 1 == len(conversation.messages):
                            progress.round_over = False  # the tools' results are stored
                            await self._within_budget(progress)
                    continue
                observer.chunk(event)
                if isinstance(event, ReasoningDone):
                    continue  # its message, stored next, is announced by a `message` event
                if isinstance(event, MessageStop):
                    progress.model_stopped(event, utcnow())
                out = run.next_chunk(event)
                run.publish([out])
                writer.add(run, out)
                answered = run.first_output
                if answered is not None:  # its first output: the starts before it go next
                    run.first_output = None
                    answered()
                    await writer.first_outputs.earlier_starts()
        return natural_status(conversation)

    async def _within_budget(self, progress: Progress) -> None:
        """Before the next model call: ``BudgetExceeded`` if the key's budget is spent (the
        run ends ``failed`` with what it stored; its calls are charged with its ending)."""
        key = self.key
        if key is None or not key.limits.budgeted:
            return
        prices = self.services.prices
        usd = sum(prices.cost(c.model, c.usage) or 0.0 for c in progress.charges)
        tokens = sum(c.usage.output_tokens or 0 for c in progress.charges)
        async with self.services.database.session(readonly=True) as session:
            await check_run_budget(session, key, tokens, usd, utcnow())

    async def _store(
        self, run: LiveRun, conversation: LLMConversation, progress: Progress, upto: int
    ) -> None:
        """Store the messages up to index ``upto`` with their ``message`` events, then send."""
        messages = conversation.messages[run.persisted : upto]
        first = run.persisted

        def events(record: ConversationRecord) -> list[EventData]:
            run.version = record.version
            return [message_data(first + i, record.version, m) for i, m in enumerate(messages)]

        commit = progress.inflight = Commit(run, messages, events)
        self._landed(run, await self.services.writer.commit(commit), len(messages))
        progress.inflight = None

    def _landed(self, run: LiveRun, events: list[RunEvent], stored: int) -> None:
        run.persisted += stored
        run.publish(events)

    async def _finish(
        self,
        run: LiveRun,
        conversation: LLMConversation,
        progress: Progress,
        status: FinalStatus,
        error: ErrorEventData | None,
    ) -> None:
        """Store what is left, the ending and ``done``; release the lease; send them."""
        inflight = progress.inflight
        if inflight is not None:  # stopped while a message was being stored: it may have landed
            with contextlib.suppress(Exception):
                self._landed(run, await inflight.future, len(inflight.messages))
        messages = conversation.messages[run.persisted :]
        first = run.persisted
        pending = [m for _, m in conversation.messages.pending_tool_calls()]

        def events(record: ConversationRecord) -> list[EventData]:
            run.version = record.version
            progress.untitled = record.title is None
            bodies: list[EventData] = [
                message_data(first + i, record.version, m) for i, m in enumerate(messages)
            ]
            if status == "requires_action":
                bodies.append(requires_action(pending))
            if error is not None:
                bodies.append(error)
            bodies.append(done(status, record.message_count, record.version))
            return bodies

        ending = ending_of(progress, status, error.code if error else None)
        try:
            stored = await self.services.writer.commit(Commit(run, messages, events, ending))
        except (LeaseLost, ConversationNotFound) as exc:
            self._unstoredending_of(run, exc)
            return
        except Exception as exc:
            log.error("run %s: could not store its ending: %s", run.run_id, driver_said(exc))
            await self._fail_bare(run, progress, exc)
            return
        self._landed(run, stored, len(messages))
        if status == "completed" and progress.untitled:
            self._title(run, conversation)

    def _title(self, run: LiveRun, conversation: LLMConversation) -> None:
        """Make the conversation a title, in the background (app/runs/titles.py)."""
        text = first_user_text(conversation.messages)
        if text is not None:
            config = conversation.config
            self.services.titler.after_reply(
                TitleRequest(
                    run.run_id,
                    run.conversation_id,
                    run.owner,
                    text,
                    config.preferred_provider,
                    config.preferred_model,
                    self.key,
                )
            )

    async def _fail_bare(self, run: LiveRun, progress: Progress, exc: Exception) -> None:
        """End a run whose ending was refused — its messages are what storage would not take
        (a reply it cannot hold), or the database failed — as ``failed``, storing nothing more
        of the reply: the lease is released and the log says what the streams are told."""
        error = error_for(exc)

        def events(record: ConversationRecord) -> list[EventData]:
            run.version = record.version
            return [error, done("failed", record.message_count, record.version)]

        ending = ending_of(progress, "failed", error.code)
        try:
            stored = await self.services.writer.commit(Commit(run, [], events, ending))
        except Exception as again:
            self._unstoredending_of(run, again)
            return
        self._landed(run, stored, 0)

    def _unstoredending_of(self, run: LiveRun, exc: Exception) -> None:
        """No ending could be stored (the lease was lost, the conversation perhaps deleted since,
        or the database failed): tell this
        process's readers; the lease, if still ours, expires and the run is recovered, its
        ending numbered past these (``RECOVERY_GAP``)."""
        if not lost(exc):
            log.error("run %s: no ending could be stored: %s", run.run_id, driver_said(exc))
        error = LEASE_LOST_ERROR if lost(exc) else error_for(exc)
        status: FinalStatus = "aborted" if lost(exc) else "failed"
        run.publish(run.next_events([error, done(status, run.persisted, run.version)]))
