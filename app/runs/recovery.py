"""Ending a run whose process died: what its log holds becomes an incomplete reply.

May import the domain, storage and the runs layer's events and live runs. The repository calls
the handler of ``abandoned_run_handler`` when a writer meets an expired lease (the holder stopped
renewing it); it runs in that writer's transaction, so no other run can start in between. A lease
also expires when its own process stops for longer than the lease (a long pause, a frozen
container): that process's writers find the run alive in its ``RunManager`` and renew the lease
instead of ending it.
"""

from __future__ import annotations

import logging

from app.domain import Role, TextMessage
from app.runs.events import (
    DONE,
    ERROR,
    MESSAGE,
    PROCESS_LOST_ERROR,
    RECOVERY_GAP,
    ErrorCode,
    done_payload,
    make_event,
    merged_rows,
    message_payload,
    unfinished_reply,
)
from app.runs.live import RunManager
from app.storage import AbandonedRunHandler, ConversationRepository, RunNotFound, RunRepository

log = logging.getLogger(__name__)


def abandoned_run_handler(manager: RunManager, lease_seconds: float) -> AbandonedRunHandler:
    """The repositories' handler of expired leases for the process whose live runs ``manager``
    holds: a run of its own is alive, so its lease is renewed (for ``lease_seconds``) and it goes
    on; any other run's process died, and the run is ended (``end_abandoned_run``)."""

    async def handle(repo: ConversationRepository, conversation_id: str, run_id: str) -> bool:
        if manager.get(run_id) is not None:
            log.warning("run %s outlived its lease (this process stalled); renewing it", run_id)
            await repo.renew_lease(conversation_id, run_id, lease_seconds)
            return False
        await end_abandoned_run(repo, conversation_id, run_id)
        return True

    return handle


async def end_abandoned_run(
    repo: ConversationRepository, conversation_id: str, run_id: str
) -> None:
    """Store the text the dead run streamed as an incomplete reply; mark it ``interrupted``.

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
    seq = (rows[-1].last_seq if rows else 0) + RECOVERY_GAP
    events = []
    if text.strip():
        reply = TextMessage(text, Role.ASSISTANT, incomplete=True)
        record = await repo.append_messages(conversation_id, [reply], run_id=run_id)
        seq += 1
        payload = message_payload(record.message_count - 1, record.version, reply)
        events.append(make_event(seq, MESSAGE, payload))
    else:
        record = await repo.get(conversation_id)
    events.append(make_event(seq + 1, ERROR, PROCESS_LOST_ERROR))
    events.append(
        make_event(seq + 2, DONE, done_payload("interrupted", record.message_count, record.version))
    )
    await runs.add_events(merged_rows(run_id, events))
    await runs.finish(run_id, "interrupted", error_code=ErrorCode.PROCESS_LOST)
    await runs.notify(f"e:{run_id}")
    log.warning(
        "run %s of conversation %s was abandoned by its process; kept %d characters of its reply",
        run_id,
        conversation_id,
        len(text),
    )
