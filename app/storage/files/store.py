"""``FileStore``: an owner's files — put (sniffed, limited, deduplicated), get, resolve, read,
open, list, delete — with their bytes in SQL or in an S3-compatible store.

Imports SQLAlchemy, app.domain.media (what the bytes are), the settings and app.storage.
Each method is its own transaction. Bytes stream through in ``CHUNK_BYTES`` pieces: an upload
is never held whole in memory. In SQL the chunks are written in the transaction that records
the file, so a refusal midway (too large, not what it said) rolls everything back; in S3 the
object is written first and removed again if the file is refused.

Dedupe: the same bytes (sha256) put twice by one owner are stored once. The second put makes
a new file (its own id, name and purpose) on the first one's blob; a blob goes with the last
file on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.media import (
    IMAGE_TYPES,
    SNIFF_BYTES,
    Inspection,
    Sniffed,
    UnsupportedMedia,
    sniff,
)
from app.settings import Settings
from app.storage.database import Database
from app.storage.errors import StorageError
from app.storage.files.errors import FileEmpty, FileInUse, FileNotFound, FileRefused, FileTooLarge
from app.storage.files.records import (
    CHUNK_BYTES,
    FileRecord,
    file_key,
    new_file_id,
    to_file_record,
)
from app.storage.files.refs import referring_conversations
from app.storage.files.tables import FILE_BLOBS, FILE_CHUNKS, FILES
from app.storage.paging import newest_first
from app.storage.records import utcnow

if TYPE_CHECKING:
    from app.storage.files.s3 import S3Blobs

Data = bytes | AsyncIterator[bytes]
MAX_NAME_CHARS = 255


class _Meter:
    """Counts, hashes and inspects the bytes as they pass; raises at the first that is refused."""

    def __init__(self, name: str, sniffed: Sniffed, limit: int, from_message: bool) -> None:
        self.name, self.sniffed, self.limit = name, sniffed, limit
        self.from_message = from_message
        self.size = 0
        self._sha = hashlib.sha256()
        self._inspection = Inspection(sniffed)

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.size += len(chunk)
            if self.size > self.limit:
                raise FileTooLarge(self.sniffed.media_type, self.limit)
            self._sha.update(chunk)
            try:
                self._inspection.feed(chunk)
            except UnsupportedMedia as exc:
                raise FileRefused(self.name, str(exc)) from None
            yield chunk

    def finish(self) -> str:
        """The sha256 of all the bytes, once the end is checked."""
        try:
            self._inspection.finish(self.size)
        except UnsupportedMedia as exc:
            raise FileRefused(self.name, str(exc)) from None
        return self._sha.hexdigest()


async def _rechunk(data: Data) -> AsyncIterator[bytes]:
    """The data in pieces of ``CHUNK_BYTES`` (the last may be shorter)."""
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data)
        for at in range(0, len(view), CHUNK_BYTES):
            yield bytes(view[at : at + CHUNK_BYTES])
        return
    buffer = bytearray()
    async for piece in data:
        buffer += piece
        while len(buffer) >= CHUNK_BYTES:
            yield bytes(buffer[:CHUNK_BYTES])
            del buffer[:CHUNK_BYTES]
    if buffer:
        yield bytes(buffer)


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


def clean_name(name: str | None) -> str:
    """A file name to store: its last path part, without controls, at most 255 characters."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if c.isprintable()).strip()
    return base[-MAX_NAME_CHARS:] or "file"


def _s3_blobs(settings: Settings) -> S3Blobs:
    """The object store: boto3 (some 20 MB of memory, 0.15 s to import) loaded only when a
    deployment names one."""
    from app.storage.files.s3 import S3Blobs

    return S3Blobs(settings)


