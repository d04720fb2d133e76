"""Ending a run whose process died: what its log holds becomes an incomplete reply.

May import the domain, storage and the runs layer's events. The repository calls
``end_abandoned_run`` when a writer meets an expired lease (the holder stopped renewing it); it
runs in that writer's transaction, so no other run can start in between.
"""

from __future__ import annotations

import logging

from app.domain import Role, TextMessage
from app.runs.events import (
    DONE,
    ERROR,
    MESSAGE,
    PROCESS_LOST_ERROR,
    ErrorCode,
    done_payload,
    make_event,
    merged_rows,
    message_payload,
    unfinished_reply,
)
from app.storage import ConversationRepository, RunNotFound, RunRepository

log = logging.getLogger(__name__)


async def end_abandoned_run(
    repo: ConversationRepository, conversation_id: str, run_id: str
) -> None:
    """Store the text the dead run streamed as an incomplete reply; mark it ``interrupted``."""
    runs = RunRepository(repo.session)
    try:
        run = await runs.get(run_id)
    except RunNotFound:
        return
    if run.finished:
        return
    rows = await runs.events_after(run_id, 0)
    text = unfinished_reply(rows)
    seq = rows[-1].last_seq if rows else 0
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
