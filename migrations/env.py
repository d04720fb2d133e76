"""Alembic environment (async): migrates PARLEY_DATABASE_URL, or the URL the caller passes.

Imports alembic, SQLAlchemy, app.settings and app.storage. The URL comes from, in order:
``config.attributes["database_url"]``, ``-x database_url=...``, then ``PARLEY_DATABASE_URL`` (a bad
setting exits with status 2 and one line). On PostgreSQL a migration holds a transaction-level
advisory lock: processes migrating at once (replicas starting together) run one after another,
and each later one finds the schema already at the head.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.settings import load_settings
from app.storage.database import Database
from app.storage.schema import MIGRATION_LOCK_KEY
from app.storage.search_schema import is_unmodelled
from app.storage.tables import Base, UTCDateTime

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def database_url() -> str:
    """The URL to migrate: passed in by the caller, else the app's own setting."""
    passed = config.attributes.get("database_url")
    if passed is None:
        passed = context.get_x_argument(as_dictionary=True).get("database_url")
    return str(passed) if passed else load_settings().database_url


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Write our column types as the plain SQLAlchemy types they store as."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave the search index's objects (app/storage/search_schema.py) out of the comparison."""
    table = getattr(getattr(obj, "table", None), "name", None)
    return not (reflected and compare_to is None and is_unmodelled(name, type_, table))


def configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        render_item=render_item,
        include_object=include_object,
        # Database() makes SQLite begin real transactions, so a failed migration rolls back.
        transactional_ddl=True,
        **kwargs,
    )


def run_migrations_offline() -> None:
    """Write the SQL for the migrations instead of running it (``alembic upgrade --sql``)."""
    configure(url=database_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    configure(connection=connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Held until this transaction ends; Alembic reads the current revision after it.
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


async def run_async_migrations() -> None:
    database = Database(database_url())
    try:
        connection = database.engine.connect()
        try:
            await connection.start()
        except Exception as exc:  # refused, no such database, bad credentials: one line
            where = database.url.render_as_string(hide_password=True)
            raise CommandError(f"cannot connect to the database {where}: {_reason(exc)}") from exc
        try:
            await connection.run_sync(do_run_migrations)
        finally:
            await connection.close()
    finally:
        await database.dispose()


def _reason(exc: BaseException) -> str:
    """The driver's own words, without SQLAlchemy's wrapping (its SQL, its background link)."""
    cause = getattr(exc, "orig", None) or exc
    return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a caller that already holds a (sync) connection
        do_run_migrations(connection)
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(run_async_migrations())
        return
    # Called from async code (a test, an app's startup): migrate on a thread with its own loop.
    with ThreadPoolExecutor(max_workers=1) as executor:
        executor.submit(lambda: asyncio.run(run_async_migrations())).result()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
