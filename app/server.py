"""The HTTP/1.1 protocol Parley is served with: uvicorn's h11 protocol and a deadline for the head.

Imports uvicorn and h11 only. uvicorn bounds a request head's size with h11
(``--h11-max-incomplete-event-size``, a 400 past it) but times nothing out before the first
response of a connection, so a client sending its head one byte at a time would hold a
connection forever. ``HeadTimeoutH11Protocol`` answers 408 and closes a connection whose head is
not complete ``HEAD_TIMEOUT_SECONDS`` after the connection opened, or after the first byte of
the next request on a kept-alive connection (idle time between requests is uvicorn's
``--timeout-keep-alive``). Served as ``--http app.server:HeadTimeoutH11Protocol``: the Makefile's
``run``, the Dockerfile's ``CMD`` (docs/deploy.md, "Request heads").
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_SECONDS = 10.0
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 29\r\nconnection: close\r\n\r\nRequest head took too long.\r\n"
)
_logger = logging.getLogger("uvicorn.error")


class HeadTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections whose request head is too slow to arrive."""

    head_timeout: float = HEAD_TIMEOUT_SECONDS
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._head_timer is None:  # the first bytes of a kept-alive connection's request
                self._arm_head_timer()
        else:
            self._cancel_head_timer()

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
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            _logger.warning("Request head not complete within %.0f s: closing.", self.head_timeout)
            self.transport.write(_TIMEOUT_RESPONSE)
            self.transport.close()
