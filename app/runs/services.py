"""What the server is made of for one process: database, model selector, tools, live runs.

May import the domain, storage, providers, settings, webhooks and the runs layer. Built once by
``create_app``; ``start`` and ``stop`` bracket the process's serving (the app's lifespan).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from app.observability import metrics
from app.providers import build_selector, close_selector, open_selector
from app.runs.config import ConfigContext
from app.runs.live import RunManager
from app.runs.server_tools import builtin_tools
from app.runs.starts import StartGroups
from app.runs.titles import Titler
from app.runs.writer import EventWriter
from app.settings import Settings
from app.spend import KeyAccess, PriceTable, load_prices
from app.storage import ConversationRepository, Database
from app.storage.files import FileStore, FileSweeper
from app.storage.notify import Listener
from app.webhooks.delivery import Deliverer
from app.webhooks.events import WAKE

log = logging.getLogger(__name__)


@dataclass
class Services:
    """The long-lived parts every request uses."""

    settings: Settings
    database: Database
    configs: ConfigContext
    manager: RunManager = field(default_factory=RunManager)
    writer: EventWriter = field(init=False)
    listener: Listener = field(init=False)
    files: FileStore = field(init=False)  # uploads and attachments (docs/files.md)
    file_sweeper: FileSweeper = field(init=False)
    titler: Titler = field(init=False)
    keys: KeyAccess = field(init=False)
    """Who is calling (database keys, cached briefly) and their requests per minute."""
    prices: PriceTable = field(init=False)
    deliverer: Deliverer = field(init=False)
    starts: StartGroups = field(init=False)
    """Runs' starts, grouped into shared write transactions (app/runs/starts.py)."""

    def __post_init__(self) -> None:
        self.keys = KeyAccess(self.settings, self.database)
        self.prices = load_prices(self.settings.prices_file)
        self.writer = EventWriter(
            self.settings,
            self.manager,
            lambda: self.repository(None),
            lambda: self.reader(None),
            self.prices,
        )
        self.writer.on_flush = metrics.event_log_flush
        self.files = FileStore(self.database, self.settings)
        self.file_sweeper = FileSweeper(self.files)
        self.titler = Titler(
            self.settings, self.configs.selector, self.repository, self.reader, self.prices
        )
        self.deliverer = Deliverer(self.settings, self.database)
        self.listener = Listener(self.database, self._on_notification)
        self.starts = StartGroups(self.database, parallel=1 if self.database.is_sqlite else 4)

    def _on_notification(self, payload: str) -> None:
        """A NOTIFY payload: new webhook deliveries wake the deliverer, the rest are runs'."""
        if payload == WAKE:
            self.deliverer.wake()
        else:
            self.manager.on_notification(payload)

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        configs = ConfigContext(
            selector=build_selector(settings),
            server_tools=builtin_tools(),
            tool_timeout=settings.tool_timeout_seconds,
            context_trim_to=settings.context_trim_to if settings.context_trim_to < 1 else None,
        )
        return cls(settings, Database.from_settings(settings), configs)

    @asynccontextmanager
    async def repository(self, owner: str | None) -> AsyncIterator[ConversationRepository]:
        """``owner``'s repository on a new session, committed once when the block ends without
        error. ``None`` is the system's unscoped view, for work done for no caller.

        A write in it that meets the expired lease of a run raises LeaseExpired: recovering
        that run is the use case's step (``recovering``, app/runs/recovery.py)."""
        async with self.database.transaction() as session:
            yield ConversationRepository(session, owner=owner)

    @asynccontextmanager
    async def reader(self, owner: str | None) -> AsyncIterator[ConversationRepository]:
        """``owner``'s repository on a read-only session: it never waits for writers."""
        async with self.database.session(readonly=True) as session:
            yield ConversationRepository(session, owner=owner)

    # --- the process's lifetime ----------------------------------------------------------------

    async def start(self) -> None:
        """Make the provider clients; start the event writer, the notification listener and
        the webhook deliverer."""
        open_selector(self.configs.selector)
        self.writer.start()
        self.listener.start()
        self.file_sweeper.start()
        self.deliverer.start()

    async def drain(self) -> None:
        """Take no new runs; stop every live run as ``interrupted``; wait for their endings."""
        self.manager.shutting_down = True
        runs = self.manager.all()
        for run in runs:
            run.stop("shutdown")
        tasks = [r.task for r in runs if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.settings.shutdown_drain_seconds)

    async def stop(self) -> None:
        """Drain, store what waits, close connections. Storing and closing get
        ``shutdown_drain_seconds`` each: a database that stopped answering does not keep the
        process from exiting (what it could not store is what a crash would lose)."""
        await self.drain()
        await self.titler.close()
        await self._within_drain(self.writer.close(), "store the last events")
        await self.deliverer.close()
        await self.listener.close()
        await close_selector(self.configs.selector)
        await self.file_sweeper.close()
        await self._within_drain(self.database.dispose(), "close its connections")

    async def _within_drain(self, step: Awaitable[None], what: str) -> None:
        seconds = self.settings.shutdown_drain_seconds
        try:
            async with asyncio.timeout(seconds):
                await step
        except TimeoutError:
            log.warning("shutting down: the database did not answer in %g s to %s", seconds, what)
