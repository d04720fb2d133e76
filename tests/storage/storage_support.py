"""Helpers for the storage tests: a clock that moves when told, and a transaction per call.

Imports app.storage and SQLAlchemy. A module of its own (not conftest) so tests can import it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import NullPool, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.domain import MessageList
from app.storage import ConversationRecord, ConversationRepository, Database

T = TypeVar("T")


async def backend_pid(session: AsyncConnection) -> int:
    """The PostgreSQL server process behind ``session``."""
    return int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def terminate_backends(database: Database, *pids: int) -> None:
    """End those PostgreSQL server processes from a connection of their own (as a server restart
    or an administrator would): their connections are dead, their owners do not know yet."""
    killer = create_async_engine(database.url, poolclass=NullPool)  # not from the pool
    try:
        async with killer.connect() as other:
            for pid in pids:
                await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await killer.dispose()


# JSON that PostgreSQL's jsonb would not give back as sent: floats it reads back as integers
# (1e16 as 10000000000000000), a negative zero, an integer past 64 bits, keys out of its order.
AWKWARD_JSON: dict[str, Any] = {
    "bbb": 1,
    "a": 2,
    "x": -0.0,
    "z": 1e16,
    "w": 12345678901234567.0,
    "max": 1.7976931348623157e308,
    "big": 2**64 + 1,
    "nested": {"zz": [0.5, -0.0, 1e16], "a": None},
}


def as_sent(value: Any) -> str:
    """The JSON text of ``value``: unlike ``==``, tells 1e16 from 10**16, -0.0 from 0.0, and
    keys in another order."""
    return json.dumps(value)


class FakeClock:
    """A clock that moves only when told to, starting at a fixed instant."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Store:
    """Runs each repository call in its own committed transaction, as a use case would."""

    def __init__(self, database: Database, clock: FakeClock) -> None:
        self.database = database
        self.clock = clock

    async def __call__(
        self,
        operation: Callable[[ConversationRepository], Awaitable[T]],
        owner: str | None = None,
    ) -> T:
        """``operation`` on ``owner``'s repository (default: the system's unscoped one)."""
        async with self.database.transaction() as session:
            return await operation(ConversationRepository(session, owner=owner, clock=self.clock))

    async def create(self, messages: MessageList | None = None, **kw: Any) -> ConversationRecord:
        owner = kw.pop("owner", "alice")
        config = kw.pop("config", {})
        metadata = kw.pop("metadata", {})
        return await self(lambda r: r.create(messages or MessageList(), config, metadata), owner)

    async def sql(self, statement: str, **params: Any) -> list[Any]:
        """Raw SQL against the test database (to corrupt rows or look behind the repository)."""
        async with self.database.transaction() as session:
            result = await session.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []  # type: ignore[attr-defined]
