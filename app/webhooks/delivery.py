"""The deliverer: one task per process sends the outbox's due deliveries, any replica alike.

May import storage, settings and the webhooks room. Each round claims a batch in a short
transaction (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: the write lock), POSTs each with
httpx — signed with ``standardwebhooks``, a time limit per attempt, redirects not followed (a
3xx is a failure) — and records each attempt as it ends: delivered, retried later with
exponential backoff and jitter, or failed once the retry period is over. A process that dies
mid-send leaves its claims to expire; another sends them again with the same ``webhook-id``.
It wakes on NOTIFY ``w:`` (PostgreSQL) and polls every ``webhook_poll_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import random
import ssl
from datetime import datetime, timedelta
from typing import Any

import httpx2 as httpx  # the SDKs' client: loaded anyway, and no CLI (rich, pygments)
from standardwebhooks import Webhook

from app.settings import Settings
from app.storage import Database, DatabaseUnavailable, utcnow
from app.storage.webhooks import Attempt, Claimed, WebhookRepository
from app.webhooks.guard import UrlRefused, check

log = logging.getLogger(__name__)
BATCH = 32
"""Deliveries claimed per round (sent concurrently)."""
PRUNE_EVERY_SECONDS = 3600.0
USER_AGENT = "Parley-Webhooks/1"
MAX_ERROR_CHARS = 500


def pinned(url: str, address: str | None) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """The URL to connect to, the ``Host`` header and the request extensions that send ``url``
    to ``address`` (one the guard approved) rather than to what its host resolves to now; for
    https the certificate is still checked against the URL's host name."""
    target = httpx.URL(url)
    if address is None or target.host == address:
        return target, {}, {}
    headers = {"host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return target.copy_with(host=address), headers, extensions


@functools.cache
def _tls() -> ssl.SSLContext:
    """The CA bundle as an SSL context, read once per process (15 ms a read) and shared by the
    deliverers: one per app, and a test process starts hundreds of apps."""
    return httpx.create_ssl_context(trust_env=False)


def sign(secret: str, message_id: str, at: datetime, payload: str) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt (the timestamp is the attempt's)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(math.floor(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, at, payload),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


class Deliverer:
    """Sends due webhook deliveries; ``wake`` after a commit that wrote some."""

    def __init__(self, settings: Settings, database: Database) -> None:
        self._settings = settings
        self._database = database
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._closing = False
        self.attempts = 0
        """Attempts made by this process (for tests and operators)."""

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            # trust_env=False: no proxy from the environment stands between the guard's
            # check and the connection. No kept-alive connections: each attempt connects to
            # the address its check approved (a pooled one was checked for another name).
            self._client = httpx.AsyncClient(
                verify=_tls(),
                follow_redirects=False,
                trust_env=False,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
            self._task = asyncio.create_task(self._run(), name="parley-webhooks")

    async def close(self) -> None:
        """Stop; deliveries in flight are sent again by whoever claims them next."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_prune = loop.time()
        while not self._closing:
            claimed = 0
            try:
                if loop.time() >= next_prune:
                    next_prune = loop.time() + PRUNE_EVERY_SECONDS
                    await self.prune()
                claimed = await self.round()
            except DatabaseUnavailable as exc:
                log.warning("webhooks: the database is unavailable (%s)", exc)
            except Exception:  # the deliverer must outlive a hiccup
                log.exception("webhooks: a delivery round failed")
            if claimed < BATCH:  # a full batch: more may be due at once
                await self._sleep(self._settings.webhook_poll_seconds)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

    async def prune(self) -> None:
        before = utcnow() - timedelta(seconds=self._settings.webhook_retention_seconds)
        async with self._database.transaction() as session:
            pruned = await WebhookRepository(session).prune(before)
        if pruned:
            log.info("webhooks: forgot %d deliveries made before %s", pruned, before)

    async def round(self) -> int:
        """Claim the due deliveries, send them concurrently; how many were claimed. A read
        finds whether any is due first: an idle poll takes no write lock (SQLite's is the
        whole database's)."""
        settings = self._settings
        now = utcnow()
        async with self._database.session(readonly=True) as session:
            if not await WebhookRepository(session).any_due(now):
                return 0
        hold = max(settings.webhook_claim_seconds, settings.webhook_timeout_seconds + 5)
        async with self._database.transaction() as session:
            claims = await WebhookRepository(session).claim(
                now, now + timedelta(seconds=hold), BATCH
            )
        if claims:
            async with asyncio.TaskGroup() as group:
                for claimed in claims:
                    group.create_task(self._deliver(claimed))
        return len(claims)

    async def _deliver(self, claimed: Claimed) -> None:
        attempt = await self.send(claimed)
        try:
            async with self._database.transaction() as session:
                await WebhookRepository(session).record(claimed, attempt)
        except Exception:  # its claim expires: it is sent again (the same webhook-id)
            log.exception("webhooks: delivery %s: the attempt was not recorded", claimed.id)
            return
        if not attempt.delivered:
            log.info(
                "webhook delivery %s failed (%s); %s",
                claimed.id,
                attempt.error,
                f"next attempt at {attempt.next_attempt_at:%H:%M:%S}"
                if attempt.next_attempt_at
                else "given up",
            )

    async def send(self, claimed: Claimed) -> Attempt:
        """One attempt: POST the signed payload; a 2xx is delivered, anything else is retried."""
        self.attempts += 1
        settings = self._settings
        status: int | None = None
        try:
            addresses = await check(claimed.url, allow_private=settings.webhook_allow_private)
            status = await self.post(claimed, _first(addresses))
            if 200 <= status < 300:
                return Attempt(True, status, None, None)
            error = f"HTTP {status}" + (" (redirects are not followed)" if status < 400 else "")
        except UrlRefused as exc:
            error = f"refused: {exc}"
        except TimeoutError:
            error = f"no answer within {settings.webhook_timeout_seconds:g} s"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        except Exception as exc:  # a failed attempt, never the round's (its batch's) failure
            log.exception("webhooks: delivery %s: the attempt failed", claimed.id)
            error = f"{type(exc).__name__}: {exc}"
        return Attempt(False, status, error[:MAX_ERROR_CHARS], self.next_attempt(claimed))

    async def post(self, claimed: Claimed, address: str | None) -> int:
        """POST ``claimed`` (to ``address``, if given: see ``pinned``); the answer's status."""
        assert self._client is not None, "start() makes the client"
        seconds = self._settings.webhook_timeout_seconds
        url, host, extensions = pinned(claimed.url, address)
        headers = sign(claimed.secret, claimed.message_id, utcnow(), claimed.payload) | host
        async with asyncio.timeout(seconds):  # the whole attempt, not each read
            async with self._client.stream(
                "POST",
                url,
                content=claimed.payload.encode(),
                headers=headers,
                timeout=seconds,
                extensions=extensions,
            ) as response:
                return response.status_code  # the body is not read

    def next_attempt(self, claimed: Claimed) -> datetime | None:
        """When to try again: exponential backoff with jitter, until the retry period ends
        (then None: failed)."""
        settings = self._settings
        now = utcnow()
        deadline = claimed.expires_at or claimed.created_at + timedelta(
            seconds=settings.webhook_retry_seconds
        )
        if now >= deadline:
            return None
        exponent = min(claimed.attempts, 30)  # attempts before this one
        delay = min(
            settings.webhook_backoff_seconds * 2**exponent, settings.webhook_backoff_max_seconds
        )
        delay *= random.uniform(0.75, 1.25)
        return min(now + timedelta(seconds=delay), deadline)


def _first(addresses: list[str]) -> str | None:
    """The address to connect to: an IPv4 one if any (IPv6 is more often unroutable)."""
    return next((a for a in addresses if ":" not in a), addresses[0] if addresses else None)
