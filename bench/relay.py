"""Streaming through Parley (offline provider) against a bare sse-starlette endpoint.

Run by hand: ``.venv/bin/python bench/relay.py``. Starts both behind real uvicorn processes
on loopback, then measures tokens per second for 1 stream of 20,000 tokens and for 100
concurrent streams of 200 tokens, and the time to first event (median, p99): each case five
times, the two servers alternating, reporting medians (the machines are shared and noisy).
Parley persists each finished message (SQLite in a temporary directory, or
PARLEY_BENCH_DATABASE_URL).
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
Opener = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Request]]


@dataclass
class Result:
    tokens: int
    seconds: float
    first_event: list[float]

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(target: str, port: int, env: dict[str, str], factory: bool) -> subprocess.Popen[bytes]:
    args = [
        PY,
        "-m",
        "uvicorn",
        target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    if factory:
        args.insert(3, "--factory")
    return subprocess.Popen(args, cwd=ROOT, env={**os.environ, **env})


async def wait_up(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(300):
            try:
                await http.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def one_stream(http: httpx.AsyncClient, request: httpx.Request) -> tuple[int, float]:
    """Count delta events; return (tokens, seconds to the first event)."""
    marker = b"event: content_block_delta"
    start = time.perf_counter()
    first = None
    tokens = 0
    tail = b""
    response = await http.send(request, stream=True)
    async for chunk in response.aiter_bytes():
        if first is None:
            first = time.perf_counter() - start
        window = tail + chunk
        tokens += window.count(marker)
        cut = window.rfind(marker)
        tail = window[max(len(window) - len(marker) + 1, cut + len(marker) if cut >= 0 else 0) :]
    await response.aclose()
    assert first is not None
    return tokens, first


async def measure(http: httpx.AsyncClient, open_: Opener, streams: int, tokens: int) -> Result:
    requests = [await open_(http, tokens) for _ in range(streams)]
    start = time.perf_counter()
    results = await asyncio.gather(*(one_stream(http, r) for r in requests))
    seconds = time.perf_counter() - start
    total = sum(t for t, _ in results)
    assert total == streams * tokens, f"expected {streams * tokens} tokens, got {total}"
    return Result(total, seconds, [f for _, f in results])


def parley_opener(base: str) -> Opener:
    async def open_(http: httpx.AsyncClient, tokens: int) -> httpx.Request:
        conv = (await http.post(f"{base}/conversations", json={})).json()["id"]
        text = " ".join("a" for _ in range(tokens))
        body = {"messages": [{"role": "user", "text": text}]}
        return http.build_request("POST", f"{base}/conversations/{conv}/stream", json=body)

    return open_


def bare_opener(base: str) -> Opener:
    async def open_(http: httpx.AsyncClient, tokens: int) -> httpx.Request:
        return http.build_request("GET", f"{base}/stream", params={"tokens": tokens})

    return open_


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


ROUNDS = 5


async def run_cases(parley: str, bare: str) -> None:
    """Each case ROUNDS times, bare and Parley alternating; medians of the rounds."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        print(f"{'case':<28}{'server':<8}{'tokens/s':>12}{'ttfe median':>14}{'ttfe p99':>12}")
        openers = {"bare": bare_opener(bare), "parley": parley_opener(parley)}
        for label, streams, tokens in [
            ("1 stream x 20,000 tokens", 1, 20_000),
            ("100 streams x 200 tokens", 100, 200),
        ]:
            results: dict[str, list[Result]] = {name: [] for name in openers}
            for opener in openers.values():
                await measure(http, opener, min(streams, 10), 50)  # warm up
            for _ in range(ROUNDS):
                for name, opener in openers.items():
                    results[name].append(await measure(http, opener, streams, tokens))
            rates = {}
            for name, rounds in results.items():
                rates[name] = statistics.median(r.tokens_per_second for r in rounds)
                firsts = [f for r in rounds for f in r.first_event]
                print(
                    f"{label:<28}{name:<8}{rates[name]:>12,.0f}"
                    f"{statistics.median(firsts) * 1000:>12.1f}ms{p99(firsts) * 1000:>10.1f}ms"
                )
            print(
                f"{label:<28}{'ratio':<8}{rates['parley'] / rates['bare']:>12.2f}"
                f"  (parley / bare, medians of {ROUNDS} rounds; target >= 0.5)"
            )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("PARLEY_BENCH_DATABASE_URL", f"sqlite+aiosqlite:///{tmp}/bench.db")
        env = {
            "PARLEY_DATABASE_URL": url,
            "PARLEY_SSE_PING_SECONDS": "0",
            "PARLEY_MAX_TEXT_CHARS": "1000000",
        }
        subprocess.run(
            [PY, "-m", "alembic", "upgrade", "head"],
            cwd=ROOT,
            check=True,
            env={**os.environ, **env},
            capture_output=True,
        )
        ports = free_port(), free_port()
        servers = [
            serve("app.main:create_app", ports[0], env, factory=True),
            serve("bench.bare_sse:app", ports[1], {}, factory=False),
        ]
        try:
            parley, bare = (f"http://127.0.0.1:{p}" for p in ports)
            asyncio.run(wait_up(f"{parley}/healthz"))
            asyncio.run(wait_up(f"{bare}/stream?tokens=1"))
            print(f"database: {url.split('///')[0]}")
            asyncio.run(run_cases(parley, bare))
        finally:
            for server in servers:
                server.terminate()
                server.wait(10)


if __name__ == "__main__":
    main()
