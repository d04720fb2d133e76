"""How fast a cancel sent to another process stops a run, and a resume on another process.

Run by hand: ``.venv/bin/python bench/cancel.py [--tries 20]``. Starts two Parley processes on
one database (a shared SQLite file, then PostgreSQL when it answers at
PARLEY_BENCH_POSTGRES_URL, default ``postgresql+asyncpg://postgres@127.0.0.1:5432/``), streams
from process A, and after a random number of words sends ``POST …/cancel`` to process B. Reports
the time from the cancel request to the stream's ``done`` (status ``aborted``), and checks that
the stored partial reply is exactly the text streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import fresh_postgres, migrate  # noqa: E402
from tests.api.sse import events  # noqa: E402
from tests.processes import ServerProcess  # noqa: E402

WORDS = " ".join(f"w{i}" for i in range(200))


async def one_try(http: httpx.AsyncClient, a: str, b: str, rng: random.Random) -> float:
    conv_id = (await http.post(f"{a}/conversations", json={})).json()["id"]
    body = {"messages": [{"role": "user", "text": WORDS}]}
    async with http.stream("POST", f"{a}/conversations/{conv_id}/stream", json=body) as response:
        stream = events(response.aiter_lines())
        text, wanted, asked = [], rng.randint(1, 20), 0.0
        async for event in stream:
            if event.name == "content_block_delta":
                text.append(event.data["delta"])
                if len(text) == wanted:
                    asked = time.perf_counter()
                    assert (
                        await http.post(f"{b}/conversations/{conv_id}/cancel")
                    ).status_code == 202
            elif event.name == "message":
                stored_text = event.data["message"]["text"]
            elif event.name == "done":
                took = time.perf_counter() - asked
                assert event.data["status"] == "aborted", event.data
                break
    messages = (await http.get(f"{b}/conversations/{conv_id}/messages")).json()["messages"]
    assert messages[-1]["text"] == stored_text == "".join(text) and messages[-1]["incomplete"]
    return took


async def bench(url: str, label: str, tries: int, tmp: Path) -> None:
    a = ServerProcess(url, tmp / f"{label}-a.log", offline_delay_ms=20)
    b = ServerProcess(url, tmp / f"{label}-b.log", offline_delay_ms=20)
    try:
        a.wait_ready()
        b.wait_ready()
        rng = random.Random(1)
        async with httpx.AsyncClient(timeout=20) as http:
            took = [await one_try(http, a.url, b.url, rng) for _ in range(tries)]
        within = sum(t <= 1.0 for t in took)
        print(
            f"| {label} | {tries} | {within} / {tries} | {statistics.median(took) * 1000:.0f} | "
            f"{max(took) * 1000:.0f} |"
        )
    finally:
        a.stop()
        b.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        targets = [("sqlite (shared file)", f"sqlite+aiosqlite:///{tmp}/bench.db")]
        pg = asyncio.run(fresh_postgres("parley_bench_cancel"))
        if pg is not None:
            targets.append(("postgres", pg))
        print("| database | tries | done within 1 s | median ms | max ms |")
        print("| --- | --- | --- | --- | --- |")
        for label, url in targets:
            migrate(url)
            asyncio.run(bench(url, label, args.tries, tmp))


if __name__ == "__main__":
    main()
