"""Databases for the benchmarks: a fresh PostgreSQL database, migrated; a migrated SQLite file.

PostgreSQL is looked for at PARLEY_BENCH_POSTGRES_URL (default
``postgresql+asyncpg://postgres@127.0.0.1:5432/``); a benchmark skips it when it does not answer.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
from sqlalchemy.engine import make_url

from app.storage import Database

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_SERVER = os.environ.get(
    "PARLEY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/"
)


async def fresh_postgres(name: str) -> str | None:
    """The URL of a new, empty database ``name`` (dropped first if it exists), or None."""
    url = make_url(POSTGRES_SERVER)
    dsn = url.set(drivername="postgresql", database="postgres")
    try:
        connection = await asyncpg.connect(dsn.render_as_string(hide_password=False), timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return None
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return url.set(database=name).render_as_string(hide_password=False)


def migrate(database_url: str) -> None:
    """``alembic upgrade head`` on ``database_url``."""
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "PARLEY_DATABASE_URL": database_url},
    )


def _upgrade(url: str) -> None:
    """``alembic upgrade head`` on ``url``, in this process (its logging left alone)."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["database_url"] = url
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


async def on_database(url: str, measure: Callable[[Database], Awaitable[T]]) -> T:
    """``measure`` on the database at ``url``, migrated first, its engine disposed after."""
    await asyncio.to_thread(_upgrade, url)
    database = Database(url)
    try:
        return await measure(database)
    finally:
        await database.dispose()


async def on_sqlite(measure: Callable[[Database], Awaitable[T]]) -> T:
    """``measure`` on a new SQLite file, migrated, removed after."""
    with tempfile.TemporaryDirectory() as directory:
        return await on_database(f"sqlite+aiosqlite:///{directory}/bench.db", measure)


async def on_postgres(
    server_url: str, prefix: str, measure: Callable[[Database], Awaitable[T]]
) -> T | str:
    """``measure`` on a new PostgreSQL database (``prefix`` and a random suffix) of the server
    at ``server_url``, dropped after; a sentence saying why it was skipped when none answers."""
    url = make_url(server_url)
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin_dsn = url.set(drivername="postgresql", database="postgres")
    try:
        admin = await asyncpg.connect(admin_dsn.render_as_string(hide_password=False), timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        return f"skipped: PostgreSQL does not answer at {server_url} ({exc!r})"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        database_url = url.set(database=name).render_as_string(hide_password=False)
        return await on_database(database_url, measure)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
