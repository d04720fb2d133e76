"""Hot statements on the driver's cursor: SQLAlchemy compiles them, the cursor runs them.

Imports SQLAlchemy only; part of app/storage/driver, the fence around driver internals.
``AsyncConnection.execute`` costs 40–110 µs of Python a statement — its greenlet bridge,
execution context and result objects — more than SQLite takes to run one, and a run's start runs
six (docs/performance.md). A ``Direct`` statement is a Core statement
compiled by SQLAlchemy once per dialect and set of parameter names, run on the DBAPI cursor that
SQLAlchemy adapted for the driver, inside one ``run_sync``. Once the transaction has begun, no
greenlet: on SQLite (which runs on the loop's thread, app/storage/driver/sqlite_inline.py) at
once on ``sqlite3``'s own cursor (a statement that finds another process's lock runs again the
usual way, which waits without blocking the loop); on asyncpg awaited on the adapted cursor's
own coroutines, what its ``execute`` runs inside the greenlet (a failure is handed to
SQLAlchemy inside ``run_sync``, where invalidating a connection may await):

- in the transaction SQLAlchemy began, or begins now (with its ``begin`` hook: SQLite's
  ``BEGIN IMMEDIATE``), so it mixes freely with statements run the usual way;
- with the same type processing both ways (each bound value through its type's bind processor
  for the dialect, each result column through its result processor);
- failing as SQLAlchemy's execution does: its exception classes (``IntegrityError``,
  ``OperationalError``, …), a lost connection invalidated with the rest of the pool (its own
  ``Connection._handle_dbapi_exception``), asyncpg's prepared statements made again after a
  schema change (as SQLAlchemy's asyncpg execution context does).

What it does not do, and refuses when compiling: expanding (``IN``) or literal-rendered
parameters, defaults computed in Python (pass every column), implicit ``RETURNING``. Rows come
back as dicts keyed like ``Result.mappings()``. A statement's values are read as
``construct_params`` reads them (the caller's keys, else the statement's own values), without
its dict of every bind.

The failure path leans on private names of SQLAlchemy's (``Connection._handle_dbapi_exception``
and the asyncpg dialect's schema-cache stamp), as its own execution uses them, the values on
the compiler's ``_collected_params`` (empty for Parley's statements), and on asyncpg the adapted
cursor's and connection's coroutines, mutex and transaction;
tests/storage/test_direct.py holds each behaviour to SQLAlchemy's and
tests/storage/test_driver_contract.py pins the names, so an upgrade that moves them
fails there.
"""

from __future__ import annotations

import contextlib
import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ReturnsRows

from app.storage.driver.sqlite_inline import MANY_ROWS
from app.storage.driver.sqlite_inline import Connection as InlineSQLite

Params = Mapping[str, Any]
Row = Mapping[str, Any]
"""A row as the storage layer reads it: ``Direct``'s dicts and ``Result.mappings()`` alike."""
_Processor = Callable[[Any], Any] | None
_REQUIRED = object()
T = TypeVar("T")


