"""The run lease on a conversation: taken, renewed, released, and found expired.

Imports SQLAlchemy and app.storage. Lease operations change neither ``version`` nor
``updated_at``. Finding a lease expired ends nothing: recovering its run is the runs layer's
explicit step (app/runs/recovery.py), with ``expired_lease`` and ``release_lease``.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase, ttl
from app.storage.records import ConversationRecord, conversation_key


class Leasing(RepositoryBase):
    """The lease half of ConversationRepository."""

    async def acquire_lease(
        self, conversation_id: str, run_id: str, ttl_seconds: float
    ) -> ConversationRecord:
        """Hold the conversation for ``run_id`` for ``ttl_seconds``; LeaseHeld if another holds it,
        LeaseExpired if another held it and its lease expired (recover that run first).

        Acquiring again as the holder extends the lease.
        """
        row = await self._locked_row(conversation_id)
        holder = row["lease_run_id"]
        if holder is not None and holder != run_id:
            self._refuse_holder(row)
        values = {"lease_run_id": run_id, "lease_expires_at": self._now() + ttl(ttl_seconds)}
        await self._set(row["id"], values)
        return await self._record({**row, **values}, row)

    async def renew_lease(self, conversation_id: str, run_id: str, ttl_seconds: float) -> bool:
        """Extend ``run_id``'s lease to ``ttl_seconds`` from now; False if it no longer holds it.

        A holder whose lease expired keeps it until its run is recovered.
        """
        result = await self._scoped(
            s.RENEW,
            conversation_key(conversation_id),
            run=run_id,
            expires=self._now() + ttl(ttl_seconds),
        )
        return bool(result.rowcount)

    async def release_lease(self, conversation_id: str, run_id: str) -> None:
        """Let go of the lease if ``run_id`` holds it; otherwise do nothing."""
        await self._scoped(s.RELEASE, conversation_key(conversation_id), run=run_id)

    async def expired_lease(self, conversation_id: str) -> str | None:
        """Lock the conversation's row; the run whose lease on it expired, if one holds it (its
        process died, or stopped for longer than the lease), else None."""
        row = await self._locked_row(conversation_id)
        holder: str | None = row["lease_run_id"]
        if holder is None or row["lease_expires_at"] > self._now():
            return None
        return holder

    async def lease_holders(self, conversation_ids: Iterable[str]) -> dict[str, str | None]:
        """Lock these conversations' rows, in one statement; which run holds each one's lease
        (None: no run), by id. Only a holder writes to its conversation and its run's log."""
        keys = sorted({conversation_key(c) for c in conversation_ids})
        result = await self._session.execute(s.HOLDERS, {"keys": keys})
        return {
            key: holder
            for key, owner, holder in result
            if self._owner is None or owner == self._owner
        }
