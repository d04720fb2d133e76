"""Running a conversation for one request: lease, persistence as messages arrive, abort.

May import the domain, storage and the runs layer; no web framework. ``RunService.prepare``
does everything that can fail before the first byte (so it becomes problem+json);
``RunService.events`` then yields ``(event name, payload)`` pairs, ``done`` last.

A producer task drives the conversation's stream and persists each completed message before
its ``message`` event is queued; the consumer (the SSE generator) only relays. Cancelling the
producer — ``POST /cancel`` or a client disconnect — keeps what was streamed as an incomplete
message, releases the lease, and (for cancel) still sends ``done`` with status ``aborted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import anyio

from app.domain import (
    AgentMessage,
    ConversationConfigurationError,
    LLMConversation,
    MessageAppended,
    ProviderError,
    ToolRoundLimitError,
)
from app.runs.conversations import Delta, apply_delta
from app.runs.errors import InvalidInput, NothingToAnswer, PendingToolCalls
from app.runs.events import chunk_payload, error_payload
from app.runs.services import Services
from app.storage import LeaseLost, StorageError

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]
_DONE = "done"


@dataclass
class Run:
    """A run that holds its conversation's lease."""

    run_id: str
    conversation_id: str
    conversation: LLMConversation
    persisted: int
    version: int
    started: bool = False
    released: bool = False
    detached: bool = False


