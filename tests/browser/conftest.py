"""The browser tests' fixtures: headless Debian chromium through Playwright, or a clear skip.

With ``PARLEY_REQUIRE_BROWSER=1`` (set by .ci/run) a missing browser fails instead of skipping.
The browser may reach loopback only: every other request is aborted and recorded.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.settings import Settings
from tests.api.conftest import LiveServer

CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")


def _unavailable() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium; or set PARLEY_CHROMIUM)"
    return None


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """The browser tests run on SQLite only: the API tests cover PostgreSQL."""
    return str(request.param)


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PARLEY_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def serve(database_url: str) -> Iterator[Callable[..., LiveServer]]:
    """Start a real uvicorn on the test database with the given settings overrides."""
    started: list[LiveServer] = []

    def start(**overrides: Any) -> LiveServer:
        settings = Settings(database_url=database_url, sse_ping_seconds=0, **overrides)
        server = LiveServer(settings).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__()


async def loopback_only(context: Any, pages: dict[str, str] | None = None) -> list[str]:
    """Abort every request of ``context`` that leaves loopback, except the fake ``pages``
    (URL → HTML) it serves itself; returns the list the aborted URLs are appended to."""
    blocked: list[str] = []
    pages = pages or {}

    async def handle(route: Any) -> None:
        url = route.request.url
        if url in pages:
            await route.fulfill(status=200, content_type="text/html", body=pages[url])
        elif urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1"):
            await route.continue_()
        else:
            blocked.append(url)
            await route.abort("internetdisconnected")

    await context.route("**/*", handle)
    return blocked
