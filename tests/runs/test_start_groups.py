"""Starts grouped into shared write transactions (app/runs/starts.py), on both databases: a herd
of starts commits in a few transactions, a refused start in a group rolls back its own writes
only and gets its own error, a group that fails as a whole is retried start by start, and a
caller that goes away once its start was taken leaves a run that ends as a disconnect does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.domain import TextMessage, ToolCallMessage
from app.runs import starts as starts_module
from app.runs.delta import Delta
from app.runs.errors import NothingToAnswer, PendingToolCalls
from app.runs.follow import RunReader
from app.runs.services import Services
from app.storage import (
    ConversationNotFound,
    DatabaseUnavailable,
    LeaseHeld,
    SavepointChain,
    VersionConflict,
)
from tests.runs.conftest import (
    OWNER,
    MakeServices,
    all_events,
    conversations,
    new_conversation,
    start_run,
)
from tests.runs.test_runs import PacedAdapter, body
from tests.storage.storage_support import backend_pid, terminate_backends


async def idle(services: Services, conversation_id: str) -> None:
    """Until the conversation's run has ended and let go of its lease."""
    for _ in range(200):
        record = (await conversations(services).get(conversation_id)).record
        if record.lease_run_id is None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the conversation is still leased")


async def test_a_herd_of_starts_commits_in_a_few_transactions(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=3, delay=0.01))
    ids = [await new_conversation(services, f"hi {n}") for n in range(30)]
    before = services.starts.transactions

    runs = await asyncio.gather(*(start_run(services, c) for c in ids))

    transactions = services.starts.transactions - before
    assert transactions <= 10, transactions  # 30 alone would be 30
    for run in runs:
        events = await all_events(run)
        assert body(events[-1])["status"] == "completed"
    for conversation_id in ids:
        messages = await conversations(services).messages(conversation_id)
        assert [m.text for m in messages[-2:]] == [  # type: ignore[attr-defined]
            f"hi {ids.index(conversation_id)}",
            "w0 w1 w2 ",
        ]


async def test_a_refused_start_in_a_group_rolls_back_its_own_writes_only(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=2, delay=0.01))
    good = [await new_conversation(services, "hi") for _ in range(6)]
    stale = await new_conversation(services, "hi")
    version = (await conversations(services).get(stale)).record.version
    waiting = await new_conversation(services, "hi")  # a client tool's result outstanding
    call = ToolCallMessage("lookup", "call-1", pending=True)
    await conversations(services).apply_delta(waiting, Delta(messages=[call]), None)
    empty = await new_conversation(services)  # a system prompt only: nothing to answer
    delta = Delta(messages=[TextMessage("never stored")])
    starts: list[Any] = [start_run(services, c, delta=Delta([TextMessage("go")])) for c in good]
    starts.insert(1, start_run(services, waiting))  # refused once it took the lease
    starts.insert(3, start_run(services, stale, delta=delta, expected_version=version + 5))
    starts.insert(5, start_run(services, empty, delta=Delta(config_patch={"model": "paced-1"})))
    starts.append(start_run(services, "c" * 32))

    outcomes = await asyncio.gather(*starts, return_exceptions=True)

    refused = {1: PendingToolCalls, 3: VersionConflict, 5: NothingToAnswer}
    refused[len(outcomes) - 1] = ConversationNotFound
    for index, kind in refused.items():
        assert isinstance(outcomes[index], kind), outcomes[index]
    for run in [o for i, o in enumerate(outcomes) if i not in refused]:
        assert body((await all_events(run))[-1])["status"] == "completed"
    for conversation_id in (stale, waiting, empty):  # nothing of theirs stayed: no lease either
        view = await conversations(services).get(conversation_id)
        assert view.record.lease_run_id is None
    assert (await conversations(services).get(empty)).record.config == {}
    stored = await conversations(services).messages(stale)
    assert [m.text for m in stored[1:]] == ["hi"]  # type: ignore[attr-defined]
    for conversation_id in good:
        stored = await conversations(services).messages(conversation_id)
        assert [m.text for m in stored[-2:]] == ["go", "w0 w1 "]  # type: ignore[attr-defined]


async def test_two_starts_of_one_conversation_in_a_group_run_it_once(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=3, delay=0.01))
    conversation_id = await new_conversation(services, "hi")
    others = [await new_conversation(services, "hi") for _ in range(3)]

    outcomes = await asyncio.gather(
        *(start_run(services, c) for c in others),
        start_run(services, conversation_id),
        start_run(services, conversation_id),
        return_exceptions=True,
    )

    mine = outcomes[-2:]
    assert sum(isinstance(o, LeaseHeld) for o in mine) == 1, mine
    (run,) = [o for o in mine if not isinstance(o, BaseException)]
    assert body((await all_events(run))[-1])["status"] == "completed"
    stored = await conversations(services).messages(conversation_id)
    assert [m.text for m in stored[1:]] == ["hi", "w0 w1 w2 "]  # type: ignore[attr-defined]


