"""Database: SQLite set up for concurrent use, sessions, settings, the data directory."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from app.domain import MessageList, TextMessage
from app.settings import Settings
from app.storage import (
    ConversationRepository,
    Database,
    DatabaseUnavailable,
    SchemaNotMigrated,
    driver_said,
    is_transient,
)
from app.storage import database as database_module
from tests.storage.storage_support import backend_pid, terminate_backends


async def test_sqlite_connections_use_wal_and_foreign_keys_and_wait_in_the_driver(
    tmp_path: Path,
) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/pragmas.db")
    try:
        async with database.session() as session:
            pragmas = [
                (await session.execute(text(f"PRAGMA {name}"))).scalar_one()
                for name in ("journal_mode", "busy_timeout", "foreign_keys", "temp_store")
            ]
    finally:
        await database.dispose()
    # No busy timeout in SQLite itself: it would block the event loop (sqlite_inline waits).
    # Temporary storage (a savepoint's journal of the pages it changes) in memory: 2.
    assert pragmas == ["wal", 0, 1, 2]


async def test_a_writer_waits_for_another_process_lock_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None)  # "another process"
    try:
        async with database.transaction() as session:
            await session.execute(text("CREATE TABLE t (x INTEGER)"))
        other.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        async def write() -> None:
            async with database.transaction() as session:
                await session.execute(text("INSERT INTO t VALUES (1)"))

        ticker = asyncio.create_task(tick())
        writer = asyncio.create_task(write())
        await asyncio.sleep(0.3)
        assert not writer.done()  # waiting for the lock...
        assert ticks >= 20  # ...while the loop goes on
        other.execute("COMMIT")
        await asyncio.wait_for(writer, 2)
        ticker.cancel()
        assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    finally:
        other.close()
        await database.dispose()


async def test_a_lock_held_past_the_busy_timeout_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "stuck.db"
    database = Database(f"sqlite+aiosqlite:///{path}", busy_timeout_ms=200)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        async with database.transaction() as session:
            await session.execute(text("CREATE TABLE t (x INTEGER)"))
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError, match="locked"):
            async with database.transaction() as session:
                await session.execute(text("INSERT INTO t VALUES (1)"))
        other.execute("ROLLBACK")
        async with database.transaction() as session:  # the connection is still good
            await session.execute(text("INSERT INTO t VALUES (2)"))
    finally:
        other.close()
        await database.dispose()


async def test_the_sqlite_directory_is_created_on_demand(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "there.db"
    database = Database.from_settings(Settings(database_url=f"sqlite+aiosqlite:///{path}"))
    try:
        async with database.transaction() as session:
            await session.execute(text("CREATE TABLE t (x INTEGER)"))
    finally:
        await database.dispose()
    assert path.is_file()
    assert "there.db" in repr(database)


async def test_sqlite_write_transactions_queue_instead_of_failing(tmp_path: Path) -> None:
    """Two read-then-write transactions at once: with a plain BEGIN one would fail to upgrade."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/queue.db")
    try:
        async with database.transaction() as session:
            await session.execute(text("CREATE TABLE counter (n INTEGER)"))
            await session.execute(text("INSERT INTO counter VALUES (0)"))

        async def increment() -> None:
            async with database.transaction() as session:
                n = (await session.execute(text("SELECT n FROM counter"))).scalar_one()
                await asyncio.sleep(0.01)
                await session.execute(text("UPDATE counter SET n = :n"), {"n": n + 1})

        await asyncio.gather(*(increment() for _ in range(10)))
        async with database.session(readonly=True) as session:
            assert (await session.execute(text("SELECT n FROM counter"))).scalar_one() == 10
    finally:
        await database.dispose()


async def test_a_readonly_session_reads_while_a_writer_holds_the_lock(
    database: Database,
) -> None:
    async with database.transaction() as session:
        record = await ConversationRepository(session, owner="alice").create(MessageList(), {}, {})
    async with database.session() as writer:
        await ConversationRepository(writer, owner="alice").acquire_lease(record.id, "run-1", 60)
        async with database.session(readonly=True) as reader:
            seen = await asyncio.wait_for(
                ConversationRepository(reader, owner="alice").get(record.id), 2
            )
        assert seen.lease_run_id is None  # the writer has not committed
        await writer.commit()


