"""The database handle: one AsyncEngine and its sessions, for SQLite (aiosqlite) or PostgreSQL.

A session here is one pooled ``AsyncConnection`` in a transaction: Parley runs Core statements
only, and the ORM's ``Session`` in between cost more Python per statement than SQLite takes to
run one (2–6% of a run's start, measured in docs/performance.md).

Imports SQLAlchemy, app.settings, app.observability (pool metrics) and app.storage (the driver
shims through app.storage.driver's exports only). SQLite is set up so that
concurrent writers wait their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.observability import metrics
from app.settings import Settings
from app.storage.driver import connector, ping
from app.storage.errors import (
    DatabaseUnavailable,
    SchemaNotMigrated,
    is_transient,
    names_missing_schema,
)

DEFAULT_BUSY_TIMEOUT_MS = 5000
IDLE_PING_SECONDS = 10.0
"""A pooled PostgreSQL connection idle this long is pinged before it is used again."""
_SQLITE_BEGIN = "parley_sqlite_begin"
_COUNTED_IN_USE = "parley_counted_in_use"


class Database:
    """Owns the engine and hands out sessions; build one per process and dispose it at exit.

    On SQLite every connection runs in WAL mode with a busy timeout and foreign keys on, and a
    session's transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, so
    concurrent writers (in this process or another) queue on the busy timeout instead of failing
    when a read lock cannot be upgraded. ``session(readonly=True)`` starts with a plain ``BEGIN``
    instead, which in WAL mode never waits for a writer; on PostgreSQL it is REPEATABLE READ,
    READ ONLY (one snapshot for all its statements; a write in it fails there).
    """

    def __init__(
        self,
        url: str | URL,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``engine_options`` go to ``create_async_engine`` (e.g. ``pool_size``)."""
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        # A statement's values (stored text) stay out of its errors' text, and so of the log.
        options = {"hide_parameters": True, **(engine_options or {})}
        if self.is_sqlite:
            _create_parent_directory(self.url)
            creator = connector(self.url.database or ":memory:", busy_timeout_ms)
            self.engine = create_async_engine(self.url, async_creator=creator, **options)
            _configure_sqlite(self.engine)
        else:
            self.engine = create_async_engine(self.url, **options)
            _ping_idle_connections(self.engine)
        _count_pool_use(self.engine)
        # A read session sees one snapshot for all its statements, as a use case that reads a
        # count then the rows expects: SQLite's read transaction does; PostgreSQL's default
        # (READ COMMITTED) takes one per statement, so a rewind or delete committed in between
        # made the rows look missing (a 500 stored_data_error).
        self._read_engine = (
            self.engine.execution_options(**{_SQLITE_BEGIN: "BEGIN"})
            if self.is_sqlite
            else self.engine.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        )
        # SQLite has one writer at a time. Writers of this process queue here, in order,
        # instead of in SQLite's busy handler, which sleeps up to 100 ms between tries and
        # gives up after the busy timeout; other processes still wait on the busy timeout.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        """The database named by ``settings.database_url`` (``PARLEY_DATABASE_URL``)."""
        return cls(settings.database_url)

    @asynccontextmanager
    async def session(self, *, readonly: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection whose first statement begins a transaction; the caller commits
        (``await session.commit()``), else it rolls back when the block ends.

        ``readonly=True`` is for sessions that only read: on SQLite they do not queue behind
        writers, and on both databases every statement sees the same snapshot (PostgreSQL:
        REPEATABLE READ, READ ONLY). Do not write in one.
        """
        engine = self._read_engine if readonly else self.engine
        lock = None if readonly else self._write_lock
        connected = False
        try:
            async with lock or contextlib.nullcontext(), engine.connect() as session:
                connected = True  # closing it rolls back what is uncommitted
                try:
                    yield session
                except DBAPIError as exc:
                    if exc.connection_invalidated:  # the connection was lost mid-transaction
                        raise DatabaseUnavailable() from exc
                    if names_missing_schema(exc):  # not migrated: a 503 saying so, not a 500
                        raise SchemaNotMigrated() from exc
                    raise
        except Exception as exc:
            if not connected and is_transient(exc):  # no connection: refused, timed out…
                raise DatabaseUnavailable() from exc
            raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A session that commits when the block ends without an error, else rolls back."""
        async with self.session() as session:
            yield session
            await session.commit()

    async def dispose(self) -> None:
        """Close every pooled connection; the Database can not be used afterwards."""
        await self.engine.dispose()

    def __repr__(self) -> str:
        return f"Database({self.url.render_as_string(hide_password=True)!r})"


def _ping_idle_connections(engine: AsyncEngine) -> None:
    """Ping a pooled connection at checkout when it sat idle ``IDLE_PING_SECONDS`` or more: one
    that died meanwhile (the server restarted) is replaced before use. ``pool_pre_ping`` pings
    at every checkout, a round trip per transaction; a busy pool's connections never idle."""

    @event.listens_for(engine.sync_engine, "checkin")
    def on_checkin(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < IDLE_PING_SECONDS:
            return
        try:
            ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("a pooled connection died while idle") from exc


def _count_pool_use(engine: AsyncEngine) -> None:
    """Keep ``parley_db_pool_connections_in_use`` up to date (the pool's own events). The pool
    also "checks in" a connection it failed to open again (the database went away) without
    having checked it out: only a connection counted out is counted back in."""

    @event.listens_for(engine.sync_engine, "checkout")
    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        record.record_info[_COUNTED_IN_USE] = True  # kept when the connection is reopened
        metrics.pool_checkout()

    @event.listens_for(engine.sync_engine, "checkin")
    def on_checkin(dbapi_connection: Any, record: Any) -> None:
        if record.record_info.pop(_COUNTED_IN_USE, False):
            metrics.pool_checkin()


def _create_parent_directory(url: URL) -> None:
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _configure_sqlite(engine: AsyncEngine) -> None:
    """Pragmas on connect; SQLAlchemy (not the sqlite3 module) emits BEGIN, as IMMEDIATE.

    Connections come from ``driver.connector`` (SQLite on the loop's thread) in autocommit
    mode, which hands transaction control to the "begin" hook below (SQLAlchemy's documented
    recipe), and wait for other processes' locks without blocking the loop.
    """

    @event.listens_for(engine.sync_engine, "connect")
    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: no fsync per commit; a process crash loses nothing, a power cut
            # can lose the last commits (SQLite's recommended setting for WAL).
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            # A start group's savepoints (app/runs/starts.py) journal the pages they change in
            # a temporary file, a write system call per page and per page number: in memory.
            cursor.execute("PRAGMA temp_store = MEMORY")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def on_begin(connection: Connection) -> None:
        begin = connection.get_execution_options().get(_SQLITE_BEGIN, "BEGIN IMMEDIATE")
        connection.exec_driver_sql(begin)
