"""The use cases on an owner's files: upload, read, list, delete (docs/files.md).

May import the runs layer (``Services``) and app.storage.files. The bytes go straight through
to ``FileStore``, a chunk at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.runs.services import Services
from app.storage.files import FileRecord


class FileService:
    """One owner's files."""

    def __init__(self, services: Services, owner: str) -> None:
        self.store = services.files
        self.owner = owner

    async def upload(
        self,
        name: str | None,
        declared_type: str | None,
        chunks: AsyncIterator[bytes],
        purpose: str | None = None,
    ) -> FileRecord:
        """Store an uploaded file (FileRefused, FileTooLarge, FileEmpty: nothing stored)."""
        return await self.store.put(self.owner, chunks, name, declared_type, purpose=purpose)

    async def get(self, file_id: str) -> FileRecord:
        return await self.store.get(self.owner, file_id)

    async def content(self, file_id: str) -> tuple[FileRecord, AsyncIterator[bytes]]:
        """The file and its bytes, a chunk at a time (FileNotFound before any)."""
        record = await self.store.get(self.owner, file_id)
        return record, await self.store.open(self.owner, file_id)

    async def list(self, limit: int, cursor: str | None) -> tuple[list[FileRecord], str | None]:
        return await self.store.list(self.owner, limit, cursor)

    async def delete(self, file_id: str) -> None:
        await self.store.delete(self.owner, file_id)
