"""The apps tests build in their own process (``create_app``: in-process clients, uvicorn on a
thread), about 1,300 of them a run: what is done for their cost, not for what they check.

Imports pytest and FastAPI's dependency module; registered by tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.dependencies import models

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
