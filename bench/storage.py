"""Storage benchmark: appending at 10, 1,000 and 100,000 messages, loading 10,000 and reading the
last page of 100 of those 10,000 (``GET …/messages?after=&limit=``), per backend.

Run by hand: ``.venv/bin/python bench/storage.py`` (PostgreSQL too when it answers). Imports
app.storage, app.domain, alembic and asyncpg. Big conversations are seeded with bulk inserts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from sqlalchemy import insert, update

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain import MessageList, Role, TextMessage
from app.storage import ConversationRepository, Database
from app.storage.records import message_rows
from app.storage.tables import CONVERSATIONS, MESSAGES
from bench.databases import on_postgres, on_sqlite

APPEND_SIZES = (10, 1_000, 100_000)
LOAD_SIZE = 10_000
PAGE = 100
CHUNK = 5_000
TEXT = "The quick brown fox jumps over the lazy dog. " * 4


def message(n: int) -> TextMessage:
    return TextMessage(f"{n}: {TEXT}", role=Role.USER if n % 2 else Role.ASSISTANT)


async def seed(database: Database, size: int) -> str:
    """A conversation of ``size`` messages, inserted in bulk rather than one by one."""
    async with database.transaction() as session:
        record = await ConversationRepository(session, owner="bench").create(MessageList(), {}, {})
    for start in range(0, size, CHUNK):
        batch = [message(n) for n in range(start, min(size, start + CHUNK))]
        async with database.transaction() as session:
            await session.execute(insert(MESSAGES), message_rows(record.id, start, batch))
    async with database.transaction() as session:
        await session.execute(
            update(CONVERSATIONS).where(CONVERSATIONS.c.id == record.id).values(message_count=size)
        )
    return record.id


async def timed(operation: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await operation()
    return time.perf_counter() - start


async def measure(database: Database, repeats: int) -> dict[str, float]:
    """Median seconds per operation; the sizes take turns so that drift hits them alike."""
    conversations = {size: await seed(database, size) for size in APPEND_SIZES}
    loaded = await seed(database, LOAD_SIZE)

    async def append(conversation_id: str) -> None:
        async with database.transaction() as session:
            repository = ConversationRepository(session, owner="bench")
            await repository.append_messages(conversation_id, [message(-1)])

    async def load() -> None:
        async with database.session(readonly=True) as session:
            messages = await ConversationRepository(session, owner="bench").load_messages(loaded)
            assert len(messages) == LOAD_SIZE

    async def page() -> None:
        async with database.session(readonly=True) as session:
            repository = ConversationRepository(session, owner="bench")
            messages, _ = await repository.load_page(loaded, LOAD_SIZE - PAGE, PAGE)
            assert len(messages) == PAGE

    samples: dict[str, list[float]] = {f"append@{size}": [] for size in APPEND_SIZES}
    samples[f"load {LOAD_SIZE}"] = []
    samples[f"page {PAGE}"] = []
    order = list(conversations.items())
    for round_ in range(repeats + 3):
        order = order[1:] + order[:1]  # each size takes each place in the round in turn
        for size, conversation_id in order:
            elapsed = await timed(lambda c=conversation_id: append(c))  # type: ignore[misc]
            if round_ >= 3:  # the first rounds warm the pool and the caches
                samples[f"append@{size}"].append(elapsed)
        if round_ % 5 == 0:
            elapsed = await timed(load)
            if round_ >= 3:
                samples[f"load {LOAD_SIZE}"].append(elapsed)
            elapsed = await timed(page)
            if round_ >= 3:
                samples[f"page {PAGE}"].append(elapsed)
    return {name: statistics.median(values) for name, values in samples.items()}


async def bench_sqlite(repeats: int) -> dict[str, float]:
    return await on_sqlite(lambda database: measure(database, repeats))


async def bench_postgres(server_url: str, repeats: int) -> dict[str, float] | str:
    return await on_postgres(
        server_url, "parley_bench_storage", lambda database: measure(database, repeats)
    )


def report(results: dict[str, dict[str, float] | str]) -> None:
    columns = [f"append@{size:,}" for size in APPEND_SIZES]
    columns += [f"load {LOAD_SIZE:,}", f"page {PAGE}", "ratio"]
    print(f"{'backend':<10}" + "".join(f"{c:>16}" for c in columns))
    for backend, figures in results.items():
        if isinstance(figures, str):
            print(f"{backend:<10}  {figures}")
            continue
        values = [figures[f"append@{size}"] for size in APPEND_SIZES]
        values += [figures[f"load {LOAD_SIZE}"], figures[f"page {PAGE}"]]
        cells = "".join(f"{v * 1000:>13.2f} ms" for v in values)
        ratio = figures[f"append@{APPEND_SIZES[-1]}"] / figures[f"append@{APPEND_SIZES[0]}"]
        verdict = "ok" if ratio <= 1.5 else "over the 1.5 target"
        print(f"{backend:<10}{cells}{ratio:>14.2f} ×  ({verdict})")
    print(f"ratio = append@{APPEND_SIZES[-1]:,} / append@{APPEND_SIZES[0]:,}; medians.")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=100, help="timed appends per size")
    parser.add_argument(
        "--postgres-url",
        default="postgresql+asyncpg://postgres@127.0.0.1:5432/",
        help="server to bench on (a throw-away database is created and dropped)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    results: dict[str, dict[str, float] | str] = {"sqlite": await bench_sqlite(args.repeats)}
    if not args.no_postgres:
        results["postgres"] = await bench_postgres(args.postgres_url, args.repeats)
    report(results)


if __name__ == "__main__":
    asyncio.run(main())