async def test_a_readonly_session_reads_one_snapshot_while_a_rewind_commits(
    database: Database,
) -> None:
    """On PostgreSQL each statement took its own snapshot: a rewind committed between the
    count and the rows made `GET …/messages` a 500 (`stored_data_error`, rows "missing")."""
    messages = MessageList([TextMessage(f"m{i}") for i in range(5)])
    async with database.transaction() as session:
        record = await ConversationRepository(session, owner="alice").create(messages, {}, {})
    async with database.session(readonly=True) as reader:
        repo = ConversationRepository(reader, owner="alice")
        assert (await repo.get(record.id)).message_count == 5
        async with database.transaction() as writer:
            await ConversationRepository(writer, owner="alice").rewind(record.id, 1)
        assert list(await repo.load_messages(record.id)) == list(messages)
        assert (await repo.load_page(record.id, 2, 10)) == (list(messages)[2:], 5)
    async with database.session(readonly=True) as reader:
        assert (
            len(await ConversationRepository(reader, owner="alice").load_messages(record.id)) == 1
        )


async def test_a_session_left_with_an_error_rolls_back(database: Database) -> None:
    with pytest.raises(RuntimeError):
        async with database.transaction() as session:
            await ConversationRepository(session, owner="alice").create(MessageList(), {}, {})
            raise RuntimeError("boom")
    async with database.session() as session:
        assert await ConversationRepository(session, owner="alice").list(10) == ([], None)


async def test_a_pooled_connection_that_died_while_idle_is_replaced(
    database: Database, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite connections do not die with a server")
    monkeypatch.setattr(database_module, "IDLE_PING_SECONDS", 0.0)
    async with database.session() as session:
        pid = await backend_pid(session)
    await terminate_backends(database, pid)
    # The pooled connection is dead: the next sessions still work, on a new connection.
    for _ in range(3):
        async with database.session() as session:
            assert (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one() != pid


async def test_no_database_is_database_unavailable_not_a_driver_error() -> None:
    """Nothing listens on the port: the session says so in the storage layer's terms (the API's
    503 ``database_unavailable``), its cause kept for the log."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    database = Database(f"postgresql+asyncpg://parley@127.0.0.1:{port}/parley")
    try:
        for readonly in (False, True):
            with pytest.raises(DatabaseUnavailable) as caught:
                async with database.session(readonly=readonly):
                    pass
            assert isinstance(caught.value.__cause__, OSError)
            assert is_transient(caught.value)
    finally:
        await database.dispose()


async def test_a_connection_lost_mid_transaction_is_database_unavailable(
    database: Database, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite connections do not die with a server")
    with pytest.raises(DatabaseUnavailable):
        async with database.transaction() as session:
            await terminate_backends(database, await backend_pid(session))
            await ConversationRepository(session, owner="alice").create(MessageList(), {}, {})
    async with database.session() as session:  # the next session has a new connection
        assert await ConversationRepository(session, owner="alice").list(10) == ([], None)
    # an error that is the caller's (not the connection's) is left as it is
    with pytest.raises(ProgrammingError):
        async with database.session() as session:
            await session.execute(text("SELEC 1"))


async def test_a_table_the_database_lacks_is_schema_not_migrated(database: Database) -> None:
    """A statement on a table (or column) the database does not have: a schema behind the
    code's, the operator's to migrate — a DatabaseUnavailable (the API's 503), not a driver
    error (a 500); the driver's words kept as its cause, one line for the log."""
    for statement in ("SELECT * FROM no_such_table", "SELECT no_such_column FROM conversations"):
        for readonly in (False, True):
            with pytest.raises(SchemaNotMigrated) as caught:
                async with database.session(readonly=readonly) as session:
                    await session.execute(text(statement))
            assert isinstance(caught.value, DatabaseUnavailable)
            said = driver_said(caught.value.__cause__ or caught.value)
            assert "\n" not in said and "[SQL" not in said
            assert "no_such" in said


async def test_a_statements_values_stay_out_of_its_errors_text(database: Database) -> None:
    """What a refused statement carried (stored text) is not in its error's text, which the
    log prints: SQLAlchemy's ``hide_parameters``."""
    with pytest.raises(DBAPIError) as caught:
        async with database.transaction() as session:
            await session.execute(
                text("INSERT INTO conversations (id) VALUES (:id)"), {"id": "secret words"}
            )
    assert "secret words" not in str(caught.value)
