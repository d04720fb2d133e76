"""N Parley processes on one PostgreSQL, no Redis: throughput, and recovery from a killed one.

Run by hand: ``.venv/bin/python bench/replicas.py [--processes 4] [--clients 16] [--seconds 10]``
(PostgreSQL at PARLEY_BENCH_POSTGRES_URL, default postgresql+asyncpg://postgres@127.0.0.1:5432/).
It creates a throw-away database, starts the uvicorn processes at the same moment with
PARLEY_MIGRATE_ON_START=true (so they also race to migrate it), then:

1. throughput: ``--clients`` loops, spread over the processes, each doing create a conversation
   + POST /stream with one user message (delta and run in one request, offline model, 20 words)
   and reading the stream to ``done``; reports conversations/s, median and p95 latency.
2. a killed replica: a slow run on process 0, ``kill -9`` of that process mid-stream, then
   process 1 retries a stream of that conversation until it is accepted; reports how long the
   conversation stayed locked (the lease: PARLEY_RUN_LEASE_SECONDS, here ``--lease``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.settings import Settings  # noqa: E402

POSTGRES = os.environ.get(
    "PARLEY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/"
)
WORDS = " ".join(f"word{i}" for i in range(20))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dsn(database: str) -> str:
    url = make_url(POSTGRES).set(drivername="postgresql", database=database)
    return url.render_as_string(hide_password=False)


async def admin(statement: str) -> None:
    connection = await asyncpg.connect(dsn("postgres"))
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def start(count: int, database_url: str, lease: float) -> list[tuple[str, subprocess.Popen[bytes]]]:
    env = {
        **os.environ,
        "PARLEY_DATABASE_URL": database_url,
        "PARLEY_MIGRATE_ON_START": "true",
        "PARLEY_RUN_LEASE_SECONDS": str(lease),
        "PARLEY_LOG_LEVEL": "WARNING",
        "PARLEY_OFFLINE_DELAY_MS": os.environ.get("PARLEY_OFFLINE_DELAY_MS", "0"),
    }
    servers = []
    for _ in range(count):
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "app.main:create_app",
            "--port",
            str(port),
            "--no-access-log",
        ]
        process = subprocess.Popen(command, cwd=ROOT, env=env)
        servers.append((f"http://127.0.0.1:{port}", process))
    return servers


async def wait_ready(client: httpx.AsyncClient, url: str) -> None:
    for _ in range(600):
        try:
            if (await client.get(f"{url}/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} never became ready")


async def one_conversation(client: httpx.AsyncClient, url: str, text: str) -> float:
    started = time.perf_counter()
    conv = (await client.post(f"{url}/conversations", json={})).json()["id"]
    body = {"messages": [{"role": "user", "text": text}]}
    async with client.stream("POST", f"{url}/conversations/{conv}/stream", json=body) as reply:
        assert reply.status_code == 200, reply.status_code
        tail = b""
        async for chunk in reply.aiter_bytes():
            tail = (tail + chunk)[-4096:]
        assert b"event: done" in tail and b'"completed"' in tail
    return time.perf_counter() - started


async def throughput(urls: list[str], clients: int, seconds: float) -> None:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients * 2)

    async def loop(index: int, client: httpx.AsyncClient) -> None:
        url = urls[index % len(urls)]
        while time.perf_counter() < deadline:
            latencies.append(await one_conversation(client, url, WORDS))

    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        began = time.perf_counter()
        await asyncio.gather(*(loop(i, client) for i in range(clients)))
        elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    print(
        f"throughput: {len(latencies)} conversations in {elapsed:.1f} s = "
        f"{len(latencies) / elapsed:.1f}/s over {len(urls)} processes, {clients} clients; "
        f"latency median {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
    )


async def killed_replica(servers: list[tuple[str, subprocess.Popen[bytes]]], lease: float) -> None:
    (first, victim), (second, _) = servers[0], servers[1]
    long_text = " ".join(["slow"] * 2000)
    async with httpx.AsyncClient(timeout=60) as client:
        conv = (await client.post(f"{first}/conversations", json={})).json()["id"]
        await client.post(
            f"{first}/conversations/{conv}/deltas",
            json={"messages": [{"role": "user", "text": long_text}]},
        )
        async with client.stream("POST", f"{first}/conversations/{conv}/stream") as reply:
            async for chunk in reply.aiter_bytes():
                if b"content_block_delta" in chunk:
                    break
            victim.send_signal(signal.SIGKILL)
            killed = time.perf_counter()
        refused = 0
        while True:
            response = await client.post(f"{second}/conversations/{conv}/stream")
            if response.status_code != 409:
                break
            refused += 1
            await asyncio.sleep(0.1)
        locked = time.perf_counter() - killed
    print(
        f"killed replica: the conversation stayed locked {locked:.1f} s after kill -9 "
        f"(lease {lease:g} s; {refused} refused with 409, then status {response.status_code})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument(
        "--lease", type=float, default=Settings.model_fields["run_lease_seconds"].default
    )
    args = parser.parse_args()
    name = f"parley_bench_{secrets.token_hex(4)}"
    await admin(f'CREATE DATABASE "{name}"')
    url = make_url(POSTGRES).set(database=name).render_as_string(hide_password=False)
    servers = start(args.processes, url, args.lease)
    try:
        async with httpx.AsyncClient() as client:
            for base, _ in servers:
                await wait_ready(client, base)
        print(f"{args.processes} processes migrated the fresh database together and are ready")
        await throughput([base for base, _ in servers], args.clients, args.seconds)
        if len(servers) > 1:
            await killed_replica(servers, args.lease)
    finally:
        for _, process in servers:
            if process.poll() is None:
                process.terminate()
        for _, process in servers:
            process.wait(30)
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
