"""The webhook events and their bodies; writing them to the outbox in the caller's transaction.

May import storage. A body is ``{type, timestamp, data}``; ``data`` carries ids and a status,
never message text. ``enqueue`` and ``enqueue_run_endings`` run in the transaction that makes
the event (a run's ending, a stored title): the rows exist if and only if it commits, and on
PostgreSQL its commit wakes every process's deliverer (NOTIFY ``w:``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage import RunRepository, utcnow
from app.storage.webhooks import OutboxEvent, WebhookRepository

WAKE = "w:"
"""The NOTIFY payload that tells deliverers new rows committed."""


class WebhookEventType(StrEnum):
    RUN_COMPLETED = "run.completed"
    RUN_REQUIRES_ACTION = "run.requires_action"
    RUN_FAILED = "run.failed"
    RUN_INTERRUPTED = "run.interrupted"
    RUN_ABORTED = "run.aborted"
    CONVERSATION_TITLED = "conversation.titled"


EVENT_TYPES = tuple(e.value for e in WebhookEventType)


@dataclass(frozen=True)
class RunEnded:
    """A run's ending, as its webhook tells it."""

    owner: str
    conversation_id: str
    run_id: str
    status: str
    error_code: str | None = None


def body(event: str, data: Mapping[str, Any], at: datetime | None = None) -> str:
    """The JSON body of an event (compact: the signature covers these exact bytes)."""
    stamp = (at or utcnow()).isoformat().replace("+00:00", "Z")
    return json.dumps(
        {"type": event, "timestamp": stamp, "data": dict(data)}, separators=(",", ":")
    )


def run_ending(ended: RunEnded) -> OutboxEvent:
    """The outbox event of a run's ending; its ``webhook-id`` is ``msg_<run id>`` (a run ends
    once), the same on every endpoint and every attempt."""
    event = f"run.{ended.status}"
    data: dict[str, Any] = {
        "conversation_id": ended.conversation_id,
        "run_id": ended.run_id,
        "status": ended.status,
    }
    if ended.error_code is not None:
        data["error_code"] = ended.error_code
    return OutboxEvent(
        owner=ended.owner,
        event=event,
        message_id=f"msg_{ended.run_id}",
        payload=body(event, data),
        conversation_id=ended.conversation_id,
        run_id=ended.run_id,
    )


async def enqueue_run_endings(session: AsyncConnection, endings: Sequence[RunEnded]) -> int:
    """Write the endings' deliveries in ``session``'s transaction (the one ending the runs)."""
    return await _write(session, [run_ending(e) for e in endings])


async def enqueue(session: AsyncConnection, owner: str, event: str, data: Mapping[str, Any]) -> int:
    """Write ``event`` for ``owner``'s endpoints in ``session``'s transaction, e.g.
    ``enqueue(session, owner, "conversation.titled", {"conversation_id": …})``. ``data``
    names ids and a status, never message text (a title is made of it: the receiver reads it
    with its key). How many deliveries were written (0: no endpoint wants it)."""
    if event not in EVENT_TYPES:
        raise ValueError(f"unknown webhook event {event!r}")
    conversation_id = data.get("conversation_id")
    run_id = data.get("run_id")
    outbox = OutboxEvent(
        owner=owner,
        event=event,
        message_id=f"msg_{uuid.uuid4().hex}",
        payload=body(event, data),
        conversation_id=conversation_id if isinstance(conversation_id, str) else None,
        run_id=run_id if isinstance(run_id, str) else None,
    )
    return await _write(session, [outbox])


async def _write(session: AsyncConnection, events: list[OutboxEvent]) -> int:
    written = await WebhookRepository(session).enqueue(events)
    if written:
        await RunRepository(session).notify(WAKE)
    return written
