"""A tiny HTTP/1.1 server on a free loopback port that replays scripted replies, SSE included.

Standard library only. It records every request (method, path, headers, JSON body) and answers
each with the next scripted ``Reply``: a JSON body with a status and headers, or an event stream
that ends cleanly, is cut mid-way, or hangs until the client goes away (``disconnected``).

A fake of a real API enforces its rules: ``check`` sees every request first and may answer it
with the API's own refusal (a ``Reply``) instead of the script; ``responder`` answers the
requests the script has no reply left for, so a fake model can reply to what it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


@dataclass
class Received:
    """One request the server read."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """What to answer one request with.

    ``events`` (raw SSE frames) make it a stream; ``then`` says how the stream ends: ``end``
    (cleanly), ``cut`` (the connection drops mid-body) or ``hang`` (nothing more is sent until
    the client closes the connection). ``delay`` is slept before each frame.
    """

    status: int = 200
    json_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[str] | None = None
    then: Literal["end", "cut", "hang"] = "end"
    delay: float = 0.0


Answer = Callable[[Received], "Reply | None"]
"""Looks at one request; a Reply to answer it with, or None to leave it to the script."""


class FakeServer:
    """Serve scripted replies on 127.0.0.1; use ``async with FakeServer() as server``."""

    def __init__(self, check: Answer | None = None, responder: Answer | None = None) -> None:
        self.check = check
        self.responder = responder
        self.received: list[Received] = []
        self.replies: deque[Reply] = deque()
        self.disconnected = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order (one per request)."""
        self.replies.extend(replies)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests received so far."""
        return [r.body for r in self.received]

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while (request := await _read_request(reader)) is not None:
                self.received.append(request)
                reply = self._reply_to(request)
                if not await self._answer(reply, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _reply_to(self, request: Received) -> Reply:
        refusal = self.check(request) if self.check is not None else None
        if refusal is not None:
            return refusal
        if self.replies:
            return self.replies.popleft()
        answer = self.responder(request) if self.responder is not None else None
        return answer if answer is not None else _unscripted()

    async def _answer(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Send one reply; False when the connection must not be reused."""
        reason = _REASONS.get(reply.status, "Status")
        headers = dict(reply.headers)
        if reply.events is None:
            payload = json.dumps(reply.json_body).encode()
            headers |= {"content-type": "application/json", "content-length": str(len(payload))}
            writer.write(_head(reply.status, reason, headers) + payload)
            await writer.drain()
            return True
        headers |= {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
        writer.write(_head(reply.status, reason, headers))
        for frame in reply.events:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            data = frame.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        if reply.then == "end":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        if reply.then == "hang":
            with contextlib.suppress(asyncio.TimeoutError):
                while await asyncio.wait_for(reader.read(1024), 10):
                    pass  # the client sends nothing more; EOF means it closed the connection
                self.disconnected.set()
        return False  # "cut": closing now leaves the chunked body unfinished


def _head(status: int, reason: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _unscripted() -> Reply:
    return Reply(status=500, json_body={"error": {"message": "no scripted reply left"}})


async def _read_request(reader: asyncio.StreamReader) -> Received | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _ = line.decode().split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while size := int((await reader.readline()).strip() or b"0", 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(method, path, headers, json.loads(body) if body else None)
