"""Idempotent retries: a request repeated with the same ``Idempotency-Key`` gets the first
result — the same response, or for a stream the same run — never a second effect.

May import storage, settings and the runs layer (``Services``, errors). Keys are scoped by
owner and route (method and path) and kept ``idempotency_ttl_seconds``. Two requests with one
key at once: the first claims it, the other gets ``IdempotencyKeyInUse`` (409, retry after a
second) until the first is done. A request that fails releases its key, so a retry runs it
again.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from app.runs.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from app.runs.services import Services
from app.storage.idempotency import DONE, IdempotencyRepository, KeyRef
from app.storage.records import utcnow

# A pending key older than this belongs to a request whose process died: the key is free.
# Requests finish (or, for streams, record their run) well within it.
PENDING_STALE_SECONDS = 60.0


@dataclass(frozen=True)
class Replay:
    """The first result of a key: a response to repeat, or the run a stream started."""

    status_code: int
    body: bytes
    headers: dict[str, str]
    run_id: str | None


class IdempotencyService:
    """Claims, completes and releases the idempotency keys of one owner."""

    def __init__(self, services: Services, owner: str) -> None:
        self.services = services
        self.owner = owner

    def _ref(self, scope: str, key: str) -> KeyRef:
        return KeyRef(self.owner, scope, key)

    async def begin(self, scope: str, key: str, request_hash: str) -> Replay | None:
        """None when this request is the key's first (serve it); else the first result.

        IdempotencyKeyReused if the key was used for another request, IdempotencyKeyInUse
        while that request is still being served.
        """
        ttl = timedelta(seconds=self.services.settings.idempotency_ttl_seconds)
        stale = timedelta(seconds=PENDING_STALE_SECONDS)
        async with self.services.database.transaction() as session:
            found = await IdempotencyRepository(session).claim(
                self._ref(scope, key), request_hash, utcnow(), ttl, stale
            )
        if found is None:
            return None
        if found.state != DONE or found.status_code is None:
            raise IdempotencyKeyInUse(key)
        if found.request_hash != request_hash:
            raise IdempotencyKeyReused(key)
        stored: dict[str, Any] = json.loads(found.response or '{"body": "", "headers": {}}')
        body, headers = str(stored["body"]).encode(), dict(stored["headers"])
        return Replay(found.status_code, body, headers, found.run_id)

    async def complete(
        self,
        scope: str,
        key: str,
        status_code: int,
        body: bytes,
        headers: dict[str, str],
        run_id: str | None = None,
    ) -> None:
        """Record the result that a retry with this key gets."""
        response = json.dumps({"body": body.decode(), "headers": headers})
        async with self.services.database.transaction() as session:
            await IdempotencyRepository(session).complete(
                self._ref(scope, key), status_code, response, run_id
            )

    async def release(self, scope: str, key: str) -> None:
        """Forget the key of a request that failed (shielded: it runs on cancellation too)."""

        async def forget() -> None:
            async with self.services.database.transaction() as session:
                await IdempotencyRepository(session).release(self._ref(scope, key))

        await asyncio.shield(forget())
