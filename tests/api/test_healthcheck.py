"""``python -m app.healthcheck``, the container's health check, against a real uvicorn."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from app.healthcheck import check, main
from tests.api.conftest import LiveServer


async def test_healthy_and_ready(live_server: Callable[..., LiveServer]) -> None:
    server = live_server()
    assert await asyncio.to_thread(check, server.url) is None
    assert await asyncio.to_thread(main, ["healthcheck", server.url]) == 0


async def test_nothing_listening_is_unhealthy() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert await asyncio.to_thread(main, ["healthcheck", f"http://127.0.0.1:{port}"]) == 1
