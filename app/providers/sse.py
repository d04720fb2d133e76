"""The one Server-Sent Events parser both provider adapters read their streams with.

Imports nothing of Parley's. Incremental: bytes in (split anywhere), events out, per the
WHATWG event-stream rules: the bytes are UTF-8, any that are not read as U+FFFD; lines end in
CRLF, LF or CR; ``data:`` lines of one event are joined with newlines; ``:`` lines are
comments; ``event:``, ``id:`` and ``retry:`` are kept; unknown fields are ignored; an event is
dispatched at a blank line, and one left without its blank line when the stream ends is
dropped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: ``event`` is ``"message"`` when the stream named none."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


_TERMINATORS = (b"\n", b"\r")


class SSEParser:
    """Feed it the body's bytes as they come; each ``feed`` returns the events completed."""

    __slots__ = ("_buffer", "_cr_pending", "_data", "_event", "_last_id", "_retry")

    def __init__(self) -> None:
        self._buffer: list[bytes] = []  # the pieces of an unfinished line
        self._cr_pending = False  # the last feed ended in CR: a leading LF belongs to it
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events that ``chunk`` completes (possibly none)."""
        if self._cr_pending and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if not chunk:
            return []
        self._cr_pending = chunk[-1:] == b"\r"
        if b"\n" not in chunk and b"\r" not in chunk:
            # a line still coming: kept in pieces and joined once, when it ends (joining at
            # every piece would copy a long line once per piece: quadratic in its length)
            self._buffer.append(chunk)
            return []
        if self._buffer:
            self._buffer.append(chunk)
            chunk = b"".join(self._buffer)
            self._buffer = []
        lines = chunk.splitlines(keepends=True)
        if not lines[-1].endswith(_TERMINATORS):
            self._buffer = [lines.pop()]
        events: list[SSEEvent] = []
        for raw in lines:
            event = self._line(raw.rstrip(b"\r\n"))
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: bytes) -> SSEEvent | None:
        if line.startswith(b"data: "):  # the common case first
            self._data.append(line[6:].decode(errors="replace"))
            return None
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        self._field(name, value.decode(errors="replace"))
        return None

    def _field(self, name: bytes, value: str) -> None:
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if "\0" not in value:
                self._last_id = value
        elif name == b"retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event = SSEEvent(self._event or "message", data, self._last_id, self._retry)
        self._data = []
        self._event = ""
        return event
