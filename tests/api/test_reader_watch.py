"""A client that keeps its stream open but reads nothing counts as gone once its TCP window has
stood still for the send timeout, long before the kernel's buffers fill; one that reads slowly
does not. Against a real uvicorn served with Parley's own HTTP protocol (app/server.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn

from app.main import create_app
from app.server import BoundedHttpToolsProtocol
from app.settings import Settings
from tests.api.conftest import wait_for

# 20,000 words of 64 characters at 1 ms a word: over 20 s of model, 1.3 MB of events. No kernel
# buffer on loopback holds that much, but the run would end `completed` before it filled them.
TEXT = " ".join(f"{i:05d}" + "x" * 58 for i in range(20_000))


@asynccontextmanager
async def shipped_server(database_url: str) -> AsyncIterator[int]:
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        sse_send_timeout_seconds=2,
        offline_delay_ms=1,
        max_text_chars=2_000_000,
        max_body_bytes=4_000_000,
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        create_app(settings), log_level="warning", loop="asyncio", http=BoundedHttpToolsProtocol
    )  # as Parley ships (tests/processes.py)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:

        async def started() -> bool:
            return bool(server.started)

        assert await wait_for(started, within=60.0), "uvicorn did not start"
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


async def _open_stream(
    http: httpx.AsyncClient, port: int
) -> tuple[str, asyncio.StreamReader, asyncio.StreamWriter]:
    conv_id = (await http.post("/conversations", json={})).json()["id"]
    body = json.dumps({"messages": [{"role": "user", "text": TEXT}]}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    writer.write(
        f"POST /conversations/{conv_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    status = await reader.readline()
    if not status.startswith(b"HTTP/1.1 200"):
        writer.close()
        await writer.wait_closed()
        raise AssertionError(status)
    return conv_id, reader, writer


@asynccontextmanager
async def shipped_client(database_url: str) -> AsyncIterator[tuple[int, httpx.AsyncClient]]:
    async with (
        shipped_server(database_url) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        yield port, http


def _run_of(http: httpx.AsyncClient, conv_id: str) -> Callable[[], Any]:
    async def ended() -> Any:
        runs = (await http.get(f"/conversations/{conv_id}/runs")).json()["items"]
        return runs[0] if runs and runs[0]["status"] != "running" else None

    return ended


async def test_a_client_that_reads_nothing_is_cut_when_its_window_stands_still(
    database_url: str,
) -> None:
    async with shipped_client(database_url) as (port, http):
        conv_id, _reader, writer = await _open_stream(http, port)
        try:
            # Nothing is read from here on. Unwatched, the run would end `completed` (its
            # frames fit in the kernel's buffers as the model writes them).
            run = await wait_for(_run_of(http, conv_id), within=60.0)
            assert run is not None and run["status"] == "aborted"
            state = (await http.get(f"/conversations/{conv_id}")).json()
            assert state["status"] == "idle" and state["message_count"] == 2
            stored = (await http.get(f"/conversations/{conv_id}/messages")).json()
            reply = stored["messages"][-1]
            assert reply["incomplete"] is True and len(reply["text"]) < len(TEXT)
        finally:
            writer.close()


async def test_a_client_that_reads_slowly_is_not_cut(database_url: str) -> None:
    async with shipped_client(database_url) as (port, http):
        conv_id, reader, writer = await _open_stream(http, port)
        try:
            # 64 KiB every half second: slower than the model writes, so the window closes
            # again and again, but it moves within the 2 s of patience.
            for _ in range(12):
                await reader.read(1 << 16)
                await asyncio.sleep(0.5)
            runs = (await http.get(f"/conversations/{conv_id}/runs")).json()["items"]
            assert runs[0]["status"] == "running"
        finally:
            writer.close()
