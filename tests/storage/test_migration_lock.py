"""Replicas starting together: four ``alembic upgrade head`` processes on one fresh PostgreSQL
database all succeed, because each migration holds an advisory lock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import asyncpg

from app.storage.schema import MIGRATION_LOCK_KEY, head_revisions
from tests.conftest import PostgresServer

REPO_ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4


async def waiting_on_the_lock(connection: asyncpg.Connection) -> int:
    count = await connection.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    return int(count)


async def test_four_simultaneous_upgrades_on_a_fresh_database_all_succeed(
    postgres_server: PostgresServer,
) -> None:
    name = await postgres_server.create()
    url = postgres_server.url_for(name)
    holder = await asyncpg.connect(postgres_server.dsn(name))
    try:
        # Hold the migrations' lock until all four wait on it, so that they start migrating at
        # the same moment (without the lock in env.py they never wait, and this fails).
        await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        command = [sys.executable, "-m", "alembic", "-c", str(REPO_ROOT / "alembic.ini")]
        processes = [
            await asyncio.create_subprocess_exec(
                *command,
                "-x",
                f"database_url={url}",
                "upgrade",
                "head",
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(PROCESSES)
        ]
        for _ in range(600):  # 30 s at most
            if await waiting_on_the_lock(holder) == PROCESSES:
                break
            await asyncio.sleep(0.05)
        assert await waiting_on_the_lock(holder) == PROCESSES, "they never waited on the lock"
        await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        outputs = [await p.communicate() for p in processes]
        assert [p.returncode for p in processes] == [0] * PROCESSES, outputs
        versions = await holder.fetch("SELECT version_num FROM alembic_version")
        assert {row[0] for row in versions} == set(head_revisions())
        ran = [err.decode().count("Running upgrade") for _, err in outputs]
        assert sum(1 for n in ran if n) == 1  # one migrated; the others found it done
    finally:
        await holder.close()
        await postgres_server.drop(name)