@dataclass
class _Form:
    """A statement as compiled for one dialect and one set of parameter names."""

    sql: str
    names: tuple[str, ...]
    """The bound parameters in the order the SQL takes them."""
    bind_processors: tuple[_Processor, ...]
    compiled: SQLCompiler
    columns: tuple[tuple[str, Any], ...]
    """The result columns' keys and types (none: the statement returns no rows)."""
    result_processors: tuple[_Processor, ...] | None = field(default=None)

    plan: tuple[tuple[str, str, Any], ...] | None = field(default=None)
    """Where each positional value comes from: the caller's key, the bind's name, else the
    statement's own value (``_REQUIRED``: none). None: SQLAlchemy's ``construct_params``."""

    def parameters(self, params: Params) -> tuple[Any, ...]:
        """The positional values, through their types' bind processors: as ``construct_params``
        makes them (a dict of every bind, a third of a start's statement time), read directly."""
        if self.plan is None:
            values = self.compiled.construct_params(params)
            return tuple(
                value if process is None else process(value)
                for value, process in zip(
                    (values[name] for name in self.names), self.bind_processors, strict=True
                )
            )
        out = []
        for (key, name, own), process in zip(self.plan, self.bind_processors, strict=True):
            if key in params:
                value = params[key]
            elif name in params:
                value = params[name]
            elif own is _REQUIRED:  # SQLAlchemy's error, naming it
                value = self.compiled.construct_params(params)[name]
            else:
                value = own
            out.append(value if process is None else process(value))
        return tuple(out)

    def rows(
        self, fetched: Sequence[Any], description: Any, dialect: Dialect
    ) -> list[dict[str, Any]]:
        processors = self.result_processors
        if processors is None:
            processors = self.result_processors = tuple(
                type_.dialect_impl(dialect).result_processor(dialect, described[1])
                for (_, type_), described in zip(self.columns, description, strict=True)
            )
        keys = [key for key, _ in self.columns]
        return [
            {
                key: value if process is None else process(value)
                for key, value, process in zip(keys, row, processors, strict=True)
            }
            for row in fetched
        ]


class Direct:
    """One Core statement, run on the driver's cursor (see the module's docstring)."""

    def __init__(self, statement: ReturnsRows) -> None:
        self.statement = statement
        self._forms: weakref.WeakKeyDictionary[Dialect, dict[tuple[Any, ...], _Form]] = (
            weakref.WeakKeyDictionary()
        )

    async def rows(self, session: AsyncConnection, params: Params) -> list[dict[str, Any]]:
        """Run it once with ``params``; the rows it returns."""
        rows, _ = await self._statement(session, params, False)
        return rows

    async def execute(self, session: AsyncConnection, params: Params | Sequence[Params]) -> int:
        """Run it with ``params``, or once per mapping of a list (``executemany``); the rows it
        changed, as the driver counts them (asyncpg does not count an ``executemany``: -1)."""
        many = isinstance(params, Sequence)
        if many and not params:
            return 0
        at_once = not many or len(params) <= MANY_ROWS  # a long one goes to SQLite's thread
        _, rowcount = await self._statement(session, params, many, at_once)
        return rowcount

    async def _statement(
        self, session: AsyncConnection, params: Any, many: bool, at_once: bool = True
    ) -> tuple[list[dict[str, Any]], int]:
        """Awaited on asyncpg (``_awaited``), else on the cursor (``_run``)."""
        awaitable = _asyncpg(session)
        if awaitable is not None:
            return await self._awaited(session, *awaitable, params, many)
        return await _on_cursor(session, self._run, params, many, at_once=at_once)

    def _run(
        self, conn: Connection, sqlite: InlineSQLite | None, params: Any, many: bool
    ) -> tuple[list[dict[str, Any]], int]:
        """The statement on the driver's cursor: at once on ``sqlite`` (``_inline``), else in
        ``run_sync``'s greenlet on SQLAlchemy's adapted cursor."""
        dialect = conn.dialect
        form = self._form(dialect, params[0] if many else params, many)
        cursor = _cursor(conn) if sqlite is None else sqlite.inline_cursor()
        try:
            if many:
                cursor.executemany(form.sql, [form.parameters(p) for p in params])
            else:
                cursor.execute(form.sql, form.parameters(params))
            rows = form.rows(cursor.fetchall(), cursor.description, dialect) if form.columns else []
            rowcount = cursor.rowcount
        except BaseException as error:
            _failed(conn, error, form.sql, params, cursor, sqlite)
        cursor.close()
        return rows, rowcount

    async def _awaited(
        self, session: AsyncConnection, conn: Connection, adapted: Any, params: Any, many: bool
    ) -> tuple[list[dict[str, Any]], int]:
        """``_run`` on asyncpg, awaited (``_asyncpg``): SQLAlchemy's adapted cursor, its own
        coroutines, without the greenlet its ``execute`` would cost."""
        dialect = conn.dialect
        form = self._form(dialect, params[0] if many else params, many)
        cursor = adapted.cursor()
        _prepare_as_sqlalchemy_would(dialect, cursor)
        try:
            if many:
                await cursor._executemany(form.sql, [form.parameters(p) for p in params])
            else:
                await cursor._prepare_and_execute(form.sql, form.parameters(params))
            rows = form.rows(cursor.fetchall(), cursor.description, dialect) if form.columns else []
            rowcount = cursor.rowcount
        except BaseException as error:
            await session.run_sync(_failed_again, error, form.sql, params, cursor)
        cursor.close()
        return rows, rowcount

    def _form(self, dialect: Dialect, params: Params, many: bool) -> _Form:
        forms = self._forms.setdefault(dialect, {})
        key = (*params, many)
        form = forms.get(key)
        if form is None:
            form = forms[key] = _compile(self.statement, dialect, list(params), many)
        return form


