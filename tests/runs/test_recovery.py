"""Recovering dead runs as the use cases' explicit step, on both databases: a write that meets a
dead run's expired lease recovers it in a transaction of its own and tries once more; a start
that meets none opens one write transaction; a stalled process's own run is renewed, not
ended."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from app.conversations.history import HistoryService
from app.domain import TextMessage
from app.runs.delta import Delta
from app.runs.follow import RunReader
from app.runs.recovery import recover
from app.runs.services import Services
from app.storage import ConversationNotFound, ConversationRepository, LeaseExpired, LeaseHeld
from tests.domain.domain_support import ScriptedAdapter, text_reply
from tests.runs.conftest import (
    OWNER,
    MakeServices,
    all_events,
    conversations,
    new_conversation,
    start_run,
)
from tests.runs.test_runs import PacedAdapter, body, dead_run, names

DEAD = "0" * 31 + "d"


def count_transactions(services: Services) -> list[str | None]:
    """The owners of the write transactions ``services`` opens from now on (its writer's, for
    no owner, among them)."""
    opened: list[str | None] = []
    original = services.repository

    def counting(owner: str | None) -> AbstractAsyncContextManager[ConversationRepository]:
        opened.append(owner)
        return original(owner)

    services.repository = counting  # type: ignore[method-assign]
    return opened


async def test_a_start_opens_one_write_transaction(make_services: MakeServices) -> None:
    services = await make_services(ScriptedAdapter([text_reply("hello")]))
    conv_id = await new_conversation(services, "hi")
    opened = count_transactions(services)
    before = services.starts.transactions
    run = await start_run(services, conv_id)
    assert services.starts.transactions - before == 1  # the start's group: this start alone
    assert opened.count(OWNER) == 0
    await all_events(run)


async def test_a_start_past_a_dead_run_recovers_it_then_starts(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([text_reply("whole")]))
    conv_id = await new_conversation(services, "hi")
    await dead_run(services, conv_id, DEAD, "half ", "said")
    await asyncio.sleep(0.1)  # its lease expires
    opened = count_transactions(services)
    before = services.starts.transactions

    run = await start_run(services, conv_id)

    # The start met the dead run's lease (rolled back), the recovery committed, then the start.
    assert opened.count(OWNER) == 1
    assert services.starts.transactions - before == 1
    events = await all_events(run)
    assert body(events[-1])["status"] == "completed"
    stored = await conversations(services).messages(conv_id)
    assert [m.text for m in stored[1:]] == ["hi", "half said", "whole"]  # type: ignore[attr-defined]
    assert stored[2].incomplete  # type: ignore[attr-defined]
    dead = await RunReader(services, OWNER).get(conv_id, DEAD)
    assert (dead.status, dead.error_code) == ("interrupted", "process_lost")


@pytest.mark.parametrize("operation", ["delta", "clear", "rewind", "delete"])
async def test_writes_past_a_dead_run_recover_it_first(
    make_services: MakeServices, operation: str
) -> None:
    services = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(services, "hi")
    await dead_run(services, conv_id, DEAD, "partial")
    await asyncio.sleep(0.1)
    service = conversations(services)
    writes: dict[str, Callable[[], Awaitable[object]]] = {
        "delta": lambda: service.apply_delta(conv_id, Delta([TextMessage("next")]), None),
        "clear": lambda: service.clear(conv_id, None),
        "rewind": lambda: HistoryService(services, OWNER).rewind(conv_id, 3, None),
        "delete": lambda: service.delete(conv_id),
    }

    await writes[operation]()

    if operation == "delete":
        with pytest.raises(ConversationNotFound):
            await service.get(conv_id)
        return
    dead = await RunReader(services, OWNER).get(conv_id, DEAD)
    assert dead.status == "interrupted"
    view = await service.get(conv_id)
    assert view.status == "idle"
    if operation in ("delta", "rewind"):
        stored = await service.messages(conv_id)
        assert [m.text for m in stored[1:3]] == ["hi", "partial"]  # type: ignore[attr-defined]


async def test_a_stalled_process_renews_its_own_run_when_a_write_meets_it(
    make_services: MakeServices,
) -> None:
    """Its loop stood still past the lease: a write it serves meets the expired lease,
    recovery finds the run alive here and renews it, and the write is refused as while
    running; the run completes."""
    services = await make_services(PacedAdapter(20, 0.01), run_lease_seconds=0.2)
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    reading = asyncio.create_task(all_events(run))
    await asyncio.sleep(0.05)
    time.sleep(0.5)  # noqa: ASYNC251 - the loop stalls past the lease
    with pytest.raises(LeaseHeld) as refused:
        await conversations(services).apply_delta(conv_id, Delta([TextMessage("x")]), None)
    assert not isinstance(refused.value, LeaseExpired)
    events = await asyncio.wait_for(reading, 5)
    assert body(events[-1])["status"] == "completed" and "error" not in names(events)


async def test_recover_ends_nothing_without_an_expired_lease(make_services: MakeServices) -> None:
    services = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(services, "hi")
    async with services.repository(OWNER) as repo:
        assert await recover(repo, services.manager, 6, conv_id) is False
    # A lease of 1 s: a busy machine (a suite under coverage) takes well over 0.05 s between
    # two statements.
    await dead_run(services, conv_id, DEAD, "partial", lease=1.0)
    async with services.repository(OWNER) as repo:  # its lease has not expired yet
        assert await recover(repo, services.manager, 6, conv_id) is False
    await asyncio.sleep(1.1)
    async with services.repository(OWNER) as repo:
        assert await recover(repo, services.manager, 6, conv_id) is True
    async with services.repository(OWNER) as repo:
        assert await recover(repo, services.manager, 6, conv_id) is False  # once only