class RunService:
    """Prepares and executes runs for one owner."""

    def __init__(self, services: Services, owner: str) -> None:
        self.services = services
        self.owner = owner

    async def prepare(
        self, conversation_id: str, delta: Delta | None = None, expected_version: int | None = None
    ) -> Run:
        """Apply the delta (if any), check the conversation can run, take its lease: at once."""
        run_id = uuid.uuid4().hex
        async with self.services.reader(self.owner) as reader:
            record = await reader.get(conversation_id)  # the owner never changes
        async with self.services.repository(self.owner) as repo:
            if delta is not None:
                record = await repo.get(conversation_id)  # fresh, under the write lock
                await apply_delta(repo, self.services, record, delta, expected_version)
            # The lease's record is fresh; a refusal below rolls the lease (and delta) back.
            record = await repo.acquire_lease(
                conversation_id, run_id, self.services.settings.run_lease_seconds
            )
            if record.pending_tool_call_ids:
                raise PendingToolCalls(record.pending_tool_call_ids)
            config = self.services.configs.build(record.config)
            try:
                config.select()
            except ConversationConfigurationError as exc:
                available = self.services.configs.selector.available
                raise InvalidInput(("config", "provider"), str(exc), available=available) from exc
        # Read outside the write transaction: the lease keeps every other writer out.
        async with self.services.reader(self.owner) as reader:
            messages = await reader.load_messages(conversation_id)
        run = Run(
            run_id,
            conversation_id,
            LLMConversation(messages, config),
            len(messages),
            record.version,
        )
        if all(isinstance(m, AgentMessage) for m in messages):
            await self.abandon(run)
            raise NothingToAnswer(conversation_id)
        return run

    async def events(self, run: Run) -> AsyncGenerator[list[Event], None]:
        """The run's events in batches, ``run_started`` first and ``done`` last.

        A batch is whatever the producer has queued by the time the client is ready for more,
        so a fast model costs one write per batch rather than one per token.
        """
        run.started = True
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=256)
        producer = asyncio.create_task(self._produce(run, queue))
        self.services.runs.add(run.run_id, producer)
        try:
            yield [
                (
                    "run_started",
                    {
                        "run_id": run.run_id,
                        "conversation_id": run.conversation_id,
                        "message_count": run.persisted,
                        "version": run.version,
                    },
                )
            ]
            while True:
                batch = [await queue.get()]
                while batch[-1][0] != _DONE and not queue.empty():
                    batch.append(queue.get_nowait())
                yield batch
                if batch[-1][0] == _DONE:
                    return
        finally:
            run.detached = True
            producer.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([producer])
            self.services.runs.discard(run.run_id)

    async def _produce(self, run: Run, out: asyncio.Queue[Event]) -> None:
        keeper = asyncio.create_task(self._keep_lease(run, asyncio.current_task()))
        status = "completed"
        try:
            status = await self._drive(run, out)
        except asyncio.CancelledError:
            status = "aborted"
        except (ProviderError, ToolRoundLimitError, ConversationConfigurationError) as exc:
            status = "failed"
            await out.put(("error", error_payload(exc)))
        except LeaseLost as exc:
            status = "aborted"
            await out.put(("error", error_payload(exc)))
        except Exception as exc:
            log.exception("run %s failed", run.run_id)
            status = "failed"
            await out.put(("error", error_payload(exc)))
        finally:
            keeper.cancel()
            with anyio.CancelScope(shield=True):
                done = await self._finish(run, status)
        if not run.detached:
            await out.put((_DONE, done))

    async def abandon(self, run: Run) -> None:
        """Release the lease of a run whose events were never read (HEAD, or an early close)."""
        if run.started:
            return
        with anyio.CancelScope(shield=True):
            await self._finish(run, "aborted")

    async def _drive(self, run: Run, out: asyncio.Queue[Event]) -> str:
        async with contextlib.aclosing(run.conversation.stream()) as stream:
            async for event in stream:
                if isinstance(event, MessageAppended):
                    await self._persist(run, last=event.last)
                    payload = {
                        "index": event.index,
                        "version": run.version,
                        "message": event.message.to_serializable_dict(),
                    }
                    await out.put(("message", payload))
                else:
                    await out.put((event.kind, chunk_payload(event)))
        pending = run.conversation.messages.pending_tool_calls()
        if not pending:
            return "completed"
        calls = [
            {"tool_call_id": m.tool_call_id, "tool_name": m.tool_name, "arguments": m.arguments}
            for _, m in pending
        ]
        await out.put(("requires_action", {"tool_calls": calls}))
        return "requires_action"

    async def _persist(self, run: Run, *, holding_lease: bool = True, last: bool = False) -> None:
        """Store the messages the run appended since the last call; ``last`` also lets go of
        the lease in the same write, as the run appends nothing more."""
        new = run.conversation.messages[run.persisted :]
        if not new and not (last and holding_lease):
            return
        record = None
        async with self.services.repository(self.owner) as repo:
            if not new:
                await repo.release_lease(run.conversation_id, run.run_id)
            else:
                record = await repo.append_messages(
                    run.conversation_id,
                    new,
                    run_id=run.run_id if holding_lease else None,
                    release_lease=last and holding_lease,
                )
        # Counted only once committed: a failed or cancelled commit is retried by _finish.
        if record is not None:
            run.persisted += len(new)
            run.version = record.version
        run.released = last and holding_lease

    async def _finish(self, run: Run, status: str) -> dict[str, Any]:
        """Persist what is left (an incomplete message), release the lease, report."""
        try:
            try:
                await self._persist(run)
            except LeaseLost:  # cancelled from another process: the lease was revoked
                await self._persist(run, holding_lease=False)
        except StorageError:
            log.exception("run %s: could not store its last messages", run.run_id)
        if not run.released:
            try:
                async with self.services.repository(self.owner) as repo:
                    await repo.release_lease(run.conversation_id, run.run_id)
            except Exception:  # the lease then expires by itself
                log.exception("run %s: could not release its lease", run.run_id)
        return {"status": status, "message_count": run.persisted, "version": run.version}

    async def _keep_lease(self, run: Run, producer: asyncio.Task[Any] | None) -> None:
        """Renew the lease at a third of its term; stop the run if it was lost."""
        ttl = self.services.settings.run_lease_seconds
        while True:
            await asyncio.sleep(ttl / 3)
            async with self.services.repository(self.owner) as repo:
                held = await repo.renew_lease(run.conversation_id, run.run_id, ttl)
            if not held and producer is not None:
                producer.cancel()
                return