class FileStore:
    """Every owner's files; each method names the owner, and another owner's file is not found."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self.database = database
        self.settings = settings
        self.s3 = _s3_blobs(settings) if settings.file_s3_location() else None

    def limit_for(self, media_type: str) -> int:
        """The most bytes a file of this kind may hold."""
        if media_type in IMAGE_TYPES:
            return self.settings.file_max_image_bytes
        return self.settings.file_max_document_bytes

    # --- writing -------------------------------------------------------------------------------

    async def put(
        self,
        owner: str,
        data: Data,
        name: str | None,
        declared_type: str | None = None,
        *,
        purpose: str | None = None,
        from_message: bool = False,
    ) -> FileRecord:
        """Store a file: its kind read from the bytes (FileRefused if none accepted, or if its
        name or declared type says otherwise), its size checked (FileTooLarge; FileEmpty), its
        bytes stored once per owner. Nothing is stored when it raises.

        ``from_message``: Parley makes the file for a message (a data URL, an import, a model's
        image); it is kept only while a conversation refers to it (``sweep``)."""
        name = clean_name(name)
        chunks = _rechunk(data)
        head = b""
        async for chunk in chunks:
            head = chunk  # CHUNK_BYTES == SNIFF_BYTES: the first piece is the head
            break
        if not head:
            raise FileEmpty(name)
        try:
            sniffed = sniff(head[:SNIFF_BYTES], name, declared_type)
        except UnsupportedMedia as exc:
            raise FileRefused(name, str(exc)) from None
        meter = _Meter(name, sniffed, self.limit_for(sniffed.media_type), from_message)
        stream = meter.through(_prepend(head, chunks))
        blob_id = new_file_id()
        if self.s3 is None:
            return await self._put_sql(owner, name, purpose, blob_id, meter, stream)
        return await self._put_s3(owner, name, purpose, blob_id, meter, stream)

    async def _put_sql(
        self,
        owner: str,
        name: str,
        purpose: str | None,
        blob_id: str,
        meter: _Meter,
        stream: AsyncIterator[bytes],
    ) -> FileRecord:
        async with self.database.transaction() as session:
            await self._new_blob(session, owner, blob_id, "sql")
            seq = 0
            async for chunk in stream:
                await session.execute(
                    insert(FILE_CHUNKS).values(blob_id=blob_id, seq=seq, data=chunk)
                )
                seq += 1
            sha256 = meter.finish()
            blob_id, _ = await self._settle(session, owner, blob_id, sha256, meter.size)
            return await self._new_file(session, owner, name, purpose, blob_id, meter, sha256)

    async def _put_s3(
        self,
        owner: str,
        name: str,
        purpose: str | None,
        blob_id: str,
        meter: _Meter,
        stream: AsyncIterator[bytes],
    ) -> FileRecord:
        assert self.s3 is not None
        await self.s3.write(blob_id, stream)
        kept = False
        try:
            sha256 = meter.finish()
            async with self.database.transaction() as session:
                await self._new_blob(session, owner, blob_id, "s3")
                used, duplicate = await self._settle(session, owner, blob_id, sha256, meter.size)
                record = await self._new_file(session, owner, name, purpose, used, meter, sha256)
            kept = not duplicate
            return record
        finally:
            if not kept:
                await self.s3.delete(blob_id)

    async def _new_blob(
        self, session: AsyncConnection, owner: str, blob_id: str, store: str
    ) -> None:
        row = {"id": blob_id, "owner": owner, "sha256": None, "size": 0, "store": store}
        await session.execute(insert(FILE_BLOBS).values(**row, created_at=utcnow()))

    async def _settle(
        self, session: AsyncConnection, owner: str, blob_id: str, sha256: str, size: int
    ) -> tuple[str, bool]:
        """The blob the file's bytes are: an earlier one of the owner's with the same sha256
        (the new one is dropped: True), else the new one, now named by its sha256 (False)."""
        same = select(FILE_BLOBS.c.id).where(
            FILE_BLOBS.c.owner == owner, FILE_BLOBS.c.sha256 == sha256
        )
        existing = (await session.execute(same)).scalar()
        if existing is None:
            name_it = (
                update(FILE_BLOBS)
                .where(FILE_BLOBS.c.id == blob_id)
                .values(sha256=sha256, size=size)
            )
            if self.database.is_sqlite:  # one writer at a time: no one else can name it
                await session.execute(name_it)
                return blob_id, False
            try:
                async with session.begin_nested():
                    await session.execute(name_it)
                return blob_id, False
            except IntegrityError:  # a concurrent put of the same bytes committed first
                existing = (await session.execute(same)).scalar_one()
        await session.execute(delete(FILE_BLOBS).where(FILE_BLOBS.c.id == blob_id))
        return str(existing), True

    async def _new_file(
        self,
        session: AsyncConnection,
        owner: str,
        name: str,
        purpose: str | None,
        blob_id: str,
        meter: _Meter,
        sha256: str,
    ) -> FileRecord:
        record = FileRecord(
            id=new_file_id(),
            owner=owner,
            name=name,
            media_type=meter.sniffed.media_type,
            size=meter.size,
            sha256=sha256,
            created_at=utcnow(),
            purpose=purpose,
            width=meter.sniffed.width,
            height=meter.sniffed.height,
            from_message=meter.from_message,
        )
        values = {
            f: getattr(record, f)
            for f in ("id", "owner", "name", "media_type", "size", "sha256", "created_at")
        }
        values |= {"purpose": purpose, "width": record.width, "height": record.height}
        values["from_message"] = record.from_message
        await session.execute(insert(FILES).values(**values, blob_id=blob_id))
        return record

    # --- reading -------------------------------------------------------------------------------

    async def get(self, owner: str, file_id: str) -> FileRecord:
        """The owner's file; FileNotFound for an unknown id or another owner's."""
        return (await self.resolve(owner, [file_id]))[file_key(file_id)]

    async def resolve(self, owner: str, file_ids: Iterable[str]) -> dict[str, FileRecord]:
        """The owner's files by id (the stored spelling, as ``FileRecord.id``); FileNotFound
        naming the first id that is unknown or another owner's."""
        given_ids = list(file_ids)
        keys = [file_key(i) for i in given_ids]
        if not keys:
            return {}
        query = select(FILES).where(FILES.c.owner == owner, FILES.c.id.in_(sorted(set(keys))))
        async with self.database.session(readonly=True) as session:
            rows = (await session.execute(query)).mappings().all()
        found = {row["id"]: to_file_record(row) for row in rows}
        for given, key in zip(given_ids, keys, strict=True):
            if key not in found:
                raise FileNotFound(str(given))
        return found

    async def list(
        self, owner: str, limit: int, cursor: str | None = None
    ) -> tuple[list[FileRecord], str | None]:
        """A page of the owner's files, newest first, and the next page's cursor."""
        async with self.database.session(readonly=True) as session:
            rows, next_cursor = await newest_first(
                session, FILES, FILES.c.owner == owner, limit, cursor
            )
        return [to_file_record(row) for row in rows], next_cursor

    async def _blob_of(self, owner: str, file_id: str) -> tuple[str, str]:
        query = (
            select(FILE_BLOBS.c.id, FILE_BLOBS.c.store)
            .join(FILES, FILES.c.blob_id == FILE_BLOBS.c.id)
            .where(FILES.c.owner == owner, FILES.c.id == file_key(file_id))
        )
        async with self.database.session(readonly=True) as session:
            row = (await session.execute(query)).first()
        if row is None:
            raise FileNotFound(file_id)
        return str(row[0]), str(row[1])

    async def open(self, owner: str, file_id: str) -> AsyncIterator[bytes]:
        """The file's bytes, a chunk at a time (FileNotFound before the first)."""
        blob_id, store = await self._blob_of(owner, file_id)
        return self._chunks(blob_id, store)

    async def _chunks(self, blob_id: str, store: str) -> AsyncIterator[bytes]:
        if store == "s3":
            if self.s3 is None:
                raise StorageError(f"blob {blob_id} is in S3, but no s3:// file_store is set")
            async for chunk in self.s3.read(blob_id, CHUNK_BYTES):
                yield chunk
            return
        seq = 0
        while True:
            query = select(FILE_CHUNKS.c.data).where(
                FILE_CHUNKS.c.blob_id == blob_id, FILE_CHUNKS.c.seq == seq
            )
            async with self.database.session(readonly=True) as session:
                data = (await session.execute(query)).scalar()
            if data is None:
                return
            yield bytes(data)
            seq += 1

    async def read(self, owner: str, file_id: str) -> bytes:
        """The file's bytes, whole (for a model call: they are bounded by the limits)."""
        return b"".join([chunk async for chunk in await self.open(owner, file_id)])

    # --- deleting ------------------------------------------------------------------------------

    async def delete(self, owner: str, file_id: str) -> None:
        """Delete the owner's file; FileInUse while a conversation's messages refer to it.
        Its bytes go with the last file on them."""
        key = file_key(file_id)
        async with self.database.transaction() as session:
            found = select(FILES.c.blob_id).where(FILES.c.owner == owner, FILES.c.id == key)
            blob_id = (await session.execute(found)).scalar()
            if blob_id is None:
                raise FileNotFound(file_id)
            conversations = await referring_conversations(session, key)
            if conversations:
                raise FileInUse(file_id, conversations)
            await session.execute(delete(FILES).where(FILES.c.id == key))
            store = await self._drop_blob_if_unused(session, blob_id)
        if store == "s3" and self.s3 is not None:
            await self.s3.delete(blob_id)

    async def _drop_blob_if_unused(self, session: AsyncConnection, blob_id: str) -> str | None:
        """Delete the blob (its chunks with it) when no file is on it; returns its store then."""
        used = select(exists().where(FILES.c.blob_id == blob_id))
        if (await session.execute(used)).scalar():
            return None
        gone = delete(FILE_BLOBS).where(FILE_BLOBS.c.id == blob_id).returning(FILE_BLOBS.c.store)
        store = (await session.execute(gone)).scalar()
        return None if store is None else str(store)

    async def blob_count(self, owner: str) -> int:
        """How many distinct contents the owner has stored (for tests and operators)."""
        query = select(func.count()).where(
            FILE_BLOBS.c.owner == owner, FILE_BLOBS.c.sha256.is_not(None)
        )
        async with self.database.session(readonly=True) as session:
            return int((await session.execute(query)).scalar_one())
