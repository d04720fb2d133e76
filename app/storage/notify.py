"""Listening for PostgreSQL notifications on a connection of its own (other databases poll).

Imports app.storage, and asyncpg once it listens (a SQLite server never loads it). One
``Listener`` per process hears what other processes tell it at their commits
(``RunRepository.notify``): new events of a run, a cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from app.storage.database import Database
from app.storage.runs import NOTIFY_CHANNEL

log = logging.getLogger(__name__)
_KEEPALIVE_SECONDS = 15


class Listener:
    """LISTENs on the runs channel and hands each payload to ``callback``; reconnects."""

    def __init__(self, database: Database, callback: Callable[[str], None]) -> None:
        self._database = database
        self._callback = callback
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    @property
    def enabled(self) -> bool:
        """Whether the database can notify (PostgreSQL)."""
        return self._database.url.get_backend_name() == "postgresql"

    def start(self) -> None:
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._listen(), name="parley-listener")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this close was cancelled (a shutdown that bounds it), not the task
            self._task = None

    def _on_notify(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            self._callback(payload)
        except Exception:
            log.exception("a notification could not be handled: %r", payload[:200])

    async def _listen(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # here: 3 MB a SQLite worker never needs

        dsn = self._database.url.set(drivername="postgresql").render_as_string(hide_password=False)
        while True:
            connection = None
            try:
                connection = await asyncpg.connect(dsn, timeout=10)
                await connection.add_listener(NOTIFY_CHANNEL, self._on_notify)
                self.connected.set()
                while not connection.is_closed():  # a half-open connection shows on a query
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel that
                    # lands as the query is answered, and close() then waited forever.
                    async with asyncio.timeout(_KEEPALIVE_SECONDS):
                        await connection.execute("SELECT 1")
                    await asyncio.sleep(_KEEPALIVE_SECONDS)
            except asyncio.CancelledError:
                if connection is not None:  # closed: no goodbye a stalled database holds up
                    connection.terminate()
                raise
            except Exception as exc:  # whatever broke, listen again (polling covers the gap)
                log.warning("listening for run notifications failed (%s); retrying", exc)
            finally:
                self.connected.clear()
                if connection is not None and not connection.is_closed():
                    with contextlib.suppress(Exception):
                        await asyncio.shield(connection.close(timeout=2))
            await asyncio.sleep(1)
