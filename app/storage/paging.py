"""Keyset pagination, newest first, shared by the conversation and run listings.

Imports SQLAlchemy and app.storage's cursor codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import RowMapping, Table, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.records import decode_cursor, encode_cursor


async def newest_first(
    session: AsyncConnection, table: Table, where: Any, limit: int, cursor: str | None
) -> tuple[Sequence[RowMapping], str | None]:
    """A page of ``table``'s rows matching ``where``, newest first (keyset pagination on
    ``(created_at, id)``), and the cursor of the next page."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    created, ids = table.c.created_at, table.c.id
    query = select(table).where(where)
    if cursor is not None:
        created_at, key = decode_cursor(cursor)
        query = query.where(or_(created < created_at, and_(created == created_at, ids < key)))
    query = query.order_by(created.desc(), ids.desc()).limit(limit + 1)
    rows = (await session.execute(query)).mappings().all()
    last = rows[limit - 1] if len(rows) > limit else None
    return rows[:limit], (encode_cursor(last["created_at"], last["id"]) if last else None)
