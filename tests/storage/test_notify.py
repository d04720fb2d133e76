"""The PostgreSQL notification listener stops when closed, whenever the close lands."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.storage import Database
from app.storage.notify import Listener


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
