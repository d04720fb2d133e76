"""Direct statements: what SQLAlchemy's own execution gives, in its transaction, with its errors."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import greenlet
import pytest
from sqlalchemy import bindparam, exists, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError, StatementError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.storage import Database, is_transient
from app.storage.driver import Direct, SavepointChain
from app.storage.tables import CONVERSATIONS, MESSAGES, RUN_EVENTS
from tests.storage.storage_support import backend_pid, terminate_backends

_C, _M = CONVERSATIONS.c, MESSAGES.c
_ROW = select(
    CONVERSATIONS,
    exists().where(_M.conversation_id == _C.id, _M.pending_call_id.is_not(None)).label("pending"),
).where(_C.id == bindparam("key"))
_BUMP = (
    update(CONVERSATIONS)
    .where(_C.id == bindparam("key"))
    .values(
        version=bindparam("new_version"),
        config=bindparam("new_config"),
        lease_expires_at=bindparam("new_expires"),
    )
    .returning(*CONVERSATIONS.c)
)
NOW = datetime(2026, 11, 25, 12, 30, 15, 123456, tzinfo=UTC)


def conversation(key: str, **values: Any) -> dict[str, Any]:
    return {
        "id": key,
        "owner": "alice",
        "created_at": NOW,
        "updated_at": NOW,
        "config": {"model": "m", "temperature": 0.5, "tools": [{"name": "é"}]},
        "metadata": {},
        "version": 1,
        "message_count": 0,
        "lease_run_id": None,
        "lease_expires_at": None,
        **values,
    }


async def read_in_new_session(database: Database) -> str:
    """A conversation's row read through Direct in a session of its own: "ok", "transient" (a
    lost connection) or the driver's error class."""
    async with database.session() as session:
        try:
            await Direct(_ROW).rows(session, {"key": "g" * 32})
        except DBAPIError as exc:
            return "transient" if is_transient(exc) else type(exc.orig).__name__
    return "ok"


async def test_rows_and_values_are_those_of_sqlalchemy(database: Database) -> None:
    expires = NOW + timedelta(seconds=6)
    async with database.transaction() as session:
        await Direct(insert(CONVERSATIONS)).execute(
            session, conversation("a" * 32, lease_run_id="r", lease_expires_at=expires)
        )
        await session.execute(insert(CONVERSATIONS), conversation("b" * 32))
        await Direct(insert(MESSAGES)).execute(
            session,
            [
                {"conversation_id": "a" * 32, "idx": i, "data": f"m{i}", "pending_call_id": p}
                for i, p in enumerate([None, "call-1"])
            ],
        )
    async with database.session() as session:
        for key in ("a" * 32, "b" * 32):
            direct = await Direct(_ROW).rows(session, {"key": key})
            usual = [dict(row) for row in (await session.execute(_ROW, {"key": key})).mappings()]
            assert direct == usual and len(direct) == 1
        row = (await Direct(_ROW).rows(session, {"key": "a" * 32}))[0]
        assert row["lease_expires_at"] == expires and row["created_at"].tzinfo is not None
        assert row["config"]["tools"] == [{"name": "é"}] and row["pending"] is True
        changed = await Direct(_BUMP).rows(
            session,
            {"key": "b" * 32, "new_version": 2, "new_config": {"x": [1]}, "new_expires": NOW},
        )
        await session.commit()
    assert changed[0]["version"] == 2 and changed[0]["config"] == {"x": [1]}
    assert changed[0]["lease_expires_at"] == NOW
    async with database.session() as session:
        stored = (await session.execute(_ROW, {"key": "b" * 32})).mappings().one()
        assert {**stored} == {**changed[0], "pending": False}


async def test_each_value_comes_from_where_sqlalchemy_takes_it(database: Database) -> None:
    """The caller's keys, the statement's own values, and SQLAlchemy's error for a value no
    one gave."""
    change = (
        update(CONVERSATIONS)
        .where(_C.id == bindparam("key"))
        .values(version=7, metadata=bindparam("meta"), message_count=_C.message_count + 2)
    )
    async with database.session() as session:
        await Direct(insert(CONVERSATIONS)).execute(session, conversation("m" * 32))
        changed = await Direct(change).execute(session, {"key": "m" * 32, "meta": {"é": [1]}})
        (row,) = await Direct(_ROW).rows(session, {"key": "m" * 32})
        with pytest.raises(StatementError, match="required for bind parameter 'key'"):
            await Direct(_ROW).rows(session, {})
    assert changed == 1
    assert (row["version"], row["metadata"], row["message_count"]) == (7, {"é": [1]}, 2)


