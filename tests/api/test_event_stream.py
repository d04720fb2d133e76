"""The stream routes' response (app/api/event_stream.py) driven as an ASGI server drives it:
pings every interval (none when off), a disconnect or a blocked send cuts the stream (its body
closed, ``on_close`` called once), a shutdown ends the streams still open with a completed
response, and a cancellation that is not the stream's own goes on up. Real uvicorn processes
cut real clients in tests/api/test_live.py and test_reader_watch.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from app.api.event_stream import EventStream, OpenStreams


class Client:
    """The server's side of one request: what was sent, and a disconnect to give."""

    def __init__(self, block_after: int | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.block_after = block_after

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.block_after is not None and len(self.sent) >= self.block_after:
            await asyncio.Event().wait()  # a client that reads nothing: the send never returns
        self.sent.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent)

    @property
    def completed(self) -> bool:
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body")


class Body:
    """A body of chunks sent ``every`` seconds (forever, unless ``count``), which records that
    it was closed."""

    def __init__(self, every: float, count: int | None = None) -> None:
        self.every, self.count, self.closed = every, count, False

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            n = 0
            while self.count is None or n < self.count:
                yield f"data: {n}\n\n".encode()
                n += 1
                await asyncio.sleep(self.every)
        finally:
            self.closed = True


def scope(streams: OpenStreams, transport: Any = None) -> dict[str, Any]:
    extensions = {"parley.transport": transport} if transport is not None else {}
    app = SimpleNamespace(state=SimpleNamespace(streams=streams))
    return {"type": "http", "method": "POST", "app": app, "extensions": extensions}


def response(body: Body, closes: list[str]) -> EventStream:
    return EventStream(body.chunks(), on_close=lambda: closes.append("closed"))


async def test_pings_go_every_interval_to_busy_and_idle_streams_alike() -> None:
    streams = OpenStreams(ping_seconds=0.1, send_timeout=30)
    busy, idle = Client(), Client()
    busy_body, idle_body = Body(every=0.02, count=30), Body(every=0.5, count=2)
    await asyncio.gather(
        response(busy_body, [])(scope(streams), busy.receive, busy.send),
        response(idle_body, [])(scope(streams), idle.receive, idle.send),
    )
    assert busy.body.count(b": ping\n\n") >= 2 and busy.completed
    assert idle.body.count(b": ping\n\n") >= 2 and idle.completed
    assert busy.body.count(b"data: ") == 30  # the pings went between the chunks
    assert len(streams) == 0


async def test_no_pings_when_they_are_off() -> None:
    streams = OpenStreams(ping_seconds=0, send_timeout=30)
    client = Client()
    await response(Body(every=0.2, count=3), [])(scope(streams), client.receive, client.send)
    assert b": ping" not in client.body and client.completed


async def test_a_disconnect_cuts_the_stream_and_closes_its_body_once() -> None:
    streams = OpenStreams()
    client, body, closes = Client(), Body(every=0.05), []
    call = asyncio.create_task(response(body, closes)(scope(streams), client.receive, client.send))
    await asyncio.sleep(0.2)
    client.gone.set()
    await asyncio.wait_for(call, 5)  # returns: the disconnect is no error
    assert body.closed and closes == ["closed"]
    assert not client.completed  # nobody to complete it for
    assert len(streams) == 0


async def test_a_send_that_blocks_past_the_timeout_cuts_the_stream_and_its_connection() -> None:
    streams = OpenStreams(send_timeout=0.3)
    aborted: list[bool] = []
    transport = SimpleNamespace(abort=lambda: aborted.append(True), get_extra_info=lambda _: None)
    client, body, closes = Client(block_after=3), Body(every=0.01), []
    stream = response(body, closes)
    await asyncio.wait_for(stream(scope(streams, transport), client.receive, client.send), 5)
    assert stream.gone == "send timeout" and aborted == [True]
    assert body.closed and closes == ["closed"]


