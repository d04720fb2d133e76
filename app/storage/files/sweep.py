"""The sweep: files Parley made from messages (``from_message``) that no conversation refers to
any longer — their conversations deleted, their messages rewound away — are deleted after a
grace period (``file_orphan_grace_seconds``: the time between storing such a file and storing
the message that refers to it), every ``prune_interval_seconds``.

Imports SQLAlchemy and the file store. Uploaded files are never swept: their owner lists and
deletes them. Each file goes through ``FileStore.delete``, so a reference added meanwhile keeps
it (FileInUse), and its bytes go with the last file on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from sqlalchemy import exists, select

from app.storage.files.errors import FileInUse, FileNotFound
from app.storage.files.store import FileStore
from app.storage.files.tables import FILE_REFS, FILES
from app.storage.records import utcnow

BATCH = 100
log = logging.getLogger(__name__)


async def sweep(store: FileStore, cutoff: datetime) -> int:
    """Delete the unreferenced files made from messages before ``cutoff``; how many went."""
    query = (
        select(FILES.c.owner, FILES.c.id)
        .where(
            FILES.c.from_message.is_(True),
            FILES.c.created_at < cutoff,
            ~exists().where(FILE_REFS.c.file_id == FILES.c.id),
        )
        .limit(BATCH)
    )
    swept = 0
    while True:
        async with store.database.session(readonly=True) as session:
            rows = (await session.execute(query)).all()
        for owner, file_id in rows:
            with contextlib.suppress(FileInUse, FileNotFound):  # referred to again, or gone
                await store.delete(owner, file_id)
                swept += 1
        if len(rows) < BATCH:
            return swept


class FileSweeper:
    """Runs ``sweep`` every ``prune_interval_seconds`` while the process serves."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="parley-file-sweep")

    async def _run(self) -> None:
        settings = self.store.settings
        while True:
            await asyncio.sleep(settings.prune_interval_seconds)
            cutoff = utcnow() - timedelta(seconds=settings.file_orphan_grace_seconds)
            try:
                swept = await sweep(self.store, cutoff)
            except Exception:  # the database is away: the next round tries again
                log.warning("the file sweep failed", exc_info=True)
                continue
            if swept:
                log.info("deleted %d files no message refers to any longer", swept)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
