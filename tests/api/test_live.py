"""Disconnect, cancel and concurrency against a real uvicorn on a loopback port."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

import httpx
import uvicorn

from app.main import create_app
from app.settings import Settings
from tests.api.conftest import LiveServer, wait_for
from tests.api.sse import Event, events, parse

WORDS = " ".join(f"w{i}" for i in range(60))


async def start_slow_run(
    http: httpx.AsyncClient, text: str = WORDS
) -> tuple[str, httpx.Response, Any]:
    conv_id = (await http.post("/conversations", json={})).json()["id"]
    request = http.build_request(
        "POST",
        f"/conversations/{conv_id}/stream",
        json={"messages": [{"role": "user", "text": text}]},
    )
    response = await http.send(request, stream=True)
    assert response.status_code == 200
    return conv_id, response, events(response.aiter_lines())


async def read_until(stream: Any, count: int, name: str = "content_block_delta") -> list[Event]:
    seen: list[Event] = []
    async for event in stream:
        seen.append(event)
        if sum(e.name == name for e in seen) >= count:
            return seen
    raise AssertionError(f"the stream ended after {seen!r}")


async def test_disconnect_keeps_the_words_as_an_incomplete_message_and_frees_the_lease(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(offline_delay_ms=40)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        conv_id, response, stream = await start_slow_run(http)
        seen = await read_until(stream, 5)
        words = "".join(e.data["delta"] for e in seen if e.name == "content_block_delta")
        await response.aclose()

        async def idle() -> bool:
            state = (await http.get(f"/conversations/{conv_id}")).json()
            return bool(state["status"] == "idle" and state["message_count"] == 2)

        # Were the disconnect missed, the run would go on to its last word (2.4 s) and store
        # the whole reply: the checks below fail then. How long a loaded machine takes to get
        # there is no part of it.
        assert await wait_for(idle, within=30.0)
        last = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"][-1]
        assert last["role"] == "assistant" and last["incomplete"] is True
        assert last["text"].startswith(words)
        assert len(last["text"]) < len(WORDS)

        follow = await http.post(
            f"/conversations/{conv_id}/stream", json={"messages": [{"role": "user", "text": "ok"}]}
        )
        assert follow.status_code == 200
        assert "event: done" in follow.text


async def test_second_stream_and_delta_during_a_run_get_409_with_the_run_id(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(offline_delay_ms=40)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        conv_id, response, stream = await start_slow_run(http)
        started = (await read_until(stream, 1, "run_started"))[0]
        run_id = started.data["run_id"]
        second = await http.post(f"/conversations/{conv_id}/stream")
        assert second.status_code == 409
        assert second.json()["run_id"] == run_id
        delta = await http.post(
            f"/conversations/{conv_id}/deltas", json={"messages": [{"role": "user", "text": "x"}]}
        )
        assert delta.status_code == 409
        state = (await http.get(f"/conversations/{conv_id}")).json()
        assert state["status"] == "running" and state["run_id"] == run_id
        await response.aclose()


async def test_a_follow_without_an_id_joins_the_running_run_from_its_first_event(
    live_server: Callable[..., LiveServer],
) -> None:
    """An EventSource cut before its first event reconnects without an id: it joins the run
    (no 409, no second run) and sees every event once, after a `retry:` field."""
    server = live_server(offline_delay_ms=40, sse_retry_ms=250)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        conv_id, response, stream = await start_slow_run(http, "one two three four five")
        run_id = (await read_until(stream, 2))[0].data["run_id"]
        async with http.stream("GET", f"/conversations/{conv_id}/stream") as joined:
            assert joined.status_code == 200
            assert joined.headers["x-run-id"] == run_id
            lines = [line async for line in joined.aiter_lines()]
        got = parse("\n".join(lines))
        assert lines[0] == "retry: 250"
        assert [e.id for e in got] == [f"{run_id}:{n}" for n in range(1, len(got) + 1)]
        assert got[0].name == "run_started" and got[-1].name == "done"
        deltas = [e.data["delta"] for e in got if e.name == "content_block_delta"]
        assert "".join(deltas) == "one two three four five"
        await response.aclose()
        runs = (await http.get(f"/conversations/{conv_id}/runs")).json()["items"]
        assert [r["id"] for r in runs] == [run_id]
        assert (await http.get(f"/conversations/{conv_id}/stream")).status_code == 204


async def test_cancel_from_another_client_ends_the_stream_with_aborted(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(offline_delay_ms=40)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as first,
        httpx.AsyncClient(base_url=server.url, timeout=10) as other,
    ):
        conv_id, response, stream = await start_slow_run(first)
        await read_until(stream, 3)
        cancel = await other.post(f"/conversations/{conv_id}/cancel")
        assert cancel.status_code == 202
        rest = [e async for e in stream]
        await response.aclose()
        assert rest[-1].name == "done"
        assert rest[-1].data["status"] == "aborted"
        state = (await other.get(f"/conversations/{conv_id}")).json()
        assert state["status"] == "idle"
        last = (await other.get(f"/conversations/{conv_id}/messages")).json()["messages"][-1]
        assert last["incomplete"] is True


async def test_concurrent_streams_on_different_conversations_all_complete(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        ids = [(await http.post("/conversations", json={})).json()["id"] for _ in range(10)]

        async def run(conv_id: str) -> str:
            r = await http.post(
                f"/conversations/{conv_id}/stream",
                json={"messages": [{"role": "user", "text": "one two three"}]},
            )
            return r.text

        bodies = await asyncio.gather(*(run(i) for i in ids))
        assert all('"status":"completed"' in b for b in bodies)


async def test_head_on_the_stream_does_not_leave_the_conversation_running(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        conv_id = (await http.post("/conversations", json={})).json()["id"]
        await http.post(
            f"/conversations/{conv_id}/deltas", json={"messages": [{"role": "user", "text": "a"}]}
        )
        head = await http.head(f"/conversations/{conv_id}/stream")
        assert head.status_code in (200, 405)

        async def idle() -> bool:
            state = (await http.get(f"/conversations/{conv_id}")).json()
            return bool(state["status"] == "idle")

        assert await wait_for(idle, within=30.0)
        follow = await http.post(f"/conversations/{conv_id}/stream")
        assert follow.status_code == 200


async def test_a_client_that_reads_nothing_is_disconnected_after_the_send_timeout(
    database_url: str,
) -> None:
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        sse_send_timeout_seconds=1,
        offline_delay_ms=2,
        max_text_chars=1_000_000,
        max_body_bytes=2_000_000,
    )
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # small kernel buffers, so
    listener.bind(("127.0.0.1", 0))  # a client that reads nothing blocks the server's sends soon
    port = listener.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level="warning", loop="asyncio")
    server = uvicorn.Server(config)  # on the loop Parley ships (tests/processes.py)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        assert await wait_for(_started(server), within=60.0), "uvicorn did not start"
        await _unread_stream_is_cut(port)
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


def _started(server: uvicorn.Server) -> Callable[[], Any]:
    async def check() -> bool:
        return bool(server.started)

    return check


async def _unread_stream_is_cut(port: int) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        conv_id = (await http.post("/conversations", json={})).json()["id"]
        # 6,000 long words at 2 ms each: the model would take 12 s and more.
        text = " ".join(f"{i:04d}" + "x" * 60 for i in range(6_000))
        body = json.dumps({"messages": [{"role": "user", "text": text}]}).encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before the handshake
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
        writer.write(
            f"POST /conversations/{conv_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        try:
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")

            async def ended() -> Any:
                runs = (await http.get(f"/conversations/{conv_id}/runs")).json()["items"]
                return runs[0] if runs and runs[0]["status"] != "running" else None

            # No reading at all from here on. Were the client never cut, the run would stay
            # `running` (its sends blocked) or end `completed` (12 s and more): both fail below.
            run = await wait_for(ended, within=60.0)
            assert run is not None and run["status"] == "aborted"
            state = (await http.get(f"/conversations/{conv_id}")).json()
            assert state["status"] == "idle" and state["message_count"] == 2
        finally:
            writer.close()
