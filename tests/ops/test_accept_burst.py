"""The event loop Parley ships takes in a burst of connections at once (docs/deploy.md, "The
event loop"): clients sending at the same moment (twenty here) all reach the app before it
answers the first, instead of one more being taken in each turn of a busy loop.

The connections are made before the server takes any (the kernel completes them into the
listening socket's backlog), so what is measured is the loop's, not the clients' timing: each
request awaits once, then holds the loop 5 ms, as a start does.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from typing import Any

import pytest
import uvicorn

from tests.ops.test_request_heads import shipped_command

CLIENTS = 20


def _served(loop: str) -> tuple[list[float], list[float]]:
    """``CLIENTS`` requests waiting before the server starts; when each entered the app, and
    when each was answered."""
    entered: list[float] = []
    answered: list[float] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        entered.append(time.perf_counter())
        await asyncio.sleep(0)
        busy_until = time.perf_counter() + 0.005
        while time.perf_counter() < busy_until:
            pass
        answered.append(time.perf_counter())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(CLIENTS * 2)
    clients = [socket.create_connection(listener.getsockname(), timeout=10) for _ in range(CLIENTS)]
    for client in clients:
        client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    options = dict(itertools.pairwise(shipped_command()))
    config = uvicorn.Config(
        app, loop=loop, http=options["--http"], lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]})
    thread.start()
    try:
        for client in clients:
            assert client.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        server.should_exit = True
        thread.join(10)
        for client in clients:
            client.close()
        listener.close()
    assert len(entered) == len(answered) == CLIENTS
    return entered, answered


def test_the_shipped_loop_takes_a_burst_of_connections_in_before_answering_any() -> None:
    loop = dict(itertools.pairwise(shipped_command()))["--loop"]
    entered, answered = _served(loop)
    assert max(entered) < min(answered)


def test_uvloop_takes_one_connection_a_turn_which_is_why_it_is_not_shipped() -> None:
    """If this fails, uvloop takes bursts in at once too, and may be worth shipping again
    (docs/deploy.md, "The event loop")."""
    pytest.importorskip("uvloop")
    entered, answered = _served("uvloop")
    assert max(entered) > min(answered)
