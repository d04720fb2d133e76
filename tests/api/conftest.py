"""Fixtures of the API tests: the app on the test database, in-process and on real uvicorn."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.main import create_app
from app.settings import Settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, sse_ping_seconds=0)


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app in-process through httpx's ASGI transport (whole responses, no disconnects)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            yield c


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app in-process on the test database."""
    async with app_client(settings) as c:
        yield c


class PrefixProxy:
    """What the app sees behind a proxy that serves it under ``prefix`` and strips it, with
    ``uvicorn --root-path <prefix>``: ASGI's ``path`` is the full one and ``root_path`` the
    prefix (uvicorn puts the root path back in front of the path it was sent). A path outside
    the prefix is the proxy's 404."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app, self.prefix = app, prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if not scope["path"].startswith(self.prefix + "/"):
                await PlainTextResponse("not behind the proxy", 404)(scope, receive, send)
                return
            scope = {**scope, "root_path": self.prefix}
        await self.app(scope, receive, send)


def _tcp_listener() -> socket.socket:
    """A listening socket on a free loopback port, made as uvicorn makes its own."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    return listener


class LiveServer:
    """uvicorn serving the app on a free loopback port, in a thread of its own; under
    ``prefix`` as a proxy would serve it (``PrefixProxy``) when one is given.

    The listening socket is bound here and handed to uvicorn: a port picked free, closed and
    bound again later may be taken in between (by another test's server or connection).
    """

    def __init__(self, settings: Settings, prefix: str = "") -> None:
        app: ASGIApp = create_app(settings)
        config = uvicorn.Config(
            PrefixProxy(app, prefix) if prefix else app,
            log_level="warning",
            lifespan="on",
            loop="asyncio",  # as Parley ships (tests/processes.py)
        )
        self.server = uvicorn.Server(config)
        # IPPROTO_TCP, as the sockets uvicorn binds itself: asyncio sets TCP_NODELAY only on a
        # connection whose socket says so, and without it each response waited out the client's
        # delayed ACK (40 ms a request here, 4 ms with it).
        self.socket = _tcp_listener()
        self.port = int(self.socket.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}{prefix}"
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60  # a loaded machine starts slowly; a dead one says so
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture
def live_server(database_url: str) -> Iterator[Callable[..., LiveServer]]:
    """Start a real uvicorn with the given settings overrides (the test database)."""
    started: list[LiveServer] = []

    def start(prefix: str = "", **overrides: Any) -> LiveServer:
        settings = Settings(database_url=database_url, sse_ping_seconds=0, **overrides)
        server = LiveServer(settings, prefix)
        started.append(server)  # stopped after the test even if it fails to start
        return server.__enter__()

    yield start
    for server in started:
        server.__exit__()


async def wait_for(check: Callable[[], Any], within: float = 3.0) -> Any:
    """Poll the async ``check`` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.02)
