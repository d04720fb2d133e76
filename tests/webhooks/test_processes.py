"""Webhooks across real uvicorn processes on one database: kill -9 of the process that is
sending loses no delivery, and a delivery sent twice carries the same ``webhook-id``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx

from tests.api.test_processes import Start, open_stream, read_deltas, start_server, two
from tests.processes import ServerProcess
from tests.webhooks.receiver import Receiver

__all__ = ["start_server"]  # the fixture, shared with the API's process tests

SETTINGS = {
    "webhook_allow_private": "true",
    "webhook_timeout_seconds": 4,
    "webhook_claim_seconds": 1,  # held for timeout + 5 s: a dead sender's claims free in 9 s
    "webhook_backoff_seconds": 0.1,
    "webhook_backoff_max_seconds": 0.5,
    "webhook_poll_seconds": 0.2,
    "offline_delay_ms": 20,
    "run_lease_seconds": 2,
}
LONG = " ".join(f"w{i}" for i in range(200))  # 4 s at 20 ms a word


def ports_of(pid: int) -> set[int]:
    """The local TCP ports of ``pid``'s open sockets (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def quick_run(http: httpx.AsyncClient, server: ServerProcess) -> str:
    conv_id = (await http.post(f"{server.url}/conversations", json={})).json()["id"]
    response = await http.post(
        f"{server.url}/conversations/{conv_id}/stream",
        json={"messages": [{"role": "user", "text": "hello there"}]},
    )
    assert response.status_code == 200
    return str(conv_id)


async def background_run(http: httpx.AsyncClient, server: ServerProcess) -> str:
    conv_id, response, stream = await open_stream(
        http, server.url, text=LONG, on_disconnect="continue"
    )
    await read_deltas(stream, 1)
    await response.aclose()  # the client goes; the run goes on until the process dies
    return conv_id


async def runs_of(http: httpx.AsyncClient, url: str, conversations: list[str]) -> list[Any]:
    found = []
    for conv_id in conversations:
        found += (await http.get(f"{url}/conversations/{conv_id}/runs")).json()["items"]
    return found


async def test_kill_9_of_the_sending_process_loses_no_delivery(start_server: Start) -> None:
    a, b = two(start_server, **SETTINGS)
    with Receiver(delay_seconds=1.5) as receiver:
        async with httpx.AsyncClient(timeout=15) as http:
            created = await http.post(
                f"{a.url}/webhooks",
                json={
                    "url": receiver.url,
                    "events": ["run.completed", "run.interrupted", "run.aborted"],
                },
            )
            secret, hook_id = created.json()["secret"], created.json()["id"]
            conversations = [await background_run(http, a) for _ in range(3)]
            conversations += [await quick_run(http, server) for server in (a, b) * 4]
            lost = await _kill_while_sending(a, receiver)

            async def everything_arrived() -> list[Any] | None:
                runs = await runs_of(http, b.url, conversations)
                if any(r["status"] == "running" for r in runs):
                    return None
                got = {r.json()["data"]["run_id"] for r in receiver.accepted()}
                if not {r["id"] for r in runs} <= got:
                    return None
                # ... and each one recorded as delivered: a 2xx its sender read
                deliveries = f"{b.url}/webhooks/{hook_id}/deliveries?limit=100"
                items = (await http.get(deliveries)).json()["items"]
                delivered = {d["run_id"] for d in items if d["status"] == "delivered"}
                return runs if delivered == {r["id"] for r in runs} else None

            runs = await _within(everything_arrived, 40)
    assert len(runs) == len(conversations)
    bodies = {}
    for request in receiver.accepted():
        body = request.json()
        run_id = body["data"]["run_id"]
        assert request.message_id == f"msg_{run_id}"  # a duplicate has the same webhook-id
        bodies[run_id] = body
    from standardwebhooks import Webhook

    for request in receiver.accepted():
        Webhook(secret).verify(request.body, request.headers)
    for run in runs:
        assert bodies[run["id"]]["type"] == f"run.{run['status']}"
    assert "interrupted" in {r["status"] for r in runs}  # the killed process's live runs
    # what the killed process was sending was sent again (by the other, its claim expired)
    for message_id in lost:
        assert sum(r.message_id == message_id for r in receiver.received) >= 2, message_id


async def _kill_while_sending(a: ServerProcess, receiver: Receiver) -> set[str]:
    """kill -9 ``a`` once it has a delivery in flight; the webhook-ids it was sending."""
    for _ in range(300):
        with receiver.holding() as flying:  # none of them answered until a is dead
            mine = {flying[port] for port in ports_of(a.process.pid) & set(flying)}
            if mine:
                a.kill()
                return mine
        await asyncio.sleep(0.02)
    raise AssertionError("the process never sent a delivery")


async def _within(check: Any, seconds: float) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (result := await check()) is None:
        assert loop.time() < deadline, "not every run's ending arrived"
        await asyncio.sleep(0.2)
    return result
