"""The load generator of bench/stream.py: raw asyncio HTTP/1.1 streams, run in worker processes.

Standard library only, so that the client costs little next to the servers it measures. A
stream is one request, sent at an agreed moment; its record says when each read arrived and
how many tokens it held (token ``i`` is the JSON string ``" w<i>"``, whatever the server's
framing), and whether they came in order.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

TOKEN = re.compile(rb'" w(\d+)"')


@dataclass(frozen=True)
class Call:
    """One streaming request: ``POST path`` with a JSON body."""

    port: int
    path: str
    body: bytes


@dataclass
class Record:
    """What one stream delivered: token count, order, first-token time, gaps between reads."""

    started: float
    tokens: int = 0
    in_order: bool = True
    first: float | None = None
    ended: float = 0.0
    gaps: list[float] = field(default_factory=list)
    error: str | None = None


async def _body(reader: asyncio.StreamReader, headers: bytes, record: Record) -> None:
    """Read the body (chunked, or to EOF), counting tokens per read."""
    chunked = b"transfer-encoding: chunked" in headers.lower()
    carry = b""
    last: float | None = None
    pending = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        now = time.monotonic()
        if chunked:
            pending += data
            data, pending, done = _dechunk(pending)
        else:
            done = False
        window = carry + data
        end = 0
        for match in TOKEN.finditer(window):
            if int(match.group(1)) != record.tokens:
                record.in_order = False
            record.tokens += 1
            end = match.end()
            if record.first is None:
                record.first = now - record.started
            elif last is not None:
                record.gaps.append(now - last)
            last = now
        carry = window[max(end, len(window) - 32) :]
        if done:
            break
    record.ended = time.monotonic()


def _dechunk(buffer: bytes) -> tuple[bytes, bytes, bool]:
    """``(body bytes, rest not yet complete, finished)`` of a chunked-encoding buffer."""
    out: list[bytes] = []
    while True:
        line_end = buffer.find(b"\r\n")
        if line_end < 0:
            return b"".join(out), buffer, False
        size = int(buffer[:line_end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out), b"", True
        start = line_end + 2
        if len(buffer) < start + size + 2:
            return b"".join(out), buffer, False
        out.append(buffer[start : start + size])
        buffer = buffer[start + size + 2 :]


async def stream(call: Call, started: float) -> Record:
    """Send ``call`` now and read its whole stream."""
    record = Record(started)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", call.port, limit=1 << 20)
        writer.write(
            b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"accept: text/event-stream\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
            % (call.path.encode(), len(call.body), call.body)
        )
        headers = await reader.readuntil(b"\r\n\r\n")
        if not headers.startswith(b"HTTP/1.1 200"):
            record.error = headers.split(b"\r\n")[0].decode()
        await _body(reader, headers, record)
        writer.close()
    except (OSError, asyncio.IncompleteReadError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    return record


async def _run(calls: list[Call], go_at: float, sequential: bool) -> list[Record]:
    await asyncio.sleep(max(go_at - time.monotonic(), 0))
    if sequential:
        return [await stream(call, time.monotonic()) for call in calls]
    started = time.monotonic()
    return list(await asyncio.gather(*(stream(call, started) for call in calls)))


def run_streams(task: tuple[list[Call], float, bool]) -> list[Record]:
    """A worker process's share: its calls, all sent at ``go_at`` (or one after another)."""
    calls, go_at, sequential = task
    try:
        import uvloop

        return uvloop.run(_run(calls, go_at, sequential))
    except ImportError:  # pragma: no cover
        return asyncio.run(_run(calls, go_at, sequential))
