"""The CPU one run start costs Parley, measured in process, one stream at a time.

Builds the app as uvicorn would (``create_app``, SQLite in a temporary file, the ``openai``
adapter pointed at ``bench/stream_upstream.py``) and calls it as an ASGI app, with no HTTP
server or client in the way: ``POST /conversations/{id}/stream`` with one user message, read to
``done`` (a 2-token reply, or ``--model``'s), one after another. The figure is the process's CPU
time per stream — the request, the start's write transaction, the provider request, the reply,
the run's ending — the median of ``--rounds`` rounds. With ``--model bench-50-1`` (50 tokens a
millisecond apart, each its own read and write) the difference from the default, over 48, is the
CPU of one paced token. ``bench/stream.py --scenario starts_100`` measures the
same under 100 streams at once, through uvicorn; this one is steadier (no other process, no
concurrency), for comparing two versions of the code.

With ``--relay`` the same is measured for bench/stream_relays.py's parsing relay (the SDK
adapter and SSE frames, no framework, no database): the floor Parley's figure is compared with.

Run by hand: ``.venv/bin/python bench/start_cpu.py [--streams 400] [--rounds 3] [--provider
anthropic] [--model bench-50-1] [--at-once 100] [--db postgres] [--relay]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.main import create_app
from bench.relay import free_port
from bench.stream import PY, ROOT, migrate, parley_env, postgres_url

WARM_UP = 30


def body(provider: str, model: str) -> bytes:
    config = {"provider": provider, "model": model}
    return json.dumps({"messages": [{"role": "user", "text": "go"}], "config": config}).encode()


async def call(
    app: Any, method: str, path: str, body: bytes, first: list[float] | None = None
) -> tuple[int, bytes]:
    """One request through the ASGI app; its status and whole body. With ``first``, the time
    (``perf_counter``) of the first body chunk holding a text delta is appended to it."""
    sent, done = False, asyncio.Event()
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if first is not None and not first and b"content_block_delta" in chunk:
                first.append(time.perf_counter())
            chunks.append(chunk)
            if not message.get("more_body"):
                done.set()

    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    await app(scope, receive, send)
    return status, b"".join(chunks)


async def measure(
    streams: int, rounds: int, request: bytes, at_once: int, relay: str | None = None
) -> list[Round]:
    """Per round: CPU milliseconds per stream, and (``at_once`` > 1) the first token's times.
    ``relay``: the parsing relay's path to stream from, instead of Parley's conversations."""
    app: Any = relay_app() if relay else create_app()
    figures = []
    async with app.router.lifespan_context(app):
        for _ in range(rounds):
            ids = []  # the paths streamed from
            for _ in range(WARM_UP + streams):
                if relay:
                    ids.append(relay)
                    continue
                _, body = await call(app, "POST", "/conversations", b"{}")
                ids.append(f"/conversations/{json.loads(body)['id']}/stream")
            for n in range(WARM_UP):
                await one(app, ids[n], request, None)
            await asyncio.sleep(0.3)  # the warm-up's endings stored
            started = time.process_time()
            waits: list[float] = []
            for group in range(WARM_UP, len(ids), at_once):
                asked = time.perf_counter()
                firsts: list[list[float]] = [[] for _ in ids[group : group + at_once]]
                await asyncio.gather(
                    *(one(app, c, request, f) for c, f in zip(ids[group:], firsts, strict=False))
                )
                waits.extend((f[0] - asked) * 1000 for f in firsts if f)
            await asyncio.sleep(0.3)  # and the last endings
            figures.append(Round((time.process_time() - started) * 1000 / streams, waits))
    return figures


@dataclasses.dataclass
class Round:
    cpu_ms: float
    first_ms: list[float]


def relay_app() -> Any:
    """The parsing relay, with the no-op lifespan ``measure`` enters."""
    from bench import stream_relays  # its SDK clients read the upstream's address at import

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await stream_relays.app(scope, receive, send)

    app.router = types.SimpleNamespace(lifespan_context=lifespan)  # type: ignore[attr-defined]
    return app


async def one(app: Any, path: str, request: bytes, first: list[float] | None) -> None:
    status, reply = await call(app, "POST", path, request, first)
    ended = b"event: done" in reply or path.startswith("/parse/")  # the relay has no done
    if status != 200 or not ended:
        raise RuntimeError(f"stream failed: {status} {reply[:300]!r}")


def at_least_one(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def wait_for_port(port: int) -> None:
    """Until something accepts connections on ``port`` (the upstream), at most 10 s."""
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=at_least_one, default=400)
    parser.add_argument("--rounds", type=at_least_one, default=3)
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    parser.add_argument(
        "--model",
        default="bench-2-0",
        help="the upstream's bench-<tokens>-<pace ms>; e.g. bench-50-1 for the per-token cost",
    )
    parser.add_argument(
        "--at-once",
        type=at_least_one,
        default=1,
        help="streams started together (asyncio.gather), e.g. 100: prints first-token p50/p99",
    )
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--relay", action="store_true", help="the parsing relay instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        upstream_port = free_port()
        upstream = subprocess.Popen(
            [PY, "-m", "bench.stream_upstream", str(upstream_port)], cwd=ROOT
        )
        try:
            wait_for_port(upstream_port)
            url = postgres_url() if args.db == "postgres" else None
            if url is None and args.db == "postgres":
                raise SystemExit("no PostgreSQL answers (PARLEY_BENCH_DATABASE_URL)")
            url = url or f"sqlite+aiosqlite:///{tmp}/bench.db"
            migrate(url)
            os.environ.update(parley_env(url, upstream_port))
            request = body(args.provider, args.model)
            if args.relay:
                request = json.dumps({"model": args.model}).encode()
            relay = f"/parse/{args.provider}" if args.relay else None
            figures = asyncio.run(measure(args.streams, args.rounds, request, args.at_once, relay))
        finally:
            upstream.kill()
            upstream.wait()
    cpu = [f.cpu_ms for f in figures]
    rounds = ", ".join(f"{f:.2f}" for f in cpu)
    median = statistics.median(cpu)
    print(f"CPU per stream (start, reply, ending): median {median:.2f} ms (rounds: {rounds})")
    if args.at_once > 1:
        p50 = statistics.median(statistics.median(f.first_ms) for f in figures)
        p99 = statistics.median(statistics.quantiles(f.first_ms, n=100)[98] for f in figures)
        print(f"first token, {args.at_once} at once: p50 {p50:.1f} ms, p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
