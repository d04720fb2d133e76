"""Where the database schema stands against the migrations, and migrating it to the head.

Imports alembic, SQLAlchemy and the storage package. The migrations live in ``migrations/``
beside ``app/`` (the container keeps them there too); ``alembic.ini`` is read for the rest.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from app.storage.database import Database

if TYPE_CHECKING:
    from alembic.config import Config

ROOT = Path(__file__).resolve().parents[2]
MIGRATION_LOCK_KEY = 0x7061726C6579
"""The PostgreSQL advisory lock every migration holds ("parley" as a bigint; migrations/env.py)."""


def alembic_config(database_url: str) -> Config:
    """Alembic's config for Parley's migrations, pointed at ``database_url``."""
    from alembic.config import Config  # Alembic (10 MB) is loaded only when it is needed

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False  # the app's logging stays as it is
    return config


@cache
def head_revisions() -> frozenset[str]:
    """The revisions the migrations end at (one, unless they branch)."""
    from alembic.script import ScriptDirectory

    return frozenset(ScriptDirectory(str(ROOT / "migrations")).get_heads())


@dataclass(frozen=True)
class SchemaState:
    """The database's revisions and the migrations' heads."""

    current: frozenset[str]
    head: frozenset[str]

    @property
    def at_head(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        current = ", ".join(sorted(self.current)) or "none (not migrated)"
        return f"the schema is at {current}; this version needs {', '.join(sorted(self.head))}"


def _current(connection: Connection) -> frozenset[str]:
    # A plain query: Alembic's MigrationContext would log two INFO lines per readiness probe.
    if not inspect(connection).has_table("alembic_version"):
        return frozenset()
    rows = connection.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(str(row[0]) for row in rows)


async def schema_state(database: Database) -> SchemaState:
    """Ask the database which revision it is at (raises if it does not answer)."""
    async with database.engine.connect() as connection:
        current = await connection.run_sync(_current)
    return SchemaState(current, head_revisions())


async def migrate_to_head(database_url: str) -> None:
    """``alembic upgrade head`` on ``database_url``, on a thread (Alembic runs its own loop)."""
    from alembic import command

    await asyncio.to_thread(command.upgrade, alembic_config(database_url), "head")
