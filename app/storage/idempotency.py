"""Idempotency keys in SQL: claim a key, record what its request produced, forget it.

Imports SQLAlchemy and the tables. The repository flushes; its caller commits. A claim is its
own short transaction, so a concurrent request with the same key sees it at once: on
PostgreSQL the second INSERT waits for the first to commit, then fails on the primary key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.tables import IDEMPOTENCY_KEYS as _T

PENDING, DONE = "pending", "done"
_CLAIM_ATTEMPTS = 5  # a key freed again each time between INSERT and SELECT: not for long


@dataclass(frozen=True)
class KeyRecord:
    """What a key holds: the request it was first used for, and its result once done."""

    request_hash: str
    state: str
    status_code: int | None
    response: str | None
    run_id: str | None


@dataclass(frozen=True)
class KeyRef:
    owner: str
    scope: str
    key: str

    def where(self) -> ColumnElement[bool]:
        return and_(_T.c.owner == self.owner, _T.c.scope == self.scope, _T.c.key == self.key)


class IdempotencyRepository:
    """The idempotency keys, for one session."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def claim(
        self, ref: KeyRef, request_hash: str, now: datetime, ttl: timedelta, stale: timedelta
    ) -> KeyRecord | None:
        """Take the key for a new request (None), or the record already holding it.

        Expired keys, and pending ones older than ``stale`` (their process died), are dropped
        first: a key is free again after ``ttl``.
        """
        await self._session.execute(
            delete(_T).where(
                or_(
                    _T.c.expires_at < now,
                    and_(_T.c.state == PENDING, _T.c.created_at < now - stale),
                )
            )
        )
        row = {
            "owner": ref.owner,
            "scope": ref.scope,
            "key": ref.key,
            "request_hash": request_hash,
            "state": PENDING,
            "created_at": now,
            "expires_at": now + ttl,
        }
        attempts_left = _CLAIM_ATTEMPTS
        while True:
            try:
                async with self._session.begin_nested():
                    await self._session.execute(insert(_T).values(**row))
                return None
            except IntegrityError:
                found = await self.get(ref)
                if found is not None:
                    return found
                # Its request failed and freed it between the INSERT and the SELECT (READ
                # COMMITTED reads what committed since): the key is free, so claim it again —
                # never serve a request without it. A refusal that is not a held key would
                # repeat: it is raised after a few tries.
                attempts_left -= 1
                if attempts_left == 0:
                    raise

    async def get(self, ref: KeyRef) -> KeyRecord | None:
        found = (await self._session.execute(select(_T).where(ref.where()))).mappings().first()
        if found is None:
            return None
        return KeyRecord(
            found["request_hash"],
            found["state"],
            found["status_code"],
            found["response"],
            found["run_id"],
        )

    async def complete(
        self, ref: KeyRef, status_code: int, response: str | None, run_id: str | None
    ) -> None:
        """Record the result a retry with this key gets."""
        await self._session.execute(
            update(_T)
            .where(ref.where())
            .values(state=DONE, status_code=status_code, response=response, run_id=run_id)
        )

    async def release(self, ref: KeyRef) -> None:
        """Forget a key whose request failed: a retry runs it again."""
        await self._session.execute(delete(_T).where(ref.where()))
