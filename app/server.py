"""The HTTP/1.1 protocol Parley is served with: uvicorn's httptools protocol, its heads bounded.

Imports uvicorn and the name of its scope extension (app.api.reader_watch). uvicorn's
httptools protocol reads a request head of any size and times
nothing out before a connection's first response, so one client could hold a connection (and the
memory of its head) forever. ``BoundedHttpToolsProtocol`` answers 431 and closes a connection
whose head is still not complete after ``HEAD_LIMIT_BYTES``, and 408 when it is not complete
``HEAD_TIMEOUT_SECONDS`` after the connection opened, or after the first byte of the next request
on a kept-alive connection (idle time between requests is uvicorn's ``--timeout-keep-alive``).
It keeps httptools' parser, the fast one: the stream path writes through it
(docs/performance.md). Served as ``--http app.server:BoundedHttpToolsProtocol``: the Makefile's
``run``, the Dockerfile's ``CMD`` (docs/deploy.md, "Request heads"). It relies on uvicorn's
``HttpToolsProtocol`` callbacks (``on_message_begin``, ``on_headers_complete``,
``on_message_complete``); tests/ops/test_request_heads.py runs the shipped command. It also hands
each request's transport to the app (``scope["extensions"]``), so a stream can tell a client that
reads nothing from one that reads slowly (app/api/reader_watch.py).
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.reader_watch import TRANSPORT_KEY

HEAD_LIMIT_BYTES = 64 * 1024
HEAD_TIMEOUT_SECONDS = 10.0
_logger = logging.getLogger("uvicorn.error")


def _refusal(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(text)).encode() + b"\r\nconnection: close\r\n\r\n" + text
    )


_TOO_LARGE = _refusal(b"431 Request Header Fields Too Large", b"Request head too large.\r\n")
_TOO_SLOW = _refusal(b"408 Request Timeout", b"Request head took too long.\r\n")


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing connections whose request head is too large or too
    slow to arrive."""

    head_limit: int = HEAD_LIMIT_BYTES
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    _head_timer: asyncio.TimerHandle | None = None
    _in_head: bool = True
    _head_bytes: int = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.head_limit:
            self._refuse(_TOO_LARGE, "Request head over %d bytes: closing.", self.head_limit)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # the stream routes watch whether their client still reads (app/api/reader_watch.py)
        self.scope["extensions"] = {TRANSPORT_KEY: self.transport}  # type: ignore[dict-item]
        self._in_head = True
        if self._head_timer is None:  # the first bytes of a kept-alive connection's request
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0  # what comes next is the next request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head:
            self._refuse(
                _TOO_SLOW, "Request head not complete within %.0f s: closing.", self.head_timeout
            )

    def _refuse(self, response: bytes, message: str, value: float) -> None:
        if self.transport.is_closing():
            return
        _logger.warning(message, value)
        self._cancel_head_timer()
        self.transport.write(response)
        self.transport.close()