async def statements(session: AsyncConnection, *statements: str) -> None:
    """Run parameterless statements, one after another, in the transaction (begun if need be):
    on asyncpg in one round trip (its simple query protocol takes several), else on the cursor."""
    awaitable = _asyncpg(session)
    if awaitable is None:
        await _on_cursor(session, _raw, statements)
        return
    _, adapted = awaitable
    sql = "; ".join(statements)
    try:
        async with adapted._execute_mutex:
            await adapted._connection.execute(sql)
    except BaseException as error:
        await session.run_sync(_failed_again, _translated(adapted, error), sql, (), None)


async def _on_cursor(
    session: AsyncConnection, run: Callable[..., T], *args: Any, at_once: bool = True
) -> T:
    """``run(connection, sqlite, *args)``: at once on SQLite's own connection when it can
    (``_inline``), else in ``run_sync``'s greenlet with ``sqlite`` None."""
    inline = _inline(session) if at_once else None
    if inline is not None:
        with contextlib.suppress(_Busy):
            return run(*inline, *args)
    return await session.run_sync(run, None, *args)


def _raw(conn: Connection, sqlite: InlineSQLite | None, statements: tuple[str, ...]) -> None:
    cursor = _cursor(conn) if sqlite is None else sqlite.inline_cursor()
    sql = ""
    try:
        for sql in statements:
            cursor.execute(sql)
    except BaseException as error:
        _failed(conn, error, sql, (), cursor, sqlite)
    cursor.close()


class _Busy(Exception):
    """A statement run at once found the database locked by another process: it did nothing,
    and runs again the usual way, which waits for the lock without blocking the loop."""


def _inline(session: AsyncConnection) -> tuple[Connection, InlineSQLite] | None:
    """The session's connection and its SQLite connection, when a statement can run on it at
    once, with no ``await``: SQLite on the loop's thread (``sqlite_inline``), its transaction
    begun. ``run_sync`` would cost a greenlet, its switches and a frame stack (mapped and
    unmapped) for each statement: about 13 µs, ten times the statement's own."""
    conn = session.sync_connection
    if conn is None or conn.invalidated or not conn.in_transaction():
        return None
    driver = conn.connection.driver_connection
    return (conn, driver) if isinstance(driver, InlineSQLite) and driver.is_open else None


def _asyncpg(session: AsyncConnection) -> tuple[Connection, Any] | None:
    """The session's connection and SQLAlchemy's adapted asyncpg connection, when a statement
    can be awaited on it directly: asyncpg, its transaction under way. ``run_sync`` would cost a
    greenlet and its switches for each statement (some 30 µs of Python on PostgreSQL's
    100–150)."""
    conn = session.sync_connection
    if conn is None or conn.invalidated or not conn.in_transaction():
        return None
    adapted = conn.connection.dbapi_connection
    if not isinstance(adapted, AsyncAdapt_asyncpg_connection) or adapted._transaction is None:
        return None
    return conn, adapted


def _translated(adapted: Any, error: BaseException) -> BaseException:
    """asyncpg's error as SQLAlchemy's adapter raises it (its DBAPI exception classes)."""
    if not isinstance(error, Exception):
        return error
    try:
        adapted._handle_exception(error)
    except BaseException as translated:
        return translated
    return error  # pragma: no cover - the adapter always raises


