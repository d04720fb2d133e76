"""The browser tests' fixtures: headless Debian chromium through Playwright, or a clear skip.

With ``PARLEY_REQUIRE_BROWSER=1`` (set by .ci/run) a missing browser fails instead of skipping.
The browser may reach loopback only: every other request is aborted and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from tests.api.conftest import live_server  # the real uvicorn fixture

__all__ = ["CuttableProxy", "live_server", "loopback_only"]

CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")


def _unavailable() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium; or set PARLEY_CHROMIUM)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The browser tests run in one event loop for the session, the loop of the one chromium
    they share (``browser``); under pytest-xdist they share one worker too (``ONE_WORKER`` in
    tests/conftest.py). Called with every test of the session: only this directory's are
    marked."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """The browser tests run on SQLite only: the API tests cover PostgreSQL."""
    return str(request.param)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[object]:
    """One headless chromium for the session (launching one takes about a second of CPU);
    each test opens contexts of its own on it, which share no cookies, storage or cache."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PARLEY_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.async_api import async_playwright, expect

    # expect() polls until its condition holds: past Playwright's 5 s only when something is
    # wrong, or a loaded machine (CI's two cores) is slow to render.
    expect.set_options(timeout=20_000)
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


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


class CuttableProxy:
    """A loopback TCP proxy in front of a server whose open connections the test can cut,
    as a dropped network would; new connections go through again, unless ``refusing`` is set
    (the network is still down)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refusing = False
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> CuttableProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        assert self.server is not None
        self.server.close()

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
