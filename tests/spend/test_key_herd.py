"""A herd of requests the key cache has not seen (empty, or just expired) asks the database once,
on both databases: with no key at all, and with one database key used by all of them."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from sqlalchemy import event

from app.settings import Settings
from app.spend.access import ANONYMOUS, KeyAccess
from app.spend.keys import Limits, create_key
from app.storage import Database

_FROM_KEYS = re.compile(r'\bFROM\s+"?keys"?\b', re.IGNORECASE)


def count_key_reads(database: Database) -> list[str]:
    """The statements reading the keys table from now on."""
    seen: list[str] = []

    @event.listens_for(database.engine.sync_engine, "before_cursor_execute")
    def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if _FROM_KEYS.search(statement):
            seen.append(statement)

    return seen


async def test_a_herd_without_keys_asks_once_whether_any_exists(database: Database) -> None:
    access = KeyAccess(Settings(database_url=str(database.url)), database)
    reads = count_key_reads(database)

    grants = await asyncio.gather(*(access.grant(None) for _ in range(50)))

    assert {g.owner for g in grants} == {ANONYMOUS}
    assert len(reads) == 1, reads


async def test_a_herd_of_one_key_looks_it_up_once(database: Database) -> None:
    async with database.transaction() as session:
        record, token = await create_key(session, "herd", Limits())
    access = KeyAccess(Settings(database_url=str(database.url), key_cache_seconds=0.5), database)
    reads = count_key_reads(database)

    grants = await asyncio.gather(*(access.grant(token) for _ in range(50)))

    assert {g.key.id for g in grants if g.key is not None} == {record.id}
    assert len(grants) == 50
    assert len(reads) == 1, reads
    await asyncio.sleep(0.6)  # the cache's entry expired: the next herd asks once again
    await asyncio.gather(*(access.grant(token) for _ in range(50)))
    assert len(reads) == 2, reads