def _cursor(conn: Connection) -> Any:
    """The driver's cursor, in the transaction SQLAlchemy began or begins now (with its
    ``begin`` hook), prepared as SQLAlchemy's execution would prepare it."""
    if not conn.in_transaction():
        conn.begin()
    cursor = conn.connection.cursor()
    _prepare_as_sqlalchemy_would(conn.dialect, cursor)
    return cursor


def _failed(
    conn: Connection,
    error: BaseException,
    sql: str,
    params: Any,
    cursor: Any | None,
    sqlite: InlineSQLite | None = None,
) -> NoReturn:
    """SQLAlchemy's own handling of a failed statement (it raises): its exception classes (a
    StatementError for one raised before the driver, by a type's processor), a lost connection
    invalidated with the rest of the pool, the cursor closed. A statement run at once that
    found the database busy raises ``_Busy`` (it runs again the usual way)."""
    if sqlite is not None and _is_busy(error):
        if cursor is not None:
            cursor.close()
        raise _Busy from error
    _note_schema_change(conn.dialect, error)
    conn._handle_dbapi_exception(error, sql, params, cursor, None)


def _failed_again(
    conn: Connection, error: BaseException, sql: str, params: Any, cursor: Any | None
) -> NoReturn:
    """``_failed`` for an awaited statement, in ``run_sync``'s greenlet (where invalidating a
    connection may await): raised again there, since SQLAlchemy reads it from the exception
    being handled."""
    try:
        raise error
    except BaseException:
        _failed(conn, error, sql, params, cursor)


def _is_busy(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None) if isinstance(error, sqlite3.Error) else None
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def _prepare_as_sqlalchemy_would(dialect: Dialect, cursor: Any) -> None:
    """asyncpg keeps each connection's prepared statements; after a schema change (a migration
    run by another process) one fails once, and SQLAlchemy's execution context then has every
    connection prepare again (``PGExecutionContext_asyncpg.pre_exec``). So does this."""
    asof = getattr(dialect, "_invalidate_schema_cache_asof", None)
    if asof is not None:
        cursor._invalidate_schema_cache_asof = asof


def _note_schema_change(dialect: Dialect, error: BaseException) -> None:
    """The other half (``PGExecutionContext_asyncpg.handle_dbapi_exception``)."""
    dbapi = dialect.loaded_dbapi
    stale = tuple(
        getattr(dbapi, name)
        for name in ("InvalidCachedStatementError", "InternalServerError")
        if hasattr(dbapi, name)
    )
    if stale and isinstance(error, stale):
        dialect._invalidate_schema_cache()  # type: ignore[attr-defined]


def _compile(statement: ReturnsRows, dialect: Dialect, keys: list[str], many: bool) -> _Form:
    compiled = statement.compile(dialect=dialect, column_keys=keys, for_executemany=many)
    assert isinstance(compiled, SQLCompiler)
    refused = (
        compiled.post_compile_params
        or compiled.literal_execute_params
        or compiled.insert_prefetch
        or compiled.update_prefetch
        or compiled.implicit_returning
        or compiled.escaped_bind_names
        or compiled.positiontup is None
    )
    if refused:
        raise ValueError(f"not a statement Direct runs as it is: {compiled.string}")
    names = tuple(compiled.positiontup or ())
    binds = compiled.binds
    processors = tuple(
        binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    )
    columns = tuple((column.key, column.type) for column in statement.exported_columns)
    return _Form(compiled.string, names, processors, compiled, columns, plan=_plan(compiled, names))


def _plan(compiled: SQLCompiler, names: tuple[str, ...]) -> tuple[tuple[str, str, Any], ...] | None:
    """``construct_params``'s way to each value, for a statement whose own values are plain
    (None for one whose values SQLAlchemy computes, or collected from ``.params()``)."""
    binds = {name: bind for bind, name in compiled.bind_names.items()}
    if compiled._collected_params or any(binds[name].callable for name in names):
        return None
    return tuple(
        (binds[name].key, name, _REQUIRED if binds[name].required else binds[name].value)
        for name in names
    )
