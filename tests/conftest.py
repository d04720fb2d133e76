"""Shared fixtures: each test gets a clean migrated database, on SQLite and on PostgreSQL.

Imports pytest, alembic, asyncpg and app.storage; nothing domain- or API-specific (the apps
tests build in their own process: tests/apps.py). Databases are built by ``alembic upgrade
head`` once per session; SQLite tests get a copy of that file, PostgreSQL tests the session's
database with every table emptied before the test.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import asyncpg
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

from app.storage import Database
from app.storage.tables import Base

pytest_plugins = ["tests.apps"]

REPO_ROOT = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "PARLEY_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/"
)
# Provider settings a developer's shell may hold: the suite never sees them, nor do the servers
# it starts (they copy this environment). Connections beyond loopback are refused by
# pytest-socket (``--allow-hosts`` in pyproject.toml).
PROVIDER_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "PARLEY_OPENAI_", "PARLEY_ANTHROPIC_")
PROVIDER_ENV_NAMES = ("PARLEY_DEFAULT_PROVIDER",)
# The tests that share one pytest-xdist worker, run one after another there: the browser tests,
# one chromium at a time rather than several competing for the cores under ``expect``'s timeouts.
ONE_WORKER = ("tests/browser/",)
# The modules whose module-scoped fixture costs seconds of CPU (a generator and tsc, uvicorn or
# moto processes): each module's tests run on one worker, so that the fixture is made once, not
# once on every worker that takes one of its tests.
ONE_WORKER_EACH = (
    "tests/api/test_typescript_types.py",
    "tests/api/test_typescript_types_hey_api.py",
    "tests/api/test_generated_client.py",
    "tests/files/test_s3.py",
    "tests/ops/test_request_heads.py",
    "tests/spend/test_processes.py",
)
# The modules whose tests take longest (seconds each: schemathesis, processes killed and
# waited for, TypeScript compilers): they run first, so that none starts near the end of a run
# and goes on alone while the other workers have finished.
LONGEST = (
    "tests/api/test_contract_fuzz.py",
    "tests/webhooks/test_processes.py",
    "tests/spend/test_processes.py",
    "tests/api/test_processes.py",
    "tests/ops/test_request_heads.py",
    "tests/api/test_reader_watch.py",
    "tests/api/test_typescript_types.py",
    "tests/api/test_typescript_types_hey_api.py",
    "tests/storage/test_migrations.py",
    "tests/storage/test_migration_lock.py",
    "tests/runs/test_live_memory.py",
    "tests/api/test_generated_client.py",
)
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``LONGEST`` modules' tests first, in that order, each module's in its own."""
    rank = {config.rootpath / path: n for n, path in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.path, len(LONGEST)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (``make test``): each test goes to whichever worker is free, but those
    under ``ONE_WORKER`` all go to one, and those of each ``ONE_WORKER_EACH`` module to one.
    (xdist's own ``xdist_group`` marks no longer group anything under pytest 9.2, whose node
    ids do not take the group suffix xdist appends.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in ONE_WORKER_EACH:
                return module
            return next((group for group in ONE_WORKER if nodeid.startswith(group)), nodeid)

    return OneWorkerGroups(config, log)


@pytest.fixture(scope="session", autouse=True)
def sealed_environment() -> Iterator[None]:
    """No provider key, base URL or default reaches a test or a process a test starts."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(PROVIDER_ENV_PREFIXES) or name in PROVIDER_ENV_NAMES:
                patch.delenv(name)
        yield


def make_alembic_config(database_url: str) -> Config:
    """Alembic's config for the repository's migrations, pointed at ``database_url``."""
    config = Config(str(REPO_ROOT / "alembic.ini"))
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False  # leave pytest's logging alone
    return config


@dataclass
class PostgresServer:
    """The PostgreSQL server the tests use, and the throw-away databases made on it."""

    url: str
    prefix: str = field(default_factory=lambda: f"parley_test_{secrets.token_hex(4)}")
    counter: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def migrated(self) -> str:
        """The session's migrated database, emptied before each test."""
        return f"{self.prefix}_migrated"

    def url_for(self, database: str) -> str:
        return make_url(self.url).set(database=database).render_as_string(hide_password=False)

    def dsn(self, database: str = "postgres") -> str:
        url = make_url(self.url).set(drivername="postgresql", database=database)
        return url.render_as_string(hide_password=False)

    async def execute(self, *statements: str, database: str = "postgres") -> None:
        connection = await asyncpg.connect(self.dsn(database), timeout=5)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    async def create(self) -> str:
        """A new empty database; returns its name."""
        name = f"{self.prefix}_{next(self.counter)}"
        await self.execute(f'CREATE DATABASE "{name}"')
        return name

    async def empty(self) -> None:
        """Empty every table of the migrated database: ``DELETE``, the referencing tables first.
        (A test leaves a few rows: ``TRUNCATE`` made new files for every table and index, 30 ms
        of the server's time before each test.)

        A transaction an earlier test left open on rows fails this test, not hangs it, and not
        every test after it: the sessions holding them are named, then ended.
        """
        tables = reversed(Base.metadata.sorted_tables)
        emptying = "; ".join(f'DELETE FROM "{t.name}"' for t in tables)  # one transaction
        connection = await asyncpg.connect(self.dsn(self.migrated), timeout=5)
        try:
            await connection.execute("SET lock_timeout = '10s'")
            try:
                await connection.execute(emptying)
            except asyncpg.LockNotAvailableError:
                leaked = await connection.fetch(
                    "SELECT pid, state, application_name, left(query, 200) AS query,"
                    " pg_terminate_backend(pid) AS ended FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                pytest.fail(
                    "an earlier test left sessions holding the tables: "
                    + "; ".join(str(dict(row)) for row in leaked),
                    pytrace=False,
                )
        finally:
            await connection.close()

    async def drop(self, name: str) -> None:
        await self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def drop_all(self) -> None:
        connection = await asyncpg.connect(self.dsn(), timeout=5)
        try:
            names = await connection.fetch(
                "SELECT datname FROM pg_database WHERE datname LIKE $1", f"{self.prefix}_%"
            )
            for row in names:
                await connection.execute(f'DROP DATABASE IF EXISTS "{row[0]}" WITH (FORCE)')
        finally:
            await connection.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The PostgreSQL server with a migrated database; skips if it does not answer (not in CI)."""
    server = PostgresServer(POSTGRES_URL)
    try:
        asyncio.run(server.execute("SELECT 1"))
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL does not answer at {POSTGRES_URL} ({exc!r})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true requires PostgreSQL", pytrace=False)
        pytest.skip(f"{reason}; set PARLEY_TEST_POSTGRES_URL or start PostgreSQL to run these")
    try:
        asyncio.run(server.execute(f'CREATE DATABASE "{server.migrated}"'))
        command.upgrade(make_alembic_config(server.url_for(server.migrated)), "head")
        yield server
    finally:
        asyncio.run(server.drop_all())


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that each test copies."""
    path = tmp_path_factory.mktemp("sqlite-template") / "parley.db"
    command.upgrade(make_alembic_config(f"sqlite+aiosqlite:///{path}"), "head")
    return path


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which database the test runs on: "sqlite" or "postgres"."""
    return str(request.param)


@pytest.fixture
def backend_template(backend: str, request: pytest.FixtureRequest) -> Path | PostgresServer:
    """The session's migrated database for this backend (set up outside any event loop)."""
    name = "sqlite_template" if backend == "sqlite" else "postgres_server"
    template: Path | PostgresServer = request.getfixturevalue(name)
    return template


def copy_sqlite(template: Path, directory: Path) -> str:
    path = directory / "parley.db"
    shutil.copyfile(template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture
async def database_url(
    backend: str, backend_template: Path | PostgresServer, tmp_path: Path
) -> AsyncIterator[str]:
    """The URL of a migrated database holding no rows, for this test alone."""
    if backend == "sqlite":
        yield copy_sqlite(cast(Path, backend_template), tmp_path)
        return
    server = cast(PostgresServer, backend_template)
    await server.empty()
    yield server.url_for(server.migrated)


@pytest.fixture
async def blank_database_url(
    backend: str, backend_template: Path | PostgresServer, tmp_path: Path
) -> AsyncIterator[str]:
    """The URL of an empty database (not migrated) of this test's own, dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/blank/parley.db"
        return
    server = cast(PostgresServer, backend_template)
    name = await server.create()
    try:
        yield server.url_for(name)
    finally:
        await server.drop(name)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """A Database on this test's own migrated database, disposed after the test."""
    db = Database(database_url)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def alembic_config() -> Callable[[str], Config]:
    """Builds Alembic's config for the repository's migrations, pointed at a URL."""
    return make_alembic_config
