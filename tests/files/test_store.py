"""FileStore on both databases: put, dedupe, owner scope, resolve, read, delete, references."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import func, insert, select

from app.settings import Settings
from app.storage import Database, utcnow
from app.storage.files import (
    FILE_BLOBS,
    FILE_CHUNKS,
    FILES,
    FileEmpty,
    FileInUse,
    FileNotFound,
    FileRefused,
    FileStore,
    FileTooLarge,
    add_refs,
    set_refs,
    sweep,
)
from app.storage.tables import CONVERSATIONS
from tests.files import samples


@pytest.fixture
def store(database: Database, database_url: str) -> FileStore:
    return FileStore(database, Settings(database_url=database_url, file_max_image_bytes=4096))


async def counts(database: Database) -> tuple[int, int, int]:
    async with database.session(readonly=True) as session:
        values = [
            (await session.execute(select(func.count()).select_from(t))).scalar_one()
            for t in (FILES, FILE_BLOBS, FILE_CHUNKS)
        ]
    return values[0], values[1], values[2]


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


async def test_a_file_is_stored_read_back_and_listed(store: FileStore) -> None:
    data = samples.pdf(3 * (1 << 20) + 123)  # several chunks
    record = await store.put("alice", pieces(data, 70_000), "report.pdf", "application/pdf")
    assert (record.media_type, record.size, record.name) == (
        "application/pdf",
        len(data),
        "report.pdf",
    )
    assert await store.read("alice", record.id) == data
    chunks = [len(c) async for c in await store.open("alice", record.id)]
    assert chunks == [1 << 20] * 3 + [123]
    page, cursor = await store.list("alice", 10)
    assert [r.id for r in page] == [record.id] and cursor is None


async def test_an_image_knows_its_size(store: FileStore) -> None:
    record = await store.put("alice", samples.jpeg(640, 480), "cat.jpg")
    assert (record.media_type, record.width, record.height) == ("image/jpeg", 640, 480)


async def test_the_same_bytes_twice_are_stored_once(store: FileStore, database: Database) -> None:
    first = await store.put("alice", samples.png(), "a.png")
    second = await store.put("alice", samples.png(), "b.png")
    other = await store.put("bob", samples.png(), "a.png")
    assert len({first.id, second.id, other.id}) == 3
    assert first.sha256 == second.sha256 == other.sha256
    assert await counts(database) == (3, 2, 2)  # one blob per owner
    await store.delete("alice", first.id)
    assert await store.read("alice", second.id) == samples.png()
    await store.delete("alice", second.id)
    assert await counts(database) == (1, 1, 1)


async def test_another_owners_file_is_not_found(store: FileStore) -> None:
    record = await store.put("alice", samples.gif(), "a.gif")
    for call in (store.get, store.read, store.delete):
        with pytest.raises(FileNotFound):
            await call("bob", record.id)
    with pytest.raises(FileNotFound, match="nope"):
        await store.resolve("alice", [record.id, "nope"])
    assert list(await store.resolve("alice", [record.id.upper()])) == [record.id]


@pytest.mark.parametrize(
    ("data", "name", "error"),
    [
        (b"", "empty.txt", FileEmpty),
        (samples.png(), "report.pdf", FileRefused),
        (samples.SVG, "x.svg", FileRefused),
        (samples.pdf() + samples.ZIP_END, "a.pdf", FileRefused),
        (samples.jpeg(padding=5000), "big.jpg", FileTooLarge),  # over the 4096-byte image limit
    ],
)
async def test_a_refused_file_leaves_nothing(
    store: FileStore, database: Database, data: bytes, name: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await store.put("alice", data, name)
    assert await counts(database) == (0, 0, 0)


async def test_a_referenced_file_is_kept_until_its_conversation_goes(
    store: FileStore, database: Database
) -> None:
    record = await store.put("alice", samples.webp(), "a.webp")
    async with database.transaction() as session:
        await session.execute(
            insert(CONVERSATIONS).values(
                id="c" * 32,
                owner="alice",
                config={},
                metadata={},
                version=1,
                message_count=0,
                created_at=record.created_at,
                updated_at=record.created_at,
            )
        )
        await add_refs(session, "c" * 32, [record.id, record.id])
    with pytest.raises(FileInUse):
        await store.delete("alice", record.id)
    async with database.transaction() as session:
        await set_refs(session, "c" * 32, [])
    await store.delete("alice", record.id)
    assert await counts(database) == (0, 0, 0)


async def test_the_sweep_deletes_only_unreferenced_files_made_from_messages(
    store: FileStore, database: Database
) -> None:
    uploaded = await store.put("alice", samples.gif(), "kept.gif")
    made = await store.put("alice", samples.png(), "pasted.png", from_message=True)
    referred = await store.put("alice", samples.jpeg(), "in-use.jpg", from_message=True)
    async with database.transaction() as session:
        await session.execute(
            insert(CONVERSATIONS).values(
                id="d" * 32,
                owner="alice",
                config={},
                metadata={},
                version=1,
                message_count=0,
                created_at=made.created_at,
                updated_at=made.created_at,
            )
        )
        await add_refs(session, "d" * 32, [referred.id])
    assert await sweep(store, made.created_at - timedelta(seconds=1)) == 0  # within the grace
    assert await sweep(store, utcnow() + timedelta(seconds=1)) == 1
    left = {r.id for r in (await store.list("alice", 10))[0]}
    assert left == {uploaded.id, referred.id}
    async with database.transaction() as session:  # the conversation goes: its refs with it
        await session.execute(CONVERSATIONS.delete())
    assert await sweep(store, utcnow() + timedelta(seconds=1)) == 1
    assert {r.id for r in (await store.list("alice", 10))[0]} == {uploaded.id}
    assert await counts(database) == (1, 1, 1)


async def test_the_same_bytes_put_at_once_are_stored_once(
    store: FileStore, database: Database
) -> None:
    data = samples.pdf(300_000)
    records = await asyncio.gather(*(store.put("alice", data, f"{i}.pdf") for i in range(5)))
    assert len({r.id for r in records}) == 5
    assert await counts(database) == (5, 1, 1)
    for record in records:
        assert await store.read("alice", record.id) == data
