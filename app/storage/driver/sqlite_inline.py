"""SQLite on the event loop's thread: aiosqlite's interface over ``sqlite3``, with no thread.

Imports the standard library only; part of app/storage/driver, the fence around driver
internals (SQLAlchemy's aiosqlite adapter reads this connection's ``_connection`` and calls its
``stop``, as it does aiosqlite's). aiosqlite runs every call — making a cursor, executing,
fetching, closing — on a thread of its own and hands the result back to the loop: about 130 µs
a call when the process is idle, and up to the interpreter's switch interval (5 ms) when the
loop is busy, since that thread must win the GIL back first. A statement on a local SQLite
file takes microseconds, so Parley runs them inline instead (``Database`` hands this module's
``connect`` to SQLAlchemy's aiosqlite dialect as its ``async_creator``).

The one wait that could block the loop is SQLite's lock, held by another process: connections
are opened with no busy timeout, and a statement refused as busy is retried after an
``asyncio.sleep`` (backing off to 50 ms) until ``busy_timeout`` has passed, then the error is
raised as SQLite's would be. A busy statement did nothing, so running it again is safe.
The one long statement Parley runs, inserting an imported conversation's messages, goes to a
thread (``MANY_ROWS``), where SQLite lets go of the GIL while it works.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from functools import partial
from typing import Any, Generic, TypeVar

T = TypeVar("T")

MANY_ROWS = 200
"""An ``executemany`` of more rows runs on a thread: the loop serves others meanwhile."""
_FIRST_WAIT = 0.001
_LONGEST_WAIT = 0.05


async def _patiently(busy_timeout: float, call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, again while SQLite says the database is busy (up to ``busy_timeout``)."""
    deadline: float | None = None
    wait = _FIRST_WAIT
    while True:
        try:
            return await call()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # any SQLITE_BUSY_* too
                raise
            now = time.monotonic()
            deadline = deadline or now + busy_timeout
            if now >= deadline:
                raise
        await asyncio.sleep(wait)
        wait = min(wait * 2, _LONGEST_WAIT)


async def _at_once(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, on the loop's thread."""
    return function(*args)


class _Ready(Generic[T]):
    """A value that is awaited, or entered with ``async with``, without waiting."""

    def __init__(self, value: T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        return self._value
        yield  # a generator that returns at once

    async def __aenter__(self) -> T:
        return self._value

    async def __aexit__(self, *exc: object) -> None:
        return None


class Cursor:
    """An aiosqlite-style cursor whose calls run at once."""

    def __init__(self, cursor: sqlite3.Cursor, busy_timeout: float) -> None:
        self._cursor = cursor
        self._busy_timeout = busy_timeout

    async def execute(self, sql: str, parameters: Any = ()) -> Cursor:
        await _patiently(
            self._busy_timeout, partial(_at_once, self._cursor.execute, sql, parameters)
        )
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> Cursor:
        rows = list(parameters)  # a retry must see every row again
        # An import is long enough to be worth a thread; anything else runs at once.
        run = asyncio.to_thread if len(rows) > MANY_ROWS else _at_once
        await _patiently(self._busy_timeout, partial(run, self._cursor.executemany, sql, rows))
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(size if size is not None else self._cursor.arraysize)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    async def setinputsizes(self, *sizes: Any) -> None:
        return None

    async def nextset(self) -> None:
        return None

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value


class Connection:
    """An aiosqlite-style connection whose calls run at once (no thread)."""

    def __init__(self, connection: sqlite3.Connection, busy_timeout: float) -> None:
        self._connection: sqlite3.Connection | None = connection
        self._busy_timeout = busy_timeout

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @property
    def is_open(self) -> bool:
        return self._connection is not None

    def inline_cursor(self) -> sqlite3.Cursor:
        """A plain ``sqlite3`` cursor, for a statement run at once, outside any ``await``
        (app/storage/driver/direct.py): it does not wait out another process's lock."""
        return self._conn.cursor()

    def cursor(self) -> _Ready[Cursor]:
        """A new cursor (awaited, or entered with ``async with``, as aiosqlite's)."""
        return _Ready(Cursor(self._conn.cursor(), self._busy_timeout))

    async def execute(self, sql: str, parameters: Any = ()) -> Cursor:
        return await Cursor(self._conn.cursor(), self._busy_timeout).execute(sql, parameters)

    async def commit(self) -> None:
        await _patiently(self._busy_timeout, partial(_at_once, self._conn.commit))

    async def rollback(self) -> None:
        self._conn.rollback()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def stop(self) -> None:
        """Close at once (SQLAlchemy's terminate)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def connector(database: str, busy_timeout_ms: int) -> Callable[[], Any]:
    """An ``async_creator`` for SQLAlchemy: a Connection to ``database``, in autocommit
    mode (SQLAlchemy emits BEGIN), waiting at most ``busy_timeout_ms`` for another
    process's lock."""

    async def connect() -> Connection:
        uri = database.startswith("file:")
        raw = sqlite3.connect(database, uri=uri, isolation_level=None, check_same_thread=False)
        raw.execute("PRAGMA busy_timeout = 0")
        return Connection(raw, busy_timeout_ms / 1000)

    return connect