async def test_a_group_that_fails_whole_is_retried_start_by_start(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=2, delay=0.01))
    ids = [await new_conversation(services, "hi") for _ in range(5)]
    pending = await new_conversation(services, "hi")
    call = ToolCallMessage("lookup", "call-1", pending=True)
    await conversations(services).apply_delta(pending, Delta(messages=[call]), None)
    starts = services.starts
    transaction = starts._transaction
    failed = []

    async def fail_groups(group: list[Any]) -> list[Any]:
        if len(group) > 1 and not failed:  # the first group, as a deadlock would end it
            failed.append(len(group))
            raise RuntimeError("deadlock detected")
        return await transaction(group)

    starts._transaction = fail_groups  # type: ignore[method-assign]
    blocker = asyncio.ensure_future(start_run(services, ids[0]))  # alone: the others queue
    outcomes = await asyncio.gather(
        *(start_run(services, c) for c in [*ids[1:], pending]), return_exceptions=True
    )

    assert failed and failed[0] >= 2
    assert isinstance(outcomes[-1], PendingToolCalls)
    for run in [await blocker, *outcomes[:-1]]:
        assert body((await all_events(run))[-1])["status"] == "completed"  # type: ignore[arg-type]


async def test_a_caller_gone_after_its_start_was_taken_leaves_a_run_that_ends(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=50, delay=0.02))
    conversation_id = await new_conversation(services, "hi")
    entered = asyncio.Event()
    release = asyncio.Event()
    transaction = services.starts._transaction

    async def slow(group: list[Any]) -> list[Any]:
        entered.set()
        await release.wait()  # the caller is cancelled while its start is under way
        return await transaction(group)

    services.starts._transaction = slow  # type: ignore[method-assign]
    caller = asyncio.ensure_future(start_run(services, conversation_id))
    await entered.wait()
    caller.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller

    for _ in range(200):  # started, then stopped as a disconnect stops it
        runs = await _runs(services, conversation_id)
        if runs and runs[0].status != "running":
            break
        await asyncio.sleep(0.02)
    (record,) = runs
    assert record.status == "aborted"
    await idle(services, conversation_id)


async def test_a_caller_gone_before_its_start_was_taken_starts_nothing(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=2, delay=0.01))
    first, second = [await new_conversation(services, "hi") for _ in range(2)]
    release = asyncio.Event()
    transaction = services.starts._transaction

    async def slow(group: list[Any]) -> list[Any]:
        await release.wait()
        return await transaction(group)

    services.starts._transaction = slow  # type: ignore[method-assign]
    services.starts.parallel = 1  # (PostgreSQL's 4 would take the second at once)
    running = asyncio.ensure_future(start_run(services, first))
    await asyncio.sleep(0.05)  # the first is under way; the second waits for the next group
    queued = asyncio.ensure_future(start_run(services, second))
    await asyncio.sleep(0.05)
    queued.cancel()
    release.set()
    await all_events(await running)
    with pytest.raises(asyncio.CancelledError):
        await queued

    assert await _runs(services, second) == []
    assert (await conversations(services).get(second)).record.lease_run_id is None


async def _runs(services: Services, conversation_id: str) -> list[Any]:
    records, _ = await RunReader(services, OWNER).list(conversation_id, 10, None)
    return list(records)


async def test_a_group_the_database_does_not_answer_fails_at_once_not_start_by_start(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(words=2, delay=0.01))
    ids = [await new_conversation(services, "hi") for _ in range(6)]
    starts = services.starts
    transaction = starts._transaction
    tried: list[int] = []

    async def unanswered(group: list[Any]) -> list[Any]:
        if len(group) > 1:  # as a database that refuses or times out every connection
            tried.append(len(group))
            raise DatabaseUnavailable()
        return await transaction(group)

    starts._transaction = unanswered  # type: ignore[method-assign]
    starts.parallel = 1
    blocker = asyncio.ensure_future(start_run(services, ids[0]))  # alone: the others queue
    outcomes = await asyncio.gather(
        *(start_run(services, c) for c in ids[1:]), return_exceptions=True
    )

    assert tried == [5]  # one try for the group: no connection attempt per start after it
    assert all(isinstance(o, DatabaseUnavailable) for o in outcomes), outcomes
    assert body((await all_events(await blocker))[-1])["status"] == "completed"


async def test_a_group_whose_connection_dies_midway_is_retried_start_by_start(
    make_services: MakeServices, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL's connection lost between two starts of a group (a restart, a killed
    backend): the group's commit fails, and each start is tried again alone on a new
    connection — none is refused 503 for a loss only its group's connection saw."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite connections do not die with a server")
    services = await make_services(PacedAdapter(words=2, delay=0.01))
    ids = [await new_conversation(services, "hi") for _ in range(6)]
    killed: list[int] = []

    class Dying(SavepointChain):
        async def run(self, work: Any) -> None:
            await super().run(work)
            if not killed:
                killed.append(await backend_pid(self.session))
                await terminate_backends(services.database, killed[0])

    monkeypatch.setattr(starts_module, "SavepointChain", Dying)
    services.starts.parallel = 1
    blocker = asyncio.ensure_future(start_run(services, ids[0]))  # alone: the others queue
    outcomes = await asyncio.gather(*(start_run(services, c) for c in ids[1:]))

    assert killed
    for run in [await blocker, *outcomes]:
        assert body((await all_events(run))[-1])["status"] == "completed"
