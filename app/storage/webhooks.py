"""WebhookRepository: webhook endpoints and their delivery outbox in SQL, on the caller's session.

Imports SQLAlchemy and app.storage. Like the other repositories it flushes and never commits: an
event's rows join the transaction that made the event (a run's ending), and a claim is the
delivering process's own short transaction. Endpoints are owner-scoped like conversations.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import delete, exists, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.errors import StorageError
from app.storage.paging import newest_first
from app.storage.records import utcnow
from app.storage.webhook_tables import WEBHOOK_DELIVERIES, WEBHOOK_ENDPOINTS

_W = WEBHOOK_ENDPOINTS.c
_D = WEBHOOK_DELIVERIES.c
DeliveryStatus = Literal["pending", "delivered", "failed"]


class WebhookNotFound(StorageError):
    """No webhook endpoint with this id is visible to the caller."""

    def __init__(self, endpoint_id: str) -> None:
        super().__init__(f"webhook {endpoint_id!r} not found")


class DeliveryNotFound(StorageError):
    """The endpoint has no delivery with this id."""

    def __init__(self, delivery_id: str) -> None:
        super().__init__(f"delivery {delivery_id!r} not found")


@dataclass(frozen=True)
class EndpointRecord:
    id: str
    owner: str
    url: str
    events: tuple[str, ...]
    secret: str
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DeliveryRecord:
    id: str
    endpoint_id: str
    message_id: str
    event: str
    conversation_id: str | None
    run_id: str | None
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class OutboxEvent:
    """An event to send to every endpoint of ``owner`` that wants ``event``."""

    owner: str
    event: str
    message_id: str
    payload: str
    conversation_id: str | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class Claimed:
    """A delivery this process holds (``token``) until it records the attempt."""

    seq: int
    id: str
    message_id: str
    payload: str
    attempts: int
    created_at: datetime
    expires_at: datetime | None
    url: str
    secret: str
    token: str


@dataclass(frozen=True)
class Attempt:
    """How one attempt went: ``next_attempt_at`` None and not delivered means given up."""

    delivered: bool
    status_code: int | None
    error: str | None
    next_attempt_at: datetime | None


def new_id() -> str:
    return uuid.uuid4().hex


def _key(value: str) -> str:
    try:
        return uuid.UUID(value).hex
    except (ValueError, TypeError, AttributeError):
        return ""


class WebhookRepository:
    """Endpoints and deliveries through one AsyncConnection (the caller commits)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session
        self._postgres = session.dialect.name == "postgresql"

    # --- endpoints ------------------------------------------------------------------------------

    async def create_endpoint(
        self, owner: str, url: str, events: Sequence[str], secret: str
    ) -> EndpointRecord:
        now = utcnow()
        values = {
            "id": new_id(),
            "owner": owner,
            "url": url,
            "events": list(events),
            "secret": secret,
            "enabled": True,
            "created_at": now,
            "updated_at": now,
        }
        await self._session.execute(insert(WEBHOOK_ENDPOINTS).values(values))
        return _endpoint(values)

    async def endpoints(
        self, owner: str, limit: int, cursor: str | None
    ) -> tuple[list[EndpointRecord], str | None]:
        rows, next_cursor = await newest_first(
            self._session, WEBHOOK_ENDPOINTS, _W.owner == owner, limit, cursor
        )
        return [_endpoint(row) for row in rows], next_cursor

    async def endpoint(self, owner: str, endpoint_id: str) -> EndpointRecord:
        query = select(WEBHOOK_ENDPOINTS).where(_W.id == _key(endpoint_id), _W.owner == owner)
        row = (await self._session.execute(query)).mappings().first()
        if row is None:
            raise WebhookNotFound(endpoint_id)
        return _endpoint(row)

    async def update_endpoint(
        self, owner: str, endpoint_id: str, changes: Mapping[str, Any]
    ) -> EndpointRecord:
        """Change ``url``, ``events`` or ``enabled`` (the keys of ``changes``)."""
        values = {k: v for k, v in changes.items() if k in ("url", "events", "enabled")}
        statement = (
            update(WEBHOOK_ENDPOINTS)
            .where(_W.id == _key(endpoint_id), _W.owner == owner)
            .values(**values, updated_at=utcnow())
        )
        result = await self._session.execute(statement)
        if not getattr(result, "rowcount", 0):
            raise WebhookNotFound(endpoint_id)
        return await self.endpoint(owner, endpoint_id)

    async def delete_endpoint(self, owner: str, endpoint_id: str) -> None:
        """Forget the endpoint and its deliveries, sent or not."""
        endpoint = await self.endpoint(owner, endpoint_id)
        await self._session.execute(delete(WEBHOOK_DELIVERIES).where(_D.endpoint_id == endpoint.id))
        await self._session.execute(delete(WEBHOOK_ENDPOINTS).where(_W.id == endpoint.id))

    # --- the outbox -----------------------------------------------------------------------------

    async def enqueue(self, events: Sequence[OutboxEvent]) -> int:
        """One pending delivery per (endpoint that wants it, event); how many were written."""
        owners = sorted({e.owner for e in events})
        if not owners:
            return 0
        query = select(_W.id, _W.owner, _W.events).where(_W.owner.in_(owners), _W.enabled.is_(True))
        endpoints = (await self._session.execute(query)).all()
        now = utcnow()
        rows = [
            _pending(event, endpoint_id, now)
            for event in events
            for endpoint_id, owner, wanted in endpoints
            if owner == event.owner and event.event in wanted
        ]
        if rows:
            await self._session.execute(insert(WEBHOOK_DELIVERIES), rows)
        return len(rows)

    async def any_due(self, now: datetime) -> bool:
        """Whether some delivery is due and free (a cheap read before a claim's write)."""
        query = select(_D.seq).where(*_due(now)).limit(1)
        return (await self._session.execute(query)).first() is not None

    async def prune(self, before: datetime) -> int:
        """Forget the deliveries made (delivered or failed) before ``before``; how many."""
        statement = delete(WEBHOOK_DELIVERIES).where(_D.status != "pending", _D.created_at < before)
        result = await self._session.execute(statement)
        return int(getattr(result, "rowcount", 0) or 0)

    async def claim(self, now: datetime, until: datetime, limit: int) -> list[Claimed]:
        """Take up to ``limit`` due deliveries until ``until``: pending, not held by another
        process, to an enabled endpoint, and with no earlier pending delivery of the same
        conversation to the same endpoint (an endpoint gets a conversation's events in order).
        PostgreSQL skips rows another claim holds locked; SQLite's claim holds the database's
        write lock."""
        earlier = WEBHOOK_DELIVERIES.alias("earlier")
        blocked = exists().where(
            earlier.c.endpoint_id == _D.endpoint_id,
            earlier.c.conversation_id == _D.conversation_id,
            earlier.c.seq < _D.seq,
            earlier.c.status == "pending",
        )
        due = select(_D.seq).where(*_due(now), ~blocked).order_by(_D.seq).limit(limit)
        if self._postgres:
            due = due.with_for_update(skip_locked=True, of=WEBHOOK_DELIVERIES)
        seqs = list((await self._session.execute(due)).scalars())
        if not seqs:
            return []
        token = new_id()
        await self._session.execute(
            update(WEBHOOK_DELIVERIES)
            .where(_D.seq.in_(seqs))
            .values(claimed_until=until, claim_token=token)
        )
        query = (
            select(WEBHOOK_DELIVERIES, _W.url, _W.secret)
            .join(WEBHOOK_ENDPOINTS, _W.id == _D.endpoint_id)
            .where(_D.seq.in_(seqs))
            .order_by(_D.seq)
        )
        rows = (await self._session.execute(query)).mappings().all()
        return [_claimed(row, token) for row in rows]

    async def record(self, claimed: Claimed, attempt: Attempt) -> bool:
        """Store how an attempt went, if this process still holds the delivery."""
        status: DeliveryStatus = "delivered" if attempt.delivered else "pending"
        if not attempt.delivered and attempt.next_attempt_at is None:
            status = "failed"
        now = utcnow()
        statement = (
            update(WEBHOOK_DELIVERIES)
            .where(_D.seq == claimed.seq, _D.claim_token == claimed.token)
            .values(
                status=status,
                attempts=_D.attempts + 1,
                last_status_code=attempt.status_code,
                last_error=attempt.error,
                next_attempt_at=attempt.next_attempt_at or now,
                claimed_until=None,
                claim_token=None,
                delivered_at=now if attempt.delivered else None,
            )
        )
        result = await self._session.execute(statement)
        return bool(getattr(result, "rowcount", 0))

    # --- what the owner sees --------------------------------------------------------------------

    async def deliveries(
        self, owner: str, endpoint_id: str, limit: int, cursor: str | None
    ) -> tuple[list[DeliveryRecord], str | None]:
        endpoint = await self.endpoint(owner, endpoint_id)
        rows, next_cursor = await newest_first(
            self._session, WEBHOOK_DELIVERIES, _D.endpoint_id == endpoint.id, limit, cursor
        )
        return [_delivery(row) for row in rows], next_cursor

    async def replay(
        self, owner: str, endpoint_id: str, delivery_id: str, expires_at: datetime
    ) -> DeliveryRecord:
        """Send the delivery again, now (same ``webhook-id``), retried until ``expires_at``.
        An attempt in flight is let go: its outcome is not recorded over the replay."""
        endpoint = await self.endpoint(owner, endpoint_id)
        where = (_D.endpoint_id == endpoint.id, _D.id == _key(delivery_id))
        values = {
            "status": "pending",
            "next_attempt_at": utcnow(),
            "expires_at": expires_at,
            "claimed_until": None,
            "claim_token": None,
        }
        result = await self._session.execute(
            update(WEBHOOK_DELIVERIES).where(*where).values(**values, delivered_at=None)
        )
        if not getattr(result, "rowcount", 0):
            raise DeliveryNotFound(delivery_id)
        row = (await self._session.execute(select(WEBHOOK_DELIVERIES).where(*where))).mappings()
        return _delivery(row.one())


