"""The cost of the durable event log: Parley with it and without it, side by side in one run.

Run by hand: ``.venv/bin/python bench/runlog.py`` (``--rounds N``, ``--streams N``). Starts two
Parley processes (real uvicorn, one worker each, the offline model paced at 20 ms a word, as a
real model is) on the same kind of database — one with ``PARLEY_RUN_EVENT_LOG=true`` (every
event stored by the group-commit writer), one with ``false`` (messages and endings only) — and
runs 100 concurrent streams of 150 words against each, alternating, medians of the rounds.
Reports delivered tokens per second, first-token latency, and database transactions per second:
the write transactions Parley made (run starts and event-log flushes, from its ``/metrics``) and,
on PostgreSQL, every committed transaction of the bench database (``xact_commit``, reads too).
SQLite in a temporary directory, and PostgreSQL when PARLEY_BENCH_POSTGRES_URL (default
``postgresql+asyncpg://postgres@127.0.0.1:5432/``) answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import fresh_postgres, migrate  # noqa: E402
from tests.processes import free_port  # noqa: E402

PY = sys.executable
MARKER = b"event: content_block_delta"


@dataclass
class Round:
    tokens: int
    seconds: float
    first: list[float]
    transactions: float | None
    writes: float

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


class Server:
    def __init__(self, database_url: str, event_log: bool, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")},
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_SSE_PING_SECONDS": "0",
            "PARLEY_OFFLINE_DELAY_MS": "20",
            "PARLEY_RUN_EVENT_LOG": str(event_log).lower(),
        }
        self.log = log
        self.process = subprocess.Popen(
            [
                PY,
                "-m",
                "uvicorn",
                "--factory",
                "app.main:create_app",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    async def wait_up(self) -> None:
        async with httpx.AsyncClient() as http:
            for _ in range(600):
                try:
                    if (await http.get(f"{self.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.url} did not come up: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)


async def one_stream(http: httpx.AsyncClient, request: httpx.Request) -> tuple[int, float]:
    start = time.perf_counter()
    first = None
    tokens = 0
    tail = b""
    async with http.stream(
        request.method, request.url, content=request.content, headers=request.headers
    ) as response:
        async for chunk in response.aiter_bytes():
            window = tail + chunk
            found = window.count(MARKER)
            if found and first is None:
                first = time.perf_counter() - start
            tokens += found
            tail = window[-(len(MARKER) - 1) :]
    return tokens, first or 0.0


async def transactions(database_url: str) -> int | None:
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return None
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("SELECT pg_stat_clear_snapshot()")
        value = await connection.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(value)
    finally:
        await connection.close()


async def write_transactions(http: httpx.AsyncClient, server: Server) -> float:
    """Run starts plus event-log flushes so far, from the server's metrics."""
    text = (await http.get(f"{server.url}/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(
            ("parley_runs_started_total", "parley_event_log_flush_duration_seconds_count")
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def measure(http: httpx.AsyncClient, server: Server, streams: int, words: int) -> Round:
    text = " ".join("w" for _ in range(words))
    requests = []
    for _ in range(streams):
        conv = (await http.post(f"{server.url}/conversations", json={})).json()["id"]
        body = {"messages": [{"role": "user", "text": text}]}
        requests.append(
            http.build_request("POST", f"{server.url}/conversations/{conv}/stream", json=body)
        )
    await asyncio.sleep(0.5)  # let stats settle
    before = await transactions(server.database_url)
    writes_before = await write_transactions(http, server)
    start = time.perf_counter()
    results = await asyncio.gather(*(one_stream(http, r) for r in requests))
    seconds = time.perf_counter() - start
    after = await transactions(server.database_url)
    writes = (await write_transactions(http, server) - writes_before) / seconds
    total = sum(t for t, _ in results)
    assert total == streams * words, f"{total} of {streams * words} tokens arrived"
    tx = (after - before) / seconds if before is not None and after is not None else None
    return Round(total, seconds, [f for _, f in results], tx, writes)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


async def bench(database_url: str, label: str, rounds: int, streams: int, tmp: Path) -> None:
    servers = {
        "log on": Server(database_url, True, tmp / f"{label}-on.log"),
        "log off": Server(database_url, False, tmp / f"{label}-off.log"),
    }
    try:
        for server in servers.values():
            await server.wait_up()
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=500)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            results: dict[str, list[Round]] = {name: [] for name in servers}
            for server in servers.values():
                await measure(http, server, 10, 20)  # warm up
            for _ in range(rounds):
                for name, server in servers.items():
                    results[name].append(await measure(http, server, streams, 150))
        rates = {}
        for name, done in results.items():
            rates[name] = statistics.median(r.rate for r in done)
            firsts = [f for r in done for f in r.first]
            txs = [r.transactions for r in done if r.transactions is not None]
            tx = f"{statistics.median(txs):,.0f}" if txs else "n/a"
            writes = statistics.median(r.writes for r in done)
            print(
                f"| {label} | {name} | {rates[name]:,.0f} | "
                f"{statistics.median(firsts) * 1000:.0f} / {p99(firsts) * 1000:.0f} | "
                f"{writes:,.0f} | {tx} |"
            )
        print(f"| {label} | on / off | {rates['log on'] / rates['log off']:.3f} | | | |")
    finally:
        for server in servers.values():
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        targets = [("sqlite", f"sqlite+aiosqlite:///{tmp}/bench.db")]
        pg = asyncio.run(fresh_postgres("parley_bench_runlog"))
        if pg is not None:
            targets.append(("postgres", pg))
        print(
            f"{args.streams} streams x 150 words, 20 ms a word (offered "
            f"{args.streams * 50:,} tok/s); medians of {args.rounds} rounds; "
            f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores\n"
        )
        print(
            "| database | event log | tokens/s | first token median / p99 (ms) "
            "| write tx/s | all tx/s (PostgreSQL) |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for label, url in targets:
            migrate(url)
            asyncio.run(bench(url, label, args.rounds, args.streams, tmp))


if __name__ == "__main__":
    main()
