"""Fixtures of the webhook tests: a receiver, and the app set up to deliver to loopback fast."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import app_client
from tests.webhooks.receiver import Receiver

FAST = {
    "webhook_allow_private": True,  # the receiver is on loopback
    "webhook_timeout_seconds": 0.5,
    "webhook_backoff_seconds": 0.05,
    "webhook_backoff_max_seconds": 0.2,
    "webhook_poll_seconds": 0.1,
}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, sse_ping_seconds=0, **FAST)  # type: ignore[arg-type]


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


async def register(
    client: httpx.AsyncClient, url: str, events: list[str] | None = None, **headers: str
) -> dict[str, Any]:
    """Register ``url`` for ``events`` (every run ending by default); the 201's body."""
    wanted = events or [
        "run.completed",
        "run.requires_action",
        "run.failed",
        "run.interrupted",
        "run.aborted",
    ]
    response = await client.post("/webhooks", json={"url": url, "events": wanted}, headers=headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created
