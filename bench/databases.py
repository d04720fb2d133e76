"""Databases for the benchmarks: a fresh PostgreSQL database, migrated; a migrated SQLite file.

PostgreSQL is looked for at PARLEY_BENCH_POSTGRES_URL (default
``postgresql+asyncpg://postgres@127.0.0.1:5432/``); a benchmark skips it when it does not answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

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
