"""The use cases the API serves on keys and usage, each in its own transaction or read.

May import storage and the spend room. ``KeyAdmin`` is `/admin/keys`: every change also makes
this process's key cache forget what it read (other processes see it within their cache's
second). ``UsageReader`` reads the ledger for `/usage` and a conversation's totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.spend.access import KeyAccess
from app.spend.keys import KeyRecord, Limits, change_key, create_key, get_key, list_keys
from app.spend.keys import revoke_key as _revoke_key
from app.spend.ledger import conversation_totals, usage_report
from app.storage import Database


class KeyAdmin:
    """Keys made, read, changed and revoked by the admin API."""

    def __init__(self, database: Database, access: KeyAccess) -> None:
        self.database = database
        self.access = access

    async def create(
        self, name: str, limits: Limits, expires_at: datetime | None
    ) -> tuple[KeyRecord, str]:
        """A new key and its token (to show once)."""
        async with self.database.transaction() as session:
            made = await create_key(session, name, limits, expires_at)
        self.access.forget()
        return made

    async def list(self) -> list[KeyRecord]:
        async with self.database.session(readonly=True) as session:
            return await list_keys(session)

    async def get(self, key_id: str) -> KeyRecord:
        async with self.database.session(readonly=True) as session:
            return await get_key(session, key_id)

    async def change(self, key_id: str, changes: Mapping[str, Any]) -> KeyRecord:
        async with self.database.transaction() as session:
            key = await change_key(session, key_id, changes)
        self.access.forget()
        return key

    async def revoke(self, key_id: str) -> None:
        async with self.database.transaction() as session:
            await _revoke_key(session, key_id)
        self.access.forget()


class UsageReader:
    """The usage ledger as the API reports it."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def report(
        self, group_by: str, owner: str | None, start: datetime | None, end: datetime | None
    ) -> list[dict[str, Any]]:
        async with self.database.session(readonly=True) as session:
            return await usage_report(session, group_by, owner, start, end)

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        async with self.database.session(readonly=True) as session:
            return await conversation_totals(session, conversation_id)
