"""Whether the client of a stream still reads: its TCP receive window, not one blocked send.

May import the standard library only. A client that keeps its connection open but reads nothing
blocks no ``send`` until the kernel's buffers on both sides are full — megabytes, minutes at a
model's pace. What the kernel does know at once: the client's receive window. While the client
reads, the window's right edge (bytes it acknowledged + the window it offers) moves on; a client
that reads nothing leaves it where it is, and our data waits behind it (``tcpi_notsent_bytes``).
``ReaderWatch`` calls a stream's client gone when that has lasted ``patience`` seconds, and the
connection is then aborted, so the run sees the client leave as if it had disconnected.

It needs the connection's transport, which Parley's HTTP protocol puts in the request's scope
(``app.server``, ``TRANSPORT_KEY``) and Linux's ``TCP_INFO``; without them (another server, another
system) it watches nothing and the send timeout alone applies. A client whose window moves by
less than a segment in ``patience`` (on loopback, 64 KiB) counts as not reading.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Mapping
from typing import Any

TRANSPORT_KEY = "parley.transport"
"""The scope's ``extensions`` key under which the server puts the connection's transport."""


# struct tcp_info (include/uapi/linux/tcp.h): the fields read, at their offsets since Linux 4.x
# for bytes_acked and notsent_bytes, and 6.x for snd_wnd (the peer's window, scaled, in bytes).
_BYTES_ACKED = struct.Struct("=Q")
_OFFSET_BYTES_ACKED = 120
_OFFSET_NOTSENT = 144
_OFFSET_SND_WND = 228
_INFO_SIZE = 232


def _window(sock: Any) -> tuple[int, int] | None:
    """(the right edge of the peer's receive window, our bytes waiting behind it), or None."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_SIZE)
    except (OSError, AttributeError):
        return None
    if len(info) < _INFO_SIZE:
        return None  # a kernel without snd_wnd
    (acked,) = _BYTES_ACKED.unpack_from(info, _OFFSET_BYTES_ACKED)
    (notsent,) = struct.unpack_from("=I", info, _OFFSET_NOTSENT)
    (window,) = struct.unpack_from("=I", info, _OFFSET_SND_WND)
    return acked + window, notsent


class ReaderWatch:
    """Tells, checked now and then, whether a connection's peer has stopped reading."""

    def __init__(self, transport: asyncio.Transport, sock: Any, patience: float) -> None:
        self.transport = transport
        self.sock = sock
        self.patience = patience
        self._edge = -1
        self._since = 0.0

    @classmethod
    def of(cls, scope: Mapping[str, Any], patience: float) -> ReaderWatch | None:
        """The watch of the request's connection, or None when it cannot be watched."""
        transport = (scope.get("extensions") or {}).get(TRANSPORT_KEY)
        if patience <= 0 or transport is None:
            return None
        sock = transport.get_extra_info("socket")  # asyncio's TransportSocket
        if sock is None or sock.type != socket.SOCK_STREAM or _window(sock) is None:
            return None
        return cls(transport, sock, patience)

    def stalled(self, now: float) -> bool:
        """Whether data has waited behind an unmoving window for ``patience`` seconds."""
        seen = _window(self.sock)
        if seen is None:
            return False
        edge, waiting = seen
        if not waiting and not self.transport.get_write_buffer_size():
            self._edge = -1  # nothing waits: an idle reader is a reader
            return False
        if edge != self._edge:
            self._edge, self._since = edge, now
            return False
        return now - self._since >= self.patience

    def check(self, now: float) -> bool:
        """Whether the peer is found not reading (then the connection is aborted, so the
        stream sees its client leave). Called now and then (app/api/event_stream.py)."""
        if not self.stalled(now):
            return False
        self.transport.abort()  # said by its stream, in its request's log context
        return True
