"""Search benchmark: 10,000 conversations of 50 messages (500,000 messages, about 25 words
each, drawn from a 20,000-word vocabulary with a Zipf-like frequency), a third of them titled, on
each database; then the first page (20) of ``GET /conversations?q=`` for ~50 queries in three
bands of word frequency, timed through the repository (median and p95).

Run by hand: ``.venv/bin/python bench/search.py`` (PostgreSQL too when it answers; ``--scale``
to seed fewer). Imports app.storage, alembic and asyncpg. The rows are inserted in bulk through
the tables, so the search index is built by the database as on any write (triggers on SQLite,
generated columns on PostgreSQL); the seeding time is reported too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain import Role, TextMessage
from app.storage import ConversationRepository, Database, Filters
from app.storage.records import message_rows
from app.storage.tables import CONVERSATIONS, MESSAGES
from bench.databases import on_postgres, on_sqlite

CONVERSATIONS_N = 10_000
MESSAGES_PER = 50
WORDS_PER = 25
VOCABULARY = 20_000
PAGE = 20
CHUNK = 200  # conversations per insert transaction
BANDS = {  # the vocabulary's ranks each band's query words are drawn from, and how many
    "rare (rank 5k-20k)": (5_000, VOCABULARY, 20),
    "medium (rank 500-5k)": (500, 5_000, 15),
    "frequent (rank 50-500)": (50, 500, 10),
    "two words (in one message)": (0, 0, 5),
}
OWNER = "bench"


def vocabulary(rng: random.Random) -> list[str]:
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words, key=lambda w: (len(w), w))


def zipf_weights() -> list[float]:
    cumulative, total = [], 0.0
    for rank in range(1, VOCABULARY + 1):
        total += 1 / rank**1.05
        cumulative.append(total)
    return cumulative


def two_words(
    rows: list[dict[str, object]], weights: list[float], words: list[str], rng: random.Random
) -> list[str]:
    """Five queries of two words that occur in one message (one of them outside the 500 most
    frequent words), from the first messages seeded."""
    rank = {w: i for i, w in enumerate(words)}
    found: list[str] = []
    for row in rows:
        text_ = json.loads(str(row["data"]))["text"].split()
        rare = [w for w in text_ if rank[w] >= 500]
        if rare and len(found) < 5 and len(set(text_)) > 1:
            other = rng.choice([w for w in text_ if w != rare[0]])
            found.append(f"{rare[0]} {other}")
    return found


pairs: list[str] = []


async def seed(database: Database, scale: float, rng: random.Random) -> tuple[list[str], float]:
    """Insert the conversations and their messages (then ANALYZE, as autovacuum would after
    a bulk load); the vocabulary and the seconds it took."""
    words, weights = vocabulary(rng), zipf_weights()
    count = int(CONVERSATIONS_N * scale)
    start, base = time.perf_counter(), datetime(2026, 1, 1, tzinfo=UTC)
    for first in range(0, count, CHUNK):
        conversations, messages = [], []
        for n in range(first, min(count, first + CHUNK)):
            key = secrets.token_hex(16)
            title = " ".join(rng.choices(words, cum_weights=weights, k=3)) if n % 3 == 0 else None
            conversations.append(
                {
                    "id": key,
                    "owner": OWNER,
                    "created_at": base + timedelta(seconds=n),
                    "updated_at": base + timedelta(seconds=n),
                    "config": {},
                    "metadata": {},
                    "version": 1,
                    "message_count": MESSAGES_PER,
                    "lease_run_id": None,
                    "lease_expires_at": None,
                    "title": title,
                    "archived": False,
                }
            )
            texts = [
                " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(5, 2 * WORDS_PER)))
                for _ in range(MESSAGES_PER)
            ]
            roles = (Role.USER, Role.ASSISTANT)
            batch = [TextMessage(t, role=roles[i % 2]) for i, t in enumerate(texts)]
            messages.extend(message_rows(key, 0, batch))
        async with database.transaction() as session:
            await session.execute(insert(CONVERSATIONS), conversations)
            await session.execute(insert(MESSAGES), messages)
        if first == 0:
            pairs.extend(two_words(messages, weights, words, rng))
    async with database.transaction() as session:  # as autovacuum would after a bulk load
        await session.execute(text("ANALYZE"))
    return words, time.perf_counter() - start


def queries(words: list[str], rng: random.Random) -> dict[str, list[str]]:
    chosen: dict[str, list[str]] = {}
    for band, (low, high, n) in BANDS.items():
        if high:
            chosen[band] = [words[rng.randrange(low, high)] for _ in range(n)]
    chosen["two words (in one message)"] = pairs[:5]
    return chosen


async def measure(database: Database, scale: float) -> dict[str, object]:
    rng = random.Random(30)
    words, seeded = await seed(database, scale, rng)

    async def search(q: str) -> tuple[float, int]:
        start = time.perf_counter()
        async with database.session(readonly=True) as session:
            found, _ = await ConversationRepository(session, owner=OWNER).find(
                PAGE, None, Filters(query=q)
            )
        return time.perf_counter() - start, len(found)

    for q in ("warm", words[10], words[3000]):  # the pool, the caches
        await search(q)
    results: dict[str, object] = {"seeded": seeded}
    every: list[float] = []
    for band, qs in queries(words, rng).items():
        timings, hits = [], []
        for q in qs:
            elapsed, n = await search(q)
            timings.append(elapsed)
            hits.append(n)
        every.extend(timings)
        results[band] = (timings, statistics.mean(hits))
    results["all"] = (every, None)
    return results


async def bench_sqlite(scale: float) -> dict[str, object]:
    return await on_sqlite(lambda database: measure(database, scale))


async def bench_postgres(server_url: str, scale: float) -> dict[str, object] | str:
    return await on_postgres(
        server_url, "parley_bench_search", lambda database: measure(database, scale)
    )


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def report(results: dict[str, dict[str, object] | str], scale: float) -> None:
    count = int(CONVERSATIONS_N * scale)
    print(f"{count:,} conversations × {MESSAGES_PER} messages; first page of {PAGE}; ms")
    print(f"{'backend':<10}{'queries':<28}{'n':>4}{'median':>10}{'p95':>10}{'max':>10}{'hits':>7}")
    for backend, figures in results.items():
        if isinstance(figures, str):
            print(f"{backend:<10}  {figures}")
            continue
        for band in [*BANDS, "all"]:
            timings, hits = figures[band]  # type: ignore[misc]
            cells = [statistics.median(timings), p95(timings), max(timings)]
            shown = f"{hits:>7.1f}" if hits is not None else f"{'':>7}"
            print(
                f"{backend:<10}{band:<28}{len(timings):>4}"
                + "".join(f"{v * 1000:>10.1f}" for v in cells)
                + shown
            )
        print(f"{backend:<10}seeded in {figures['seeded']:.0f} s (rows and index)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 10,000 to seed")
    parser.add_argument(
        "--postgres-url",
        default="postgresql+asyncpg://postgres@127.0.0.1:5432/",
        help="server to bench on (a throw-away database is created and dropped)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    args = parser.parse_args()
    results: dict[str, dict[str, object] | str] = {}
    if not args.no_sqlite:
        results["sqlite"] = await bench_sqlite(args.scale)
    if not args.no_postgres:
        results["postgres"] = await bench_postgres(args.postgres_url, args.scale)
    report(results, args.scale)


if __name__ == "__main__":
    asyncio.run(main())
