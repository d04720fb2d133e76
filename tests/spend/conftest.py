"""Fixtures of the spend tests: the app with an admin token and a price for the offline model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import app_client

ADMIN = "admin-secret-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN}"}
# The offline model at $1,000 per million tokens in and out: a reply of a few words costs cents.
PRICES = {"models": {"echo": {"input": 1000.0, "output": 1000.0}}}


@pytest.fixture
def prices_file(tmp_path: Path) -> str:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return str(path)


@pytest.fixture
def settings(database_url: str, prices_file: str) -> Settings:
    return Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        admin_token=ADMIN,
        prices_file=prices_file,
    )


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def make_key(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    """A key made through the admin API: its view, with its token."""
    response = await client.post(
        "/admin/keys", json={"name": "test", **body}, headers=ADMIN_HEADERS
    )
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made
