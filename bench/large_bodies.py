"""Large request bodies and the event loop: how long other requests wait while big imports land.

Starts one Parley (uvicorn, one worker, served as it ships, a new SQLite database), then
``--imports`` imports of about ``--mb`` MB each at once (OpenAI format: many long user and
assistant messages), while a probe asks ``GET /healthz`` every 10 ms. Reports the probe's
worst and 99th-percentile latency (what the event loop's blockage costs every other request,
leases' renewals included), the imports' wall time, and the worker's resident memory before
and at its peak.

Run by hand: ``.venv/bin/python -m bench.large_bodies [--imports 4] [--mb 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.relay import free_port
from bench.start_cpu import wait_for_port
from bench.stream import migrate, rss_mb, serve_uvicorn


def body(megabytes: float) -> bytes:
    text = "lorem ipsum dolor sit amet " * 2_000  # 54 KB a message
    count = max(2, int(megabytes * 1_000_000 / len(text)))
    roles = ("user", "assistant")
    messages = [{"role": roles[i % 2], "content": text} for i in range(count)]
    return json.dumps({"messages": messages}).encode()


async def probe(client: httpx.AsyncClient, stop: asyncio.Event, waits: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await client.get("/healthz")
        waits.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.01)


async def watch_rss(pid: int, stop: asyncio.Event, peak: list[float]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss_mb(pid))
        await asyncio.sleep(0.02)


async def measure(port: int, pid: int, imports: int, megabytes: float) -> None:
    payload = body(megabytes)
    url = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=imports + 2)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        for _ in range(3):  # warm: the routes, the first import's code paths
            await client.get("/healthz")
        before = rss_mb(pid)
        stop, waits, peak = asyncio.Event(), [], [before]
        probing = asyncio.create_task(probe(client, stop, waits))
        watching = asyncio.create_task(watch_rss(pid, stop, peak))
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        headers = {"Content-Type": "application/json"}
        sent = [
            client.post("/conversations/import?format=openai", content=payload, headers=headers)
            for _ in range(imports)
        ]
        answers = await asyncio.gather(*sent)
        took = time.perf_counter() - started
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(probing, watching)
    statuses = sorted({r.status_code for r in answers})
    waits.sort()
    p99 = waits[int(len(waits) * 0.99) - 1] if len(waits) > 1 else waits[0]
    print(f"{imports} imports of {len(payload) / 1e6:.1f} MB at once: statuses {statuses}")
    print(f"  imports' wall time      {took:7.2f} s")
    print(f"  /healthz while they ran max {waits[-1]:7.0f} ms, p99 {p99:5.0f} ms, ")
    print(f"                          median {statistics.median(waits):5.1f} ms ({len(waits)})")
    print(f"  worker RSS              {before:7.0f} MB before, {peak[0]:5.0f} MB at its peak")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imports", type=int, default=4)
    parser.add_argument("--mb", type=float, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        migrate(database)
        port = free_port()
        env = {
            "PARLEY_DATABASE_URL": database,
            "PARLEY_LOG_LEVEL": "WARNING",
            "PARLEY_MAX_IMPORT_BYTES": str(int(args.mb * 2_000_000)),
            "PARLEY_MAX_IMPORT_MESSAGES": "100000",
        }
        server = serve_uvicorn("app.main:create_app", port, env, factory=True)
        try:
            wait_for_port(port)
            asyncio.run(measure(port, server.pid, args.imports, args.mb))
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
