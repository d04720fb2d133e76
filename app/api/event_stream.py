"""The streaming response of every stream route, and the one timer that looks after them all.

May import Starlette and app.api.reader_watch. An ``EventStream`` sends its body's chunks as
they come, as ``text/event-stream``; a task of its own waits for the client to disconnect, and
``OpenStreams`` — one per app, one timer for every open stream — sends the keep-alive pings,
cuts a client that reads nothing (a send blocked for ``PARLEY_SSE_SEND_TIMEOUT_SECONDS``, or a
TCP window standing still as long: app/api/reader_watch.py) and, on shutdown, ends the streams
still open after the drain. A stream whose client is gone is cancelled where it waits; its body
is closed and ``on_close`` called, whatever ended it.

This replaced sse-starlette's ``EventSourceResponse``, which gave every response an anyio task
group of four tasks (the stream, its pings, the shutdown signal, the disconnect) and a cancel
scope around every send: 11% of a run start's CPU, and a part of every token's
(docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.api.reader_watch import TRANSPORT_KEY, ReaderWatch

log = logging.getLogger(__name__)

_END: dict[str, Any] = {"type": "http.response.body", "body": b"", "more_body": False}
_HEADERS = {"Cache-Control": "no-store", "Connection": "keep-alive", "X-Accel-Buffering": "no"}


class EventStream(Response):
    """``text/event-stream`` from an async iterator of encoded chunks (a stream route's body).

    Ends when the body does (then the response is completed), when the client disconnects or
    stops reading, or when ``OpenStreams.close`` cuts it at shutdown (then the response is
    completed too, so the client sees the stream end, not a broken connection).
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        body: AsyncIterator[bytes],
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], None] | None = None,
        status_code: int = 200,  # FastAPI reads the default for the OpenAPI document
    ) -> None:
        self.status_code = status_code
        # What ends the stream, run after it as a response's background task is — and by who
        # drops the response unsent (app/api/idempotency.py), so a started run is detached.
        self.background = BackgroundTask(self._finish)
        self.body_iterator = body
        self.init_headers({**_HEADERS, **(headers or {})})
        self._on_close = on_close
        self._task: asyncio.Task[Any] | None = None
        self._transport: asyncio.Transport | None = None
        self._ended = False  # the body is done (or the stream cut): a disconnect changes nothing
        self.gone: str | None = None
        """Why the stream was cut short ("disconnect", "send timeout", "not reading": its TCP
        window stood still, "shutdown"), if it was."""
        self.sending_since = 0.0
        """When the sends under way began (the loop's clock), 0 when none is."""
        self._sends = 0
        self.last_ping = 0.0
        """When the stream last had a keep-alive comment, or began (the loop's clock)."""
        self.watch: ReaderWatch | None = None
        self._send_to: Send | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        if scope.get("method") == "HEAD":  # headers as a GET's; the body is never started
            await send(start)
            await send(_END)
            await self._finish()
            return
        streams = OpenStreams.of(scope)
        self._task = asyncio.current_task()
        listener: asyncio.Task[None] | None = None
        try:  # whatever fails from here on, the body is closed and ``on_close`` called
            self._transport = (scope.get("extensions") or {}).get(TRANSPORT_KEY)
            self.watch = ReaderWatch.of(scope, streams.send_timeout)
            self._send_to = send
            self.last_ping = asyncio.get_running_loop().time()
            streams.add(self)
            listener = asyncio.create_task(self._listen(receive))
            await self._send(send, start)
            if streams.closed:  # opened after the shutdown ended the others: ended at once
                self.gone = "shutdown"
                await self._end_at_shutdown(send)
            else:
                await self._stream(send)
        except asyncio.CancelledError:
            if self.gone is None or self._uncancel() > 0:
                raise  # cancelled by someone else (the server): not ours to swallow
            if self.gone in ("send timeout", "not reading"):
                log.info(
                    "a client read nothing for %ss: its stream was closed", streams.send_timeout
                )
            elif self.gone == "shutdown":
                await self._end_at_shutdown(send)
        finally:
            self._ended = True
            if listener is not None:
                listener.cancel()
            streams.discard(self)
            await self._finish()

    async def _stream(self, send: Send) -> None:
        async for chunk in self.body_iterator:
            await self._send(send, {"type": "http.response.body", "body": chunk, "more_body": True})
        await self._send(send, _END)  # timed and cut like any send while it blocks
        self._ended = True

    async def _end_at_shutdown(self, send: Send) -> None:
        """The client sees the stream end, if it still reads within a second; else its
        connection is aborted (a graceful close would wait for it to read)."""
        try:
            async with asyncio.timeout(1):
                await send(_END)
        except Exception:
            if self._transport is not None:
                self._transport.abort()

    async def _send(self, send: Send, message: dict[str, Any]) -> None:
        if not self._sends:  # a ping may be under way beside the stream's own send
            self.sending_since = asyncio.get_running_loop().time()
        self._sends += 1
        try:
            await send(message)
        finally:
            self._sends -= 1
            if not self._sends:
                self.sending_since = 0.0

    async def _listen(self, receive: Receive) -> None:
        """Wait for the client to go (the request's body was read by the route)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.cut("disconnect")

    def cut(self, why: str) -> bool:
        """End the stream where it waits: its client is gone, or the server is stopping. False
        when it has ended, or was cut, already."""
        if self._ended or self.gone is not None or self._task is None:
            return False
        self.gone = why
        if why == "send timeout" and self._transport is not None:
            self._transport.abort()  # the connection is no use any more: its client is told
        self._task.cancel()
        return True

    async def ping(self) -> None:
        """Send a keep-alive comment, unless the stream ended meanwhile."""
        if self._ended or self._send_to is None:
            return
        message = {"type": "http.response.body", "body": _PING, "more_body": True}
        with contextlib.suppress(Exception):  # the stream ended while it waited: no matter
            await self._send(self._send_to, message)

    def _uncancel(self) -> int:
        return self._task.uncancel() if self._task is not None else 0

    async def _finish(self) -> None:
        """Close the body (its ``finally`` runs) and call ``on_close``, once."""
        on_close, self._on_close = self._on_close, None
        try:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if on_close is not None:
                on_close()


class OpenStreams:
    """A process's open event streams, and the timer that pings them, cuts the ones whose
    client stopped reading and, at shutdown, ends the ones still open."""

    def __init__(self, ping_seconds: float = 0, send_timeout: float = 0) -> None:
        self.ping_seconds = ping_seconds
        self.send_timeout = send_timeout
        self._open: set[EventStream] = set()
        self._timer: asyncio.Task[None] | None = None
        self._emptied: asyncio.Event | None = None  # set when the last closes, at shutdown
        self.closed = False
        """Shutdown ended the open streams: one opened since is ended once it has begun."""
        every = [s for s in (ping_seconds / 2, send_timeout / 4) if s > 0]
        self._every = min([1.0, *every]) if every else 0.0

    @staticmethod
    def of(scope: Scope) -> OpenStreams:
        """The app's streams (``app.state.streams``); streams of an app without them are
        neither pinged nor timed out."""
        state = getattr(scope.get("app"), "state", None)
        streams = getattr(state, "streams", None)
        return streams if isinstance(streams, OpenStreams) else _UNWATCHED

    def add(self, stream: EventStream) -> None:
        self._open.add(stream)
        timer = self._timer
        if self._every and (timer is None or timer.done() or not _here(timer)):
            # In a context of its own: not the request's that opened the first stream (its
            # log lines would name that request, and keep its scope for the process's life).
            self._timer = asyncio.create_task(
                self._tick(), name="parley-streams", context=contextvars.Context()
            )

    def discard(self, stream: EventStream) -> None:
        self._open.discard(stream)
        if not self._open and self._emptied is not None:
            self._emptied.set()

    def __len__(self) -> int:
        return len(self._open)

    async def close(self, grace: float) -> None:
        """At shutdown: wait up to ``grace`` seconds for the open streams to end (the drain
        ends the runs they read), then end the others."""
        if self._open:
            self._emptied = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._emptied.wait(), grace)
        if self._open:
            log.info("shutting down: ending %d streams still open", len(self._open))
        self.closed = True
        for stream in list(self._open):
            stream.cut("shutdown")

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while self._open:
            await asyncio.sleep(self._every)
            now = loop.time()
            for stream in list(self._open):
                try:
                    self._look_after(stream, now)
                except Exception:  # one stream's trouble must not stop the others' timer
                    log.exception("looking after an open stream failed")

    def _ping_due(self, stream: EventStream, now: float) -> bool:
        due = not stream.sending_since and now - stream.last_ping >= self.ping_seconds
        return bool(self.ping_seconds) and due

    def _look_after(self, stream: EventStream, now: float) -> None:
        if stream.gone is not None:  # cut: it is ending
            return
        blocked = stream.sending_since and now - stream.sending_since >= self.send_timeout > 0
        if blocked and stream.cut("send timeout"):  # said by the stream, once
            return
        if stream.watch is not None and stream.watch.check(now):
            stream.cut("not reading")
        elif self._ping_due(stream, now):
            stream.last_ping = now
            task = asyncio.create_task(stream.ping())
            _pings.add(task)
            task.add_done_callback(_pings.discard)


def _here(task: asyncio.Task[None]) -> bool:
    """Whether ``task`` runs on this event loop (an app may serve on several, one after the
    other, in tests)."""
    return task.get_loop() is asyncio.get_running_loop()


_PING = b": ping\n\n"
_pings: set[asyncio.Task[None]] = set()  # the pings under way, held until done
_UNWATCHED = OpenStreams()
