"""Who is calling, by bearer token: a static key (``PARLEY_API_KEYS``), a database key (looked
up per request through a per-process cache that trusts what it read for less than a second,
``PARLEY_KEY_CACHE_SECONDS``), or — when no key of either kind exists — anyone.

Imports app.storage and app.settings. A database key's request is counted against its
requests per minute here (one statement) and its ``last_used_at`` written at most once in
``PARLEY_KEY_LAST_USED_SECONDS`` by each process.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from app.settings import Settings
from app.spend.errors import KeyRefused
from app.spend.keys import KeyRecord, any_keys, find_key, owner_of_token, token_hash, touch_key
from app.spend.limits import take_request
from app.storage import Database, utcnow

T = TypeVar("T")
ANONYMOUS = "anonymous"
_CACHE_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Grant:
    """The caller: the owner whose conversations it sees, and its database key (if any)."""

    owner: str
    key: KeyRecord | None = None


class _Once:
    """One call at a time per key: callers asking while it is under way share its answer (a
    hundred requests arriving together, the cache empty or just expired, ask once)."""

    def __init__(self) -> None:
        self._asking: dict[str, asyncio.Future[Any]] = {}

    async def once(self, key: str, ask: Callable[[], Awaitable[T]]) -> T:
        asking = self._asking.get(key)
        if asking is None:
            asking = self._asking[key] = asyncio.ensure_future(ask())
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        result: T = await asyncio.shield(asking)
        return result


class KeyAccess:
    """One per process: finds the caller's key, counts its requests, notes its use."""

    def __init__(self, settings: Settings, database: Database) -> None:
        self._settings = settings
        self._static = settings.accepted_api_keys()
        """``PARLEY_API_KEYS``, read once (every request asks)."""
        self._database = database
        self._keys: dict[str, tuple[float, KeyRecord | None]] = {}
        self._any: tuple[float, bool] = (0.0, False)
        self._touched: dict[str, float] = {}
        self._asking = _Once()
        """Lookups under way: a herd of requests the cache has not seen asks the database once."""

    async def grant(self, token: str | None) -> Grant:
        """The caller a token (or none) stands for; ``KeyRefused`` if it may not call."""
        static = self._static
        if token is not None and _listed(token, static):
            return Grant(owner_of_token(token))
        if token is not None:
            key = await self._lookup(token)
            if key is not None:
                now = utcnow()
                if key.refused(now):
                    raise KeyRefused("this API key was revoked or has expired")
                await self._use(key)
                return Grant(key.owner, key)
        if static or await self._any_keys():
            raise KeyRefused("a valid API key is required: 'Authorization: Bearer <key>'")
        return Grant(owner_of_token(token) if token is not None else ANONYMOUS)

    async def _lookup(self, token: str) -> KeyRecord | None:
        digest = token_hash(token)
        cached = self._keys.get(digest)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        return await self._asking.once(digest, lambda: self._find(token, digest))

    async def _find(self, token: str, digest: str) -> KeyRecord | None:
        now = time.monotonic()
        async with self._database.session(readonly=True) as session:
            key = await find_key(session, token)
        if len(self._keys) >= _CACHE_MAX:
            self._keys.clear()
        self._keys[digest] = (now + self._settings.key_cache_seconds, key)
        return key

    async def _any_keys(self) -> bool:
        until, known = self._any
        if known or until > time.monotonic():
            return known  # once a key exists, one always does (revoked keys stay)
        return await self._asking.once("", self._count)

    async def _count(self) -> bool:
        now = time.monotonic()
        async with self._database.session(readonly=True) as session:
            known = await any_keys(session)
        self._any = (now + self._settings.key_cache_seconds, known)
        return known

    async def _use(self, key: KeyRecord) -> None:
        """Count the request (its limit per minute) and note the key's use, in one
        transaction, only when there is something to write."""
        rpm = key.limits.requests_per_minute
        now = time.monotonic()
        last = self._touched.get(key.id)
        touch = last is None or now - last >= self._settings.key_last_used_seconds
        if rpm is None and not touch:
            return
        async with self._database.transaction() as session:
            if rpm is not None:
                await take_request(session, key.id, rpm, utcnow())
            if touch:
                await touch_key(session, key.id, utcnow())
        if touch:
            self._touched[key.id] = now

    def forget(self) -> None:
        """Drop what this process read (a test, or an admin change made here)."""
        self._keys.clear()
        self._any = (0.0, self._any[1])


def _listed(token: str, static: list[str]) -> bool:
    given = token.encode("utf-8", "surrogateescape")
    return any(hmac.compare_digest(given, k.encode()) for k in static)
