"""What the server is made of for one process: database, model selector, tools, settings.

May import the domain, storage, providers and settings. Built once by ``create_app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from app.providers import build_selector
from app.runs.config import ConfigContext
from app.runs.registry import RunRegistry
from app.runs.server_tools import builtin_tools
from app.settings import Settings
from app.storage import ConversationRepository, Database


@dataclass
class Services:
    """The long-lived parts every request uses."""

    settings: Settings
    database: Database
    configs: ConfigContext
    runs: RunRegistry = field(default_factory=RunRegistry)

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        configs = ConfigContext(
            selector=build_selector(settings),
            server_tools=builtin_tools(),
            tool_timeout=settings.tool_timeout_seconds,
        )
        return cls(settings, Database.from_settings(settings), configs)

    @asynccontextmanager
    async def repository(self, owner: str | None) -> AsyncIterator[ConversationRepository]:
        """``owner``'s repository on a new session, committed once when the block ends without
        error. ``None`` is the system's unscoped view, for work done for no caller."""
        async with self.database.transaction() as session:
            yield ConversationRepository(session, owner=owner)

    @asynccontextmanager
    async def reader(self, owner: str | None) -> AsyncIterator[ConversationRepository]:
        """``owner``'s repository on a read-only session: it never waits for writers."""
        async with self.database.session(readonly=True) as session:
            yield ConversationRepository(session, owner=owner)