async def test_a_direct_statement_runs_in_the_sessions_transaction(database: Database) -> None:
    async with database.session() as session:  # never committed: rolled back when it closes
        await Direct(insert(CONVERSATIONS)).execute(session, conversation("c" * 32))
        assert session.in_transaction()
        assert await Direct(_ROW).rows(session, {"key": "c" * 32})
    async with database.session() as session:
        assert await Direct(_ROW).rows(session, {"key": "c" * 32}) == []
        assert await Direct(update(CONVERSATIONS).values(version=9)).execute(session, {}) == 0


async def test_errors_are_sqlalchemys_and_the_session_stays_usable(database: Database) -> None:
    async with database.transaction() as session:
        await Direct(insert(CONVERSATIONS)).execute(session, conversation("d" * 32))
    async with database.session() as session:
        with pytest.raises(IntegrityError) as raised:
            await Direct(insert(CONVERSATIONS)).execute(session, conversation("d" * 32))
        assert not is_transient(raised.value)
        await session.rollback()
        assert len(await Direct(_ROW).rows(session, {"key": "d" * 32})) == 1


async def test_a_statement_in_a_begun_transaction_needs_no_greenlet(
    database: Database,
) -> None:
    """Once the transaction has begun, a statement runs with no greenlet of ``run_sync``'s —
    at once on SQLite (on the loop's thread), awaited on asyncpg's adapted cursor — and fails
    as SQLAlchemy's execution does; so do a chain's savepoints."""
    insert_one = Direct(insert(CONVERSATIONS))
    switches: list[str] = []

    def trace(event: str, args: Any) -> None:
        switches.append(event)

    async def switched(statement: Any) -> int:
        switches.clear()
        previous = greenlet.settrace(trace)
        try:
            await statement
        finally:
            greenlet.settrace(previous)
        return len(switches)

    async with database.session() as session:
        begins = await switched(Direct(_ROW).rows(session, {"key": "j" * 32}))
        at_once = await switched(insert_one.execute(session, conversation("j" * 32)))
        chain = SavepointChain(session)
        await chain.run(lambda s: insert_one.execute(s, conversation("j" * 32)))  # refused
        many = [conversation(k * 32) for k in "kl"]
        chained = await switched(chain.run(lambda s: insert_one.execute(s, many)))
        chained += await switched(chain.finish())
        assert [type(o) for o in chain.outcomes] == [IntegrityError, int]
        with pytest.raises(IntegrityError):
            await insert_one.execute(session, conversation("j" * 32))
        await session.rollback()
    assert begins > 0  # the first begins the transaction, in run_sync
    assert at_once == 0 and chained == 0


async def test_on_sqlite_a_statement_that_finds_the_lock_taken_waits_without_blocking(
    database: Database,
) -> None:
    """A statement run at once that finds another process holding the write lock did nothing:
    it runs again the usual way, which waits for the lock with the loop free."""
    if not database.is_sqlite:
        pytest.skip("SQLite's lock")
    other = Database(database.url.render_as_string(hide_password=False))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    try:
        async with other.session() as holder:
            await holder.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: the write lock, held
            # a deferred transaction (a reader's) that then writes: it needs the lock
            async with database.session(readonly=True) as session:
                await session.execute(text("SELECT 1"))
                asyncio.get_running_loop().call_later(
                    0.2, lambda: asyncio.ensure_future(holder.rollback())
                )
                began = time.monotonic()
                assert (
                    await Direct(insert(CONVERSATIONS)).execute(session, conversation("k" * 32))
                    == 1
                )
                waited = time.monotonic() - began
                await session.rollback()
    finally:
        ticker.cancel()
        await other.dispose()
    assert waited >= 0.15
    assert ticks >= 10  # the loop went on meanwhile


