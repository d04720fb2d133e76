"""The PostgreSQL notification listener stops when closed, whenever the close lands."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy.engine import make_url

from app.storage import Database
from app.storage.notify import Listener
from tests.processes import FreezableProxy


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_close_ends_the_listener_even_as_its_keepalive_query_is_answered(
    database: Database,
) -> None:
    """``asyncio.wait_for`` (Python 3.11) drops a cancel that lands once the awaited query has
    its answer but before the waiting task resumes: the listener went on to its 15 s sleep,
    its loop forever, and ``close()`` — so the app's shutdown, a SIGTERM'd process — never
    ended. The close is tried at each loop step after the listener's first keepalive query."""
    hung: list[int] = []
    for steps in range(12):
        listener = Listener(database, lambda payload: None)
        listener.start()
        await asyncio.wait_for(listener.connected.wait(), 10)
        for _ in range(steps):
            await asyncio.sleep(0)
            time.sleep(0.002)  # noqa: ASYNC251 - its answer arrives while the loop is busy
        closing = asyncio.ensure_future(listener.close())
        done, _ = await asyncio.wait({closing}, timeout=5)
        if closing not in done:
            hung.append(steps)
            closing.cancel()  # cancels the listener once more: it ends this time
            await asyncio.wait({closing}, timeout=5)
    assert hung == [], f"close() never returned when tried {hung} loop steps in"


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_close_does_not_wait_for_a_database_that_stopped_answering(
    database_url: str,
) -> None:
    """A process stopping while its database does not answer: the listener's connection is
    dropped, not closed politely (that waited 2 s for a goodbye the database never sent, on
    top of the shutdown's own bounds)."""
    url = make_url(database_url)
    proxy = FreezableProxy(url.port or 5432)
    database = Database(url.set(port=proxy.port).render_as_string(hide_password=False))
    listener = Listener(database, lambda payload: None)
    try:
        listener.start()
        await asyncio.wait_for(listener.connected.wait(), 10)
        proxy.frozen.set()
        async with asyncio.timeout(1):
            await listener.close()
    finally:
        proxy.close()
        await database.dispose()
