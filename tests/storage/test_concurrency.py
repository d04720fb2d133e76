"""Concurrent writers, in one process and across processes: nothing lost, nothing doubled."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.domain import MessageList, TextMessage, ToolCallMessage
from app.storage import (
    ConversationRepository,
    Database,
    LeaseHeld,
    StorageError,
    ToolOutcome,
)
from tests.storage.storage_support import Store

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITERS = 20
APPENDS = 5
PROCESSES = 4

# One OS process appending its numbered messages, each append its own transaction.
APPENDER = """
import asyncio, sys
from app.domain import TextMessage
from app.storage import ConversationRepository, Database

async def main(url, conversation_id, writer, count):
    database = Database(url)
    print("ready", flush=True)
    sys.stdin.readline()  # start together with the other processes
    try:
        for n in range(count):
            async with database.transaction() as session:
                await ConversationRepository(session, owner=None).append_messages(
                    conversation_id, [TextMessage(f"{writer}:{n}")]
                )
    finally:
        await database.dispose()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


async def in_own_transaction(
    database: Database, operation: Callable[[ConversationRepository], Awaitable[Any]]
) -> Any:
    async with database.transaction() as session:
        return await operation(ConversationRepository(session, owner=None))


async def appender(database: Database, conversation_id: str, writer: int) -> list[int]:
    versions = []
    for n in range(APPENDS):
        record = await in_own_transaction(
            database,
            lambda r, n=n: r.append_messages(conversation_id, [TextMessage(f"{writer}:{n}")]),
        )
        versions.append(record.version)
    return versions


def assert_every_message_once(messages: MessageList, expected: set[str]) -> None:
    texts = [m.text for m in messages if isinstance(m, TextMessage)]
    assert len(texts) == len(messages) == len(expected)
    assert set(texts) == expected
    for writer in {text.split(":")[0] for text in texts}:  # each writer's own order is kept
        mine = [int(t.split(":")[1]) for t in texts if t.split(":")[0] == writer]
        assert mine == sorted(mine)


async def test_concurrent_appenders_lose_and_double_nothing(
    store: Store, database: Database
) -> None:
    created = await store.create()

    results = await asyncio.gather(
        *(appender(database, created.id, writer) for writer in range(WRITERS))
    )

    for versions in results:
        assert versions == sorted(versions) and len(set(versions)) == APPENDS
    all_versions = sorted(v for versions in results for v in versions)
    assert all_versions == list(range(2, 2 + WRITERS * APPENDS))
    record = await store(lambda r: r.get(created.id))
    assert (record.version, record.message_count) == (1 + WRITERS * APPENDS, WRITERS * APPENDS)
    rows = await store.sql("SELECT idx FROM messages WHERE conversation_id = :c", c=created.id)
    assert sorted(idx for (idx,) in rows) == list(range(WRITERS * APPENDS))
    messages = await store(lambda r: r.load_messages(created.id))
    assert_every_message_once(
        messages, {f"{w}:{n}" for w in range(WRITERS) for n in range(APPENDS)}
    )


async def test_appenders_in_separate_processes(store: Store, database_url: str) -> None:
    created = await store.create()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, "-c", APPENDER, database_url, created.id, f"p{i}", str(APPENDS)),
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for i in range(PROCESSES)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdin is not None
        assert await process.stdout.readline() == b"ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        await process.stdin.drain()

    codes = await asyncio.gather(*(process.wait() for process in processes))

    assert codes == [0] * PROCESSES
    record = await store(lambda r: r.get(created.id))
    total = PROCESSES * APPENDS
    assert (record.version, record.message_count) == (1 + total, total)
    messages = await store(lambda r: r.load_messages(created.id))
    assert_every_message_once(
        messages, {f"p{i}:{n}" for i in range(PROCESSES) for n in range(APPENDS)}
    )


async def test_only_one_of_many_runs_gets_the_lease(store: Store, database: Database) -> None:
    created = await store.create()

    outcomes = await asyncio.gather(
        *(
            in_own_transaction(database, lambda r, i=i: r.acquire_lease(created.id, f"r{i}", 60))
            for i in range(10)
        ),
        return_exceptions=True,
    )

    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(o, LeaseHeld) for o in outcomes if o not in winners)
    assert {o.run_id for o in outcomes if isinstance(o, LeaseHeld)} == {winners[0].lease_run_id}


async def test_a_tool_call_is_completed_exactly_once_under_races(
    store: Store, database: Database
) -> None:
    call = ToolCallMessage("ask", "call_1", pending=True)
    created = await store.create(MessageList([call]))

    outcomes = await asyncio.gather(
        *(
            in_own_transaction(
                database,
                lambda r, i=i: r.apply_delta(
                    created.id, tool_results=[ToolOutcome("call_1", result=i)]
                ),
            )
            for i in range(8)
        ),
        return_exceptions=True,
    )

    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert all(isinstance(o, StorageError) for o in outcomes if isinstance(o, BaseException))
    record = await store(lambda r: r.get(created.id))
    assert (record.version, record.pending_tool_call_ids) == (2, ())