async def test_statements_it_cannot_run_as_they_are_are_refused(database: Database) -> None:
    expanding = select(_C.id).where(_C.id.in_(bindparam("keys", expanding=True)))
    async with database.session() as session:
        with pytest.raises(ValueError, match="not a statement Direct runs"):
            await Direct(expanding).rows(session, {"keys": ["a"]})
        with pytest.raises(ValueError, match="not a statement Direct runs"):  # a Python default
            row = {"run_id": "x", "seq": 1, "name": "n", "data": "{}"}  # no count: default 1
            await Direct(insert(RUN_EVENTS)).execute(session, row)


async def test_a_value_its_type_refuses_is_a_statement_error(database: Database) -> None:
    naive = conversation("f" * 32, created_at=datetime(2026, 1, 1))  # UTCDateTime needs a zone
    async with database.session() as session:
        with pytest.raises(StatementError):
            await Direct(insert(CONVERSATIONS)).execute(session, naive)


async def test_after_a_schema_change_a_connection_prepares_its_statements_again(
    database_url: str, backend: str
) -> None:
    """asyncpg keeps prepared statements per connection: after another process changes the
    schema, one use fails, as through SQLAlchemy, and the next prepares anew."""
    if backend != "postgres":
        pytest.skip("SQLite prepares again by itself")
    database = Database(database_url, engine_options={"pool_size": 1, "max_overflow": 0})
    other = create_async_engine(database.url, poolclass=NullPool)
    alter = "ALTER TABLE conversations ALTER COLUMN lease_run_id TYPE {}"
    try:
        async with database.session() as session:
            assert await Direct(_ROW).rows(session, {"key": "g" * 32}) == []
        async with other.begin() as connection:
            await connection.execute(text(alter.format("VARCHAR(80)")))
        outcomes = [await read_in_new_session(database) for _ in range(3)]
        assert outcomes[1:] == ["ok", "ok"], outcomes
    finally:
        async with other.begin() as connection:
            await connection.execute(text(alter.format("VARCHAR(64)")))
        await other.dispose()
        await database.dispose()


