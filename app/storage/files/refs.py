"""Which conversations refer to which files: the ``file_refs`` rows that keep a file from
being deleted while a stored message names it (docs/files.md, "References").

Imports SQLAlchemy and the files' tables. Each function runs in the caller's session (the
conversation repository's, in the transaction that stores the messages), and does not commit.
The rows go with their conversation (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.files.records import file_key
from app.storage.files.tables import FILE_REFS


async def add_refs(session: AsyncConnection, conversation_id: str, file_ids: Iterable[str]) -> None:
    """Record that ``conversation_id``'s messages refer to ``file_ids`` (already recorded ones
    are left as they are). The files must exist (resolve them first: ``FileStore.resolve``)."""
    wanted = {file_key(i) for i in file_ids}
    if not wanted:
        return
    have = set(
        (
            await session.execute(
                select(FILE_REFS.c.file_id).where(
                    FILE_REFS.c.conversation_id == conversation_id,
                    FILE_REFS.c.file_id.in_(sorted(wanted)),
                )
            )
        ).scalars()
    )
    rows = [{"file_id": f, "conversation_id": conversation_id} for f in sorted(wanted - have)]
    if rows:
        await session.execute(insert(FILE_REFS), rows)


async def set_refs(session: AsyncConnection, conversation_id: str, file_ids: Iterable[str]) -> None:
    """Make ``file_ids`` exactly the files ``conversation_id`` refers to (after a rewind, a
    clear or an import replaced its messages)."""
    wanted = {file_key(i) for i in file_ids}
    drop = delete(FILE_REFS).where(FILE_REFS.c.conversation_id == conversation_id)
    if wanted:
        drop = drop.where(FILE_REFS.c.file_id.not_in(sorted(wanted)))
    await session.execute(drop)
    await add_refs(session, conversation_id, wanted)


async def referring_conversations(session: AsyncConnection, file_id: str) -> list[str]:
    """The conversations whose messages refer to the file."""
    query = select(FILE_REFS.c.conversation_id).where(FILE_REFS.c.file_id == file_key(file_id))
    return sorted((await session.execute(query)).scalars())


async def count_refs(session: AsyncConnection, file_id: str) -> int:
    """How many conversations refer to the file."""
    query = select(func.count()).where(FILE_REFS.c.file_id == file_key(file_id))
    return int((await session.execute(query)).scalar_one())
