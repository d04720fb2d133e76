"""The driver fence's contract: every private name of SQLAlchemy, its aiosqlite and asyncpg
adapters and aiosqlite that app/storage/driver relies on, pinned here one test each. An upgrade
that moves one fails here, naming it, instead of somewhere on a run's stream; and no other
module of app reaches past the fence."""

from __future__ import annotations

import inspect
import re
import sqlite3
from pathlib import Path

import aiosqlite
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg
from sqlalchemy.dialects.sqlite import aiosqlite as sqlite_aiosqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.compiler import SQLCompiler

from app.storage import Database
from app.storage.driver import connector
from app.storage.tables import CONVERSATIONS

APP = Path(__file__).resolve().parents[2] / "app"
FENCE = APP / "storage" / "driver"
_PRIVATE = re.compile(
    r"_handle_dbapi_exception|_invalidate_schema_cache|_connection\._connection|_collected_params"
    r"|_prepare_and_execute|_executemany|_execute_mutex"
)


def test_connection_handles_a_failed_statement_as_direct_calls_it() -> None:
    """direct.py hands a failed statement to ``Connection._handle_dbapi_exception(error, sql,
    params, cursor, context)``, as SQLAlchemy's own execution does."""
    parameters = list(inspect.signature(Connection._handle_dbapi_exception).parameters)
    assert parameters[:6] == ["self", "e", "statement", "parameters", "cursor", "context"]


def test_the_asyncpg_dialect_stamps_its_schema_cache_as_direct_copies() -> None:
    """direct.py copies the dialect's ``_invalidate_schema_cache_asof`` to the cursor before a
    statement and calls ``_invalidate_schema_cache()`` after a stale-statement error: what the
    asyncpg execution context does in ``pre_exec`` and ``handle_dbapi_exception``."""
    assert isinstance(pg_asyncpg.PGDialect_asyncpg._invalidate_schema_cache_asof, int | float)
    assert callable(pg_asyncpg.PGDialect_asyncpg._invalidate_schema_cache)
    assert "_invalidate_schema_cache_asof" in pg_asyncpg.AsyncAdapt_asyncpg_cursor.__slots__
    context = pg_asyncpg.PGExecutionContext_asyncpg
    assert "self.cursor._invalidate_schema_cache_asof" in inspect.getsource(context.pre_exec)
    handler = inspect.getsource(context.handle_dbapi_exception)
    assert "InvalidCachedStatementError" in handler and "InternalServerError" in handler
    dbapi = pg_asyncpg.AsyncAdapt_asyncpg_dbapi
    assert hasattr(dbapi, "InvalidCachedStatementError") and hasattr(dbapi, "InternalServerError")


def test_the_asyncpg_adapter_pings() -> None:
    """``driver.ping`` calls the adapted connection's ``ping()`` (not a DBAPI method)."""
    assert callable(pg_asyncpg.AsyncAdapt_asyncpg_connection.ping)


def test_the_asyncpg_adapter_has_what_direct_awaits() -> None:
    """On asyncpg, direct.py awaits the adapted cursor's own coroutines (what its ``execute``
    and ``executemany`` run in a greenlet), and sends parameterless statements on the adapted
    connection's asyncpg connection under its mutex, once its transaction began; a failure goes
    through the adapter's ``_handle_exception`` (its DBAPI exception classes)."""
    cursor = pg_asyncpg.AsyncAdapt_asyncpg_cursor
    for name, arguments in (
        ("_prepare_and_execute", ["self", "operation", "parameters"]),
        ("_executemany", ["self", "operation", "seq_of_parameters"]),
    ):
        method = getattr(cursor, name)
        assert inspect.iscoroutinefunction(method)
        assert list(inspect.signature(method).parameters) == arguments
    assert "await_(self._prepare_and_execute(" in inspect.getsource(cursor.execute)
    assert "await_(self._executemany(" in inspect.getsource(cursor.executemany)
    adapted = pg_asyncpg.AsyncAdapt_asyncpg_connection
    slots = {name for kind in adapted.__mro__ for name in getattr(kind, "__slots__", ())}
    assert {"_connection", "_transaction", "_execute_mutex"} <= slots
    assert "self._transaction = None" in inspect.getsource(adapted._handle_exception)
    assert inspect.iscoroutinefunction(adapted._start_transaction)


