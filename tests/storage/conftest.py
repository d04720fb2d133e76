"""Fixtures for the storage tests: a controllable clock and a one-transaction-per-call helper.

Imports pytest and app.storage; the database fixtures come from tests/conftest.py.
"""

from __future__ import annotations

import pytest

from app.storage import Database
from tests.storage.storage_support import FakeClock, Store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(database: Database, clock: FakeClock) -> Store:
    return Store(database, clock)
