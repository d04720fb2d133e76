"""The cached share of input tokens over a long conversation (issue 29, docs/providers.md).

Run: ``.venv/bin/python -m bench.cache`` (``make bench`` runs it; ``--turns N``, ``--budget N``
repeatable, ``--trim-to F`` repeatable, ``--json PATH``). For each context budget and
``PARLEY_CONTEXT_TRIM_TO``, a conversation of ``--turns`` user turns (a lookup by a client tool
every seventh) runs through Parley's HTTP API (in process, a fresh SQLite database) and the real
anthropic SDK against the prefix-cache fake of tests/providers/anthropic_cache.py, which reads a
request's prefix from its cache when an earlier request wrote it up to one of its
``cache_control`` breakpoints (and does not look back past a breakpoint, as the API does: a
lower bound). Reported: the share of input tokens read from the cache after the first 3 model
calls, as the fake counted them and as the streams' ``message_stop`` usage said (the two must
agree), and the share written. ``trim_to`` 1 is the sliding window (no steps).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench.databases import migrate  # noqa: E402
from tests.providers.anthropic_cache import CachingModel  # noqa: E402
from tests.providers.cache_run import converse  # noqa: E402
from tests.providers.fake_server import FakeServer  # noqa: E402

SKIP = 3


@asynccontextmanager
async def parley(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            yield c


async def measure(turns: int, budget: int, trim_to: float, tmp: Path) -> dict[str, float]:
    url = f"sqlite+aiosqlite:///{tmp / f'cache-{budget}-{trim_to}.db'}"
    migrate(url)
    model = CachingModel()
    async with FakeServer() as upstream:
        model.serve(upstream)
        settings = Settings(
            database_url=url,
            sse_ping_seconds=0,
            log_level="WARNING",
            anthropic_api_key="sk-ant-bench",
            anthropic_base_url=upstream.url,
            context_trim_to=trim_to,
        )
        started = time.perf_counter()
        async with parley(settings) as client:
            seen = await converse(client, turns, context_max_tokens=budget)
        seconds = time.perf_counter() - started
    streamed = seen.streamed_after(SKIP)
    fake = model.cache.cached_share(skip=SKIP)
    assert abs(streamed.share - fake) < 1e-9, (streamed.share, fake)
    return {
        "budget": budget,
        "trim_to": trim_to,
        "calls": len(model.cache.usage),
        "cached_share": fake,
        "written_share": streamed.written / max(1, streamed.input),
        "input_tokens": streamed.input,
        "seconds": seconds,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--budget", type=int, action="append")
    parser.add_argument("--trim-to", type=float, action="append")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    budgets = args.budget or [3000, 8000]
    trims = args.trim_to or [1.0, 0.8, 0.6, 0.4]
    for name in ("httpx", "httpx2", "parley"):
        logging.getLogger(name).setLevel(logging.WARNING)
    print(f"{args.turns} user turns; cached share after the first {SKIP} model calls")
    print(f"{'budget':>7} {'trim_to':>7} {'calls':>5} {'cached':>7} {'written':>7} {'input':>8}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="parley-bench-cache-") as tmp:
        for budget in budgets:
            for trim_to in trims:
                row = await measure(args.turns, budget, trim_to, Path(tmp))
                rows.append(row)
                print(
                    f"{budget:>7} {trim_to:>7.2f} {row['calls']:>5} "
                    f"{row['cached_share']:>7.1%} {row['written_share']:>7.1%} "
                    f"{row['input_tokens']:>8}",
                    flush=True,
                )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