async def test_a_final_send_that_blocks_past_the_timeout_is_cut_too() -> None:
    streams = OpenStreams(send_timeout=0.3)
    aborted: list[bool] = []
    transport = SimpleNamespace(abort=lambda: aborted.append(True), get_extra_info=lambda _: None)
    client, body, closes = Client(block_after=4), Body(every=0.01, count=3), []
    stream = response(body, closes)  # the start, 3 chunks: the end of the body is what blocks
    await asyncio.wait_for(stream(scope(streams, transport), client.receive, client.send), 5)
    assert stream.gone == "send timeout" and aborted == [True]
    assert not client.completed and closes == ["closed"] and len(streams) == 0


async def test_a_stream_whose_client_reads_nothing_at_shutdown_has_its_connection_aborted() -> None:
    streams = OpenStreams(send_timeout=30)
    aborted: list[bool] = []
    transport = SimpleNamespace(abort=lambda: aborted.append(True), get_extra_info=lambda _: None)
    client, body, closes = Client(block_after=2), Body(every=0.01), []
    call = asyncio.create_task(
        response(body, closes)(scope(streams, transport), client.receive, client.send)
    )
    await asyncio.sleep(0.1)  # its sends block: the client reads nothing
    await streams.close(grace=0.1)
    await asyncio.wait_for(call, 5)  # within the second the end may take, then aborted
    assert aborted == [True] and closes == ["closed"]


async def test_a_client_found_not_reading_is_cut_and_said_by_its_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    streams = OpenStreams(send_timeout=0.2)
    client, body, closes = Client(), Body(every=0.02), []
    stream = response(body, closes)
    with caplog.at_level(logging.INFO, logger="app.api.event_stream"):
        call = asyncio.create_task(stream(scope(streams), client.receive, client.send))
        await asyncio.sleep(0.05)
        stream.watch = SimpleNamespace(check=lambda now: True)  # its TCP window stood still
        await asyncio.wait_for(call, 5)
    assert stream.gone == "not reading" and body.closed and closes == ["closed"]
    assert "a client read nothing for 0.2s" in caplog.text


async def test_a_shutdown_ends_the_streams_still_open_with_a_completed_response() -> None:
    streams = OpenStreams()
    clients = [Client(), Client()]
    bodies, closes = [Body(every=0.05), Body(every=0.05)], []
    calls = [
        asyncio.create_task(response(b, closes)(scope(streams), c.receive, c.send))
        for b, c in zip(bodies, clients, strict=True)
    ]
    await asyncio.sleep(0.1)
    await streams.close(grace=0.2)
    await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert all(c.completed for c in clients) and all(b.closed for b in bodies)
    assert closes == ["closed", "closed"]


async def test_a_stream_opened_after_the_shutdown_ended_the_others_is_ended_too() -> None:
    streams = OpenStreams()
    await streams.close(grace=0.1)
    client, body, closes = Client(), Body(every=0.05), []
    await asyncio.wait_for(response(body, closes)(scope(streams), client.receive, client.send), 5)
    assert client.completed and b"data" not in client.body and closes == ["closed"]


async def test_a_shutdown_waits_for_streams_that_end_within_the_grace() -> None:
    streams = OpenStreams()
    client, body = Client(), Body(every=0.05, count=4)
    call = asyncio.create_task(response(body, [])(scope(streams), client.receive, client.send))
    await asyncio.sleep(0.05)
    await streams.close(grace=5)  # returns once the stream ended by itself
    assert call.done() and client.completed
    assert client.body.count(b"data: ") == 4


async def test_a_cancellation_from_the_server_goes_on_up() -> None:
    streams = OpenStreams()
    client, body, closes = Client(), Body(every=0.05), []
    call = asyncio.create_task(response(body, closes)(scope(streams), client.receive, client.send))
    await asyncio.sleep(0.1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert body.closed and closes == ["closed"]
    assert len(streams) == 0


async def test_head_sends_the_headers_and_never_starts_the_body() -> None:
    client, body, closes = Client(), Body(every=0.05), []
    head = {**scope(OpenStreams()), "method": "HEAD"}
    await response(body, closes)(head, client.receive, client.send)
    assert client.sent[0]["status"] == 200 and client.body == b"" and client.completed
    assert closes == ["closed"]
    assert dict(client.sent[0]["headers"])[b"content-type"].startswith(b"text/event-stream")
