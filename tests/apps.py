"""The apps tests build in their own process (``create_app``: in-process clients, uvicorn on a
thread), about 1,300 of them a run: what is done for their cost, not for what they check.

Imports pytest and FastAPI's dependency module; registered by tests/conftest.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.dependencies import models


@pytest.fixture(scope="session", autouse=True)
def apps_resolve_routes_when_asked() -> Iterator[None]:
    """The apps served on the test's own thread (in-process clients) skip the start-up warm-up
    (``_warm_up`` in app/main.py): it resolves every route ahead of its first request, 25 ms of
    CPU, a third of an app's start, for a test that asks two or three of them (each resolves
    on first use). Apps served by uvicorn on threads of their own (``LiveServer``) warm up:
    FastAPI resolves a route's parameters on route objects every app shares, which two threads
    must not do at once (a request then failed on a warning pydantic raised mid-way). The
    uvicorn processes tests start (tests/processes.py) warm up as served."""
    import app.main

    warm_up = app.main._warm_up

    async def on_other_threads(app: FastAPI) -> None:
        if threading.current_thread() is not threading.main_thread():
            await warm_up(app)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app.main, "_warm_up", on_other_threads)
        yield


# FastAPI remembers, for up to 4,096 callables, whether each is a generator: the docs pages'
# endpoints of every app are closures over that app, so each app stayed in memory (1.5 MB and
# 7,500 objects; a worker ended at a gigabyte, its last garbage collection taking seconds).
_CALLABLE_CACHES = [f for f in vars(models).values() if hasattr(f, "cache_clear")]


@pytest.fixture(autouse=True)
def apps_are_forgotten() -> Iterator[None]:
    """After each test, FastAPI forgets the callables of the apps it built."""
    yield
    for cache in _CALLABLE_CACHES:
        cache.cache_clear()
