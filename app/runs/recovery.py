"""Recovering a run whose process died: what its log holds becomes an incomplete reply.

May import the domain, storage and the runs layer's events and live runs. Recovery is an
explicit step of the use cases, never a side effect of a repository's write: a write that meets
the expired lease of another run raises ``LeaseExpired`` and changes nothing; the use case
(through ``recovering``) then recovers that run in a transaction of its own and tries once more.
The sweep of the event writer, a follower that sees a dead run, and a cancel call ``recover``
directly. A lease also expires when its own process stops for longer than the lease (a long
pause, a frozen container): that process finds the run alive in its ``RunManager`` and renews
the lease instead of ending it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from app.domain import Role, TextMessage
from app.runs.codes import ErrorCode
from app.runs.events import (
    PROCESS_LOST_ERROR,
    done,
    message_data,
    numbered,
    recovered_after,
)
from app.runs.live import RunManager
from app.runs.log_codec import merged_rows, unfinished_reply
from app.runs.payloads import EventData
from app.spend import PriceTable, load_prices
from app.spend.ledger import charge_abandoned
from app.storage import ConversationRepository, LeaseExpired, RunNotFound, RunRepository
from app.webhooks import RunEnded, enqueue_run_endings

if TYPE_CHECKING:
    from app.runs.services import Services

log = logging.getLogger(__name__)
T = TypeVar("T")


async def recovering(
    services: Services, owner: str | None, attempt: Callable[[], Awaitable[T]]
) -> T:
    """``await attempt()`` — a use case's write transaction. When it met the expired lease of
    a run (``LeaseExpired``, everything rolled back), recover that run in a transaction of its
    own, committed, then attempt once more: a write meets no dead run's lease twice, and one
    that meets none costs nothing more."""
    try:
        return await attempt()
    except LeaseExpired as expired:
        async with services.repository(owner) as repo:
            lease = services.settings.run_lease_seconds
            await recover(repo, services.manager, lease, expired.conversation_id, services.prices)
    return await attempt()


async def recover(
    repo: ConversationRepository,
    manager: RunManager,
    lease_seconds: float,
    conversation_id: str,
    prices: PriceTable | None = None,
) -> bool:
    """In ``repo``'s transaction, which the caller commits: lock the conversation and, when the
    lease of a run on it expired, recover that run. A run of this process (``manager``) is alive
    (the process stalled): its lease is renewed for ``lease_seconds``. Any other run's process
    died: the run is ended (``end_abandoned_run``) and its lease released. True if a run was
    ended."""
    run_id = await repo.expired_lease(conversation_id)
    if run_id is None:
        return False
    if manager.get(run_id) is not None:
        log.warning("run %s outlived its lease (this process stalled); renewing it", run_id)
        await repo.renew_lease(conversation_id, run_id, lease_seconds)
        return False
    await end_abandoned_run(repo, conversation_id, run_id, prices)
    await repo.release_lease(conversation_id, run_id)
    return True


async def end_abandoned_run(
    repo: ConversationRepository,
    conversation_id: str,
    run_id: str,
    prices: PriceTable | None = None,
) -> None:
    """Store the text the dead run streamed as an incomplete reply; mark it ``interrupted``;
    charge the model calls its log kept (their ``message_stop`` events) to the usage ledger.

    Its ``message``, ``error`` and ``done`` are numbered ``RECOVERY_GAP`` past the stored log:
    the dead process may have sent events it never stored, under the ids that follow it."""
    runs = RunRepository(repo.session)
    try:
        run = await runs.get(run_id)
    except RunNotFound:
        return
    if run.finished:
        return
    rows = await runs.events_after(run_id, 0)
    text = unfinished_reply(rows)
    bodies: list[EventData] = []
    if text.strip():
        reply = TextMessage(text, Role.ASSISTANT, incomplete=True)
        record = await repo.append_messages(conversation_id, [reply], run_id=run_id)
        bodies.append(message_data(record.message_count - 1, record.version, reply))
    else:
        record = await repo.get(conversation_id)
    bodies.append(PROCESS_LOST_ERROR)
    bodies.append(done("interrupted", record.message_count, record.version))
    after = recovered_after(rows[-1].last_seq if rows else 0)
    await runs.add_events(merged_rows(run_id, numbered(after, bodies)))
    await runs.finish(run_id, "interrupted", error_code=ErrorCode.PROCESS_LOST)
    await charge_abandoned(repo.session, run_id, rows, prices or load_prices())
    ended = RunEnded(run.owner, conversation_id, run_id, "interrupted", ErrorCode.PROCESS_LOST)
    await enqueue_run_endings(repo.session, [ended])  # the webhooks' outbox, in this transaction
    await runs.notify(f"e:{run_id}")
    log.warning(
        "run %s of conversation %s was abandoned by its process; kept %d characters of its reply",
        run_id,
        conversation_id,
        len(text),
    )
