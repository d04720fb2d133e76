"""The ``/webhooks`` use cases of one owner: register, list, change and delete endpoints; list
and replay their deliveries. Each is one transaction.

May import storage, settings and the webhooks room. A URL is checked by the SSRF guard before it
is stored; the secret is made here and shown once, when the endpoint is registered.
"""

from __future__ import annotations

import base64
import builtins
import secrets
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from app.settings import Settings
from app.storage import Database, RunRepository, utcnow
from app.storage.webhooks import DeliveryRecord, EndpointRecord, WebhookRepository
from app.webhooks.events import WAKE
from app.webhooks.guard import check

SECRET_BYTES = 32


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class WebhookService:
    """One owner's webhook endpoints and their deliveries."""

    def __init__(self, database: Database, settings: Settings, owner: str) -> None:
        self._database = database
        self._settings = settings
        self.owner = owner

    async def create(self, url: str, events: Sequence[str]) -> EndpointRecord:
        await check(url, allow_private=self._settings.webhook_allow_private)
        async with self._database.transaction() as session:
            return await WebhookRepository(session).create_endpoint(
                self.owner, url, _unique(events), new_secret()
            )

    async def list(
        self, limit: int, cursor: str | None
    ) -> tuple[builtins.list[EndpointRecord], str | None]:
        async with self._database.session(readonly=True) as session:
            return await WebhookRepository(session).endpoints(self.owner, limit, cursor)

    async def get(self, endpoint_id: str) -> EndpointRecord:
        async with self._database.session(readonly=True) as session:
            return await WebhookRepository(session).endpoint(self.owner, endpoint_id)

    async def update(self, endpoint_id: str, changes: Mapping[str, Any]) -> EndpointRecord:
        changes = dict(changes)
        if "url" in changes:
            await check(changes["url"], allow_private=self._settings.webhook_allow_private)
        if "events" in changes:
            changes["events"] = _unique(changes["events"])
        async with self._database.transaction() as session:
            return await WebhookRepository(session).update_endpoint(
                self.owner, endpoint_id, changes
            )

    async def delete(self, endpoint_id: str) -> None:
        async with self._database.transaction() as session:
            await WebhookRepository(session).delete_endpoint(self.owner, endpoint_id)

    async def deliveries(
        self, endpoint_id: str, limit: int, cursor: str | None
    ) -> tuple[builtins.list[DeliveryRecord], str | None]:
        async with self._database.session(readonly=True) as session:
            return await WebhookRepository(session).deliveries(
                self.owner, endpoint_id, limit, cursor
            )

    async def replay(self, endpoint_id: str, delivery_id: str) -> DeliveryRecord:
        """Send the delivery again now, retried for another retry period."""
        expires_at = utcnow() + timedelta(seconds=self._settings.webhook_retry_seconds)
        async with self._database.transaction() as session:
            replayed = await WebhookRepository(session).replay(
                self.owner, endpoint_id, delivery_id, expires_at
            )
            await RunRepository(session).notify(WAKE)
        return replayed


def _unique(events: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(events))