def _due(now: datetime) -> tuple[Any, ...]:
    """A delivery to send now: pending, due, held by no process, to an enabled endpoint."""
    enabled = exists().where(_W.id == _D.endpoint_id, _W.enabled.is_(True))
    return (
        _D.status == "pending",
        _D.next_attempt_at <= now,
        or_(_D.claimed_until.is_(None), _D.claimed_until < now),
        enabled,
    )


def _pending(event: OutboxEvent, endpoint_id: str, now: datetime) -> dict[str, Any]:
    return {
        "id": new_id(),
        "endpoint_id": endpoint_id,
        "message_id": event.message_id,
        "event": event.event,
        "conversation_id": event.conversation_id,
        "run_id": event.run_id,
        "payload": event.payload,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "expires_at": None,
        "claimed_until": None,
        "claim_token": None,
        "last_status_code": None,
        "last_error": None,
        "created_at": now,
        "delivered_at": None,
    }


def _endpoint(row: Mapping[Any, Any]) -> EndpointRecord:
    return EndpointRecord(
        id=row["id"],
        owner=row["owner"],
        url=row["url"],
        events=tuple(row["events"]),
        secret=row["secret"],
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _delivery(row: Mapping[Any, Any]) -> DeliveryRecord:
    pending = row["status"] == "pending"
    return DeliveryRecord(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        message_id=row["message_id"],
        event=row["event"],
        conversation_id=row["conversation_id"],
        run_id=row["run_id"],
        status=row["status"],
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"] if pending else None,
        last_status_code=row["last_status_code"],
        last_error=row["last_error"],
        created_at=row["created_at"],
        delivered_at=row["delivered_at"],
    )


def _claimed(row: Mapping[Any, Any], token: str) -> Claimed:
    return Claimed(
        seq=row["seq"],
        id=row["id"],
        message_id=row["message_id"],
        payload=row["payload"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        url=row["url"],
        secret=row["secret"],
        token=token,
    )