def test_the_compiler_exposes_what_direct_reads() -> None:
    """direct.py compiles a statement and reads its positional SQL, the parameter order, the
    binds and the flags it refuses; ``construct_params`` fills the values, or ``_Form`` does as
    it would from ``bind_names`` (``_collected_params`` empty)."""
    statements = [
        select(CONVERSATIONS).where(CONVERSATIONS.c.id == bindparam("key")),
        insert(CONVERSATIONS),
        update(CONVERSATIONS).where(CONVERSATIONS.c.id == bindparam("key")).values(version=2),
    ]
    dialects = [sqlite_aiosqlite.dialect(), pg_asyncpg.dialect()]
    flags = (
        "post_compile_params",
        "literal_execute_params",
        "insert_prefetch",
        "update_prefetch",
        "implicit_returning",
        "escaped_bind_names",
    )
    for dialect in dialects:
        for statement in statements:
            compiled = statement.compile(dialect=dialect, column_keys=["id"])
            assert isinstance(compiled, SQLCompiler)
            assert all(hasattr(compiled, flag) for flag in flags)
            assert compiled.positiontup is not None
            assert all(name in compiled.binds for name in compiled.positiontup)
            values = {name: None for name in compiled.positiontup}
            assert set(compiled.construct_params(values)) >= set(compiled.positiontup)
            # its own way to each value: the binds by name, no values collected elsewhere
            assert set(compiled.bind_names.values()) >= set(compiled.positiontup)
            assert not compiled._collected_params


def test_the_aiosqlite_adapter_uses_of_the_connection_what_sqlite_inline_has() -> None:
    """sqlite_inline impersonates an aiosqlite connection: SQLAlchemy's adapter reads its
    ``_connection`` before committing or rolling back, stops it with ``stop()`` (present since
    aiosqlite 0.22.1, else the dialect cannot terminate), and takes aiosqlite's error classes,
    which must be sqlite3's (the ones sqlite_inline raises)."""
    adapted = sqlite_aiosqlite.AsyncAdapt_aiosqlite_connection
    assert "self._connection._connection" in inspect.getsource(adapted.commit)
    assert "self._connection._connection" in inspect.getsource(adapted.rollback)
    assert ".stop" in inspect.getsource(adapted._terminate_force_close)
    assert hasattr(aiosqlite.Connection, "stop")
    for name in ("Error", "DatabaseError", "IntegrityError", "OperationalError"):
        assert getattr(aiosqlite, name) is getattr(sqlite3, name), name


async def test_sqlite_inline_is_what_the_aiosqlite_dialect_drives(tmp_path: Path) -> None:
    """The dialect takes sqlite_inline's connection as its driver connection and terminates
    it through ``stop``."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'contract.db'}")
    try:
        assert database.engine.dialect.has_terminate
        async with database.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            assert type(driver).__module__ == connector.__module__
            assert driver is not None and driver._connection is not None
            raw.dbapi_connection.terminate()  # type: ignore[union-attr]
            assert driver._connection is None
            raw.invalidate()
    finally:
        await database.dispose()


def test_only_the_fence_touches_driver_internals() -> None:
    """Outside app/storage/driver no module names the private names above, nor imports one of
    the fence's modules instead of the package."""
    found = []
    for path in sorted(APP.glob("**/*.py")):
        if FENCE in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        if _PRIVATE.search(text) or re.search(r"app\.storage\.driver\.\w", text):
            found.append(str(path.relative_to(APP.parent)))
    assert found == []