async def test_a_lost_connection_is_invalidated_and_transient(
    database: Database, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite connections do not die with a server")
    async with database.session() as session:
        await terminate_backends(database, await backend_pid(session))
        with pytest.raises(Exception) as raised:
            await Direct(_ROW).rows(session, {"key": "e" * 32})
        assert is_transient(raised.value)
        assert session.invalidated
    async with database.session() as session:  # the pool gives a new connection
        assert await Direct(_ROW).rows(session, {"key": "e" * 32}) == []


async def test_a_chain_block_on_a_lost_connection_gets_the_loss(
    database: Database, backend: str
) -> None:
    """No rollback to the savepoint is tried on a connection the error invalidated: the block
    gets the transient loss, as from any statement on a lost connection, not SQLAlchemy's
    pending-rollback error raised by a statement on the dead one. The next block gets an error
    too, and the chain raises nothing: the caller's commit fails (app/runs/starts.py)."""
    if backend != "postgres":
        pytest.skip("SQLite connections do not die with a server")

    async def lost(session: Any) -> None:
        await terminate_backends(database, await backend_pid(session))
        asyncpg = (await session.get_raw_connection()).driver_connection
        for _ in range(200):  # until the driver has seen it (a statement sent meanwhile may
            if asyncpg.is_closed():  # meet the dying backend's last message instead)
                break
            await asyncio.sleep(0.01)
        await Direct(_ROW).rows(session, {"key": "e" * 32})

    async with database.session() as session:
        chain = SavepointChain(session)
        await chain.run(lost)
        await chain.run(lambda s: Direct(_ROW).rows(s, {"key": "e" * 32}))
        outcomes = await chain.finish()
        assert session.invalidated
    assert isinstance(outcomes[0], DBAPIError) and is_transient(outcomes[0]), outcomes
    assert isinstance(outcomes[1], Exception)


async def test_a_lost_connection_invalidates_the_rest_of_the_pool(
    database_url: str, backend: str
) -> None:
    """The server restarted: every pooled connection is dead, but only one use fails."""
    if backend != "postgres":
        pytest.skip("SQLite connections do not die with a server")
    database = Database(database_url, engine_options={"pool_size": 2, "max_overflow": 0})
    try:
        async with database.session() as first, database.session() as second:
            pids = [await backend_pid(s) for s in (first, second)]
        await terminate_backends(database, *pids)
        outcomes = [await read_in_new_session(database) for _ in range(2)]
        assert outcomes == ["transient", "ok"]
    finally:
        await database.dispose()


async def test_a_savepoint_chain_keeps_each_block_or_undoes_it_alone(database: Database) -> None:
    """As a savepoint a block: a block that raises (a statement the database refused included)
    has its writes undone and its exception as its outcome; the blocks before and after it,
    and the transaction's own writes, commit."""
    insert_one = Direct(insert(CONVERSATIONS))

    async def duplicate(session: Any) -> None:
        await insert_one.execute(session, conversation("n" * 32))
        await insert_one.execute(session, conversation("m" * 32))

    async def refused(session: Any) -> None:
        await insert_one.execute(session, conversation("o" * 32))
        raise RuntimeError("refused")

    def one(key: str) -> Any:
        return lambda session: insert_one.execute(session, conversation(key * 32))

    async with database.session() as session:
        await insert_one.execute(session, conversation("l" * 32))
        chain = SavepointChain(session)
        for work in (one("m"), duplicate, refused, refused, one("p"), one("q")):
            await chain.run(work)
        outcomes = await chain.finish()
        await insert_one.execute(session, conversation("r" * 32))
        await session.commit()
    kinds = [type(o) for o in outcomes]
    assert kinds == [int, IntegrityError, RuntimeError, RuntimeError, int, int]
    async with database.session() as session:
        kept = [(await Direct(_ROW).rows(session, {"key": k * 32})) != [] for k in "lmnopqr"]
    assert kept == [True, True, False, False, True, True, True]


async def test_a_chain_block_whose_release_is_refused_is_undone_alone(
    database: Database, backend: str
) -> None:
    """A block that swallowed a refused statement returns as if it succeeded: PostgreSQL then
    refuses the release (taken with the next block's savepoint, or by ``finish``), and that
    block is undone, its outcome the refusal, while the next one still runs and commits."""
    if backend != "postgres":
        pytest.skip("SQLite goes on after a refused statement")
    insert_one = Direct(insert(CONVERSATIONS))

    def swallowing(key: str) -> Any:
        async def work(session: Any) -> str:
            await insert_one.execute(session, conversation(key * 32))
            with pytest.raises(IntegrityError):
                await insert_one.execute(session, conversation(key * 32))
            return "swallowed"

        return work

    async with database.session() as session:
        chain = SavepointChain(session)
        await chain.run(swallowing("s"))
        await chain.run(lambda s: insert_one.execute(s, conversation("t" * 32)))
        await chain.run(swallowing("u"))
        outcomes = await chain.finish()
        await session.commit()
    assert isinstance(outcomes[0], DBAPIError) and isinstance(outcomes[2], DBAPIError)
    assert outcomes[1] == 1
    async with database.session() as session:
        kept = [(await Direct(_ROW).rows(session, {"key": k * 32})) != [] for k in "stu"]
    assert kept == [False, True, False]


async def test_a_cancelled_statement_leaves_the_pool_sound(
    database: Database, backend: str
) -> None:
    """A request cancelled while its statement runs on PostgreSQL (a client gone, a shutdown):
    the connection, mid-protocol, is invalidated as SQLAlchemy's execution would, and the next
    session gets a sound one."""
    if backend != "postgres":
        pytest.skip("SQLite's statements run at once: nothing to cancel mid-statement")
    sleep = Direct(select(func.pg_sleep(bindparam("seconds")).label("slept")))
    async with database.session() as session:
        await Direct(_ROW).rows(session, {"key": "v" * 32})  # the transaction begins
        task = asyncio.create_task(sleep.rows(session, {"seconds": 5}))
        await asyncio.sleep(0.3)
        task.cancel()
        began = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - began < 4
        assert session.invalidated
    assert await read_in_new_session(database) == "ok"
