"""The first streams of a new worker: time to the first token, through uvicorn.

Starts ``bench/stream_upstream.py``, then ``--rounds`` times a fresh Parley (uvicorn, one
worker, a new SQLite database, both SDK adapters pointed at the upstream) and times four
streams in a row on it — ``openai``, ``openai``, ``anthropic``, ``anthropic``, each on a new
conversation, a 5-token burst — from the request to the first ``content_block_delta``. The
first of each provider is what a deploy's first users wait; the second is the steady state.

Run by hand: ``.venv/bin/python bench/fresh_start.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.relay import free_port
from bench.start_cpu import at_least_one, wait_for_port
from bench.stream import PY, ROOT, migrate, parley_env

PROVIDERS = ("openai", "openai", "anthropic", "anthropic")


async def first_token_ms(client: httpx.AsyncClient, provider: str) -> float:
    conversation = (await client.post("/conversations", json={})).json()["id"]
    config = {"provider": provider, "model": "bench-5-0"}
    body = {"messages": [{"role": "user", "text": "go"}], "config": config}
    started = time.perf_counter()
    async with client.stream("POST", f"/conversations/{conversation}/stream", json=body) as r:
        async for line in r.aiter_lines():
            if line == "event: content_block_delta":
                return (time.perf_counter() - started) * 1000
    raise RuntimeError(f"no token from {provider}")


async def one_worker(port: int) -> list[float]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        return [await first_token_ms(client, provider) for provider in PROVIDERS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=at_least_one, default=3)
    args = parser.parse_args()
    upstream_port = free_port()
    upstream = subprocess.Popen([PY, "-m", "bench.stream_upstream", str(upstream_port)], cwd=ROOT)
    try:
        wait_for_port(upstream_port)
        print("first token, ms: " + " | ".join(PROVIDERS))
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite+aiosqlite:///{tmp}/bench.db"
                migrate(url)
                port = free_port()
                command = [PY, "-m", "uvicorn", "--factory", "app.main:create_app"]
                command += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
                env = {**os.environ, **parley_env(url, upstream_port)}
                worker = subprocess.Popen(command, cwd=ROOT, env=env)
                try:
                    wait_for_port(port)
                    figures = asyncio.run(one_worker(port))
                finally:
                    worker.terminate()
                    worker.wait()
            print(" | ".join(f"{f:.1f}" for f in figures))
    finally:
        upstream.kill()
        upstream.wait()


if __name__ == "__main__":
    main()
