"""The run lease: one holder at a time, renewed by it, taken over once expired, never in the way."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.domain import AgentMessage, MessageList, Role, TextMessage, ToolCallMessage
from app.storage import (
    ConversationNotFound,
    ConversationRecord,
    DuplicateToolCall,
    LeaseExpired,
    LeaseHeld,
    LeaseLost,
    RunAppend,
)
from tests.storage.storage_support import FakeClock, Store

TTL = 30.0


async def running(store: Store, run_id: str = "run-1") -> ConversationRecord:
    created = await store.create(MessageList([AgentMessage("Be brief.")]))
    return await store(lambda r: r.acquire_lease(created.id, run_id, TTL))


async def test_a_lease_cannot_be_taken_twice(store: Store, clock: FakeClock) -> None:
    record = await running(store)
    assert record.lease_run_id == "run-1" and record.is_running(clock())
    assert record.lease_expires_at is not None
    assert record.lease_expires_at - clock() == timedelta(seconds=TTL)

    clock.advance(TTL - 1)
    with pytest.raises(LeaseHeld) as caught:
        await store(lambda r: r.acquire_lease(record.id, "run-2", TTL))
    assert caught.value.run_id == "run-1"
    assert (await store(lambda r: r.get(record.id))).lease_run_id == "run-1"


async def test_the_holder_renews_others_cannot(store: Store, clock: FakeClock) -> None:
    record = await running(store)
    clock.advance(TTL - 1)

    assert await store(lambda r: r.renew_lease(record.id, "run-1", TTL)) is True
    assert await store(lambda r: r.renew_lease(record.id, "run-2", TTL)) is False
    clock.advance(TTL - 1)  # past the first expiry, within the renewed one

    renewed = await store(lambda r: r.get(record.id))
    assert renewed.is_running(clock()) and renewed.lease_run_id == "run-1"
    with pytest.raises(LeaseHeld):
        await store(lambda r: r.acquire_lease(record.id, "run-2", TTL))


async def test_an_expired_lease_is_taken_over_once_its_run_is_recovered(
    store: Store, clock: FakeClock
) -> None:
    record = await running(store)
    clock.advance(TTL + 1)
    assert not (await store(lambda r: r.get(record.id))).is_running(clock())
    with pytest.raises(LeaseExpired) as caught:  # its run first: recovery is the caller's step
        await store(lambda r: r.acquire_lease(record.id, "run-2", TTL))
    assert (caught.value.conversation_id, caught.value.run_id) == (record.id, "run-1")

    assert await store(lambda r: r.expired_lease(record.id)) == "run-1"
    await store(lambda r: r.release_lease(record.id, "run-1"))
    taken = await store(lambda r: r.acquire_lease(record.id, "run-2", TTL))

    assert taken.lease_run_id == "run-2" and taken.is_running(clock())
    assert await store(lambda r: r.renew_lease(record.id, "run-1", TTL)) is False
    with pytest.raises(LeaseLost):
        await store(lambda r: r.append_messages(record.id, [TextMessage("late")], run_id="run-1"))
    await store(lambda r: r.release_lease(record.id, "run-1"))  # not the holder: no-op
    assert (await store(lambda r: r.get(record.id))).lease_run_id == "run-2"


async def test_the_holder_appends_others_are_refused(store: Store, clock: FakeClock) -> None:
    record = await running(store)
    message = TextMessage("hello", role=Role.ASSISTANT)

    appended = await store(lambda r: r.append_messages(record.id, [message], run_id="run-1"))

    assert (appended.version, appended.message_count) == (2, 2)
    assert appended.is_running(clock())
    with pytest.raises(LeaseLost) as caught:
        await store(lambda r: r.append_messages(record.id, [message], run_id="run-2"))
    assert caught.value.run_id == "run-2"


async def test_deltas_clear_and_delete_wait_for_the_run(store: Store, clock: FakeClock) -> None:
    record = await running(store)
    for operation in [
        lambda r: r.apply_delta(record.id, messages=[TextMessage("hi")]),
        lambda r: r.apply_delta(record.id, config={"model": "x"}),
        lambda r: r.append_messages(record.id, [TextMessage("hi")]),
        lambda r: r.clear(record.id),
        lambda r: r.delete(record.id),
    ]:
        with pytest.raises(LeaseHeld) as caught:
            await store(operation)
        assert caught.value.run_id == "run-1"
    assert (await store(lambda r: r.get(record.id))).version == 1

    await store(lambda r: r.release_lease(record.id, "run-1"))
    released = await store(lambda r: r.apply_delta(record.id, messages=[TextMessage("hi")]))
    assert released.version == 2 and released.lease_run_id is None


async def test_a_write_past_an_expired_lease_ends_nothing(store: Store, clock: FakeClock) -> None:
    """A write that meets an expired lease raises LeaseExpired and changes nothing (the
    repository never ends a run nor commits): the use case recovers the run, then retries."""
    record = await running(store)
    clock.advance(TTL + 1)
    for operation in [
        lambda r: r.apply_delta(record.id, messages=[TextMessage("hi")]),
        lambda r: r.begin_run(record.id, "run-2", TTL),
        lambda r: r.append_messages(record.id, [TextMessage("hi")]),
        lambda r: r.clear(record.id),
        lambda r: r.rewind(record.id, 0),
        lambda r: r.delete(record.id),
    ]:
        with pytest.raises(LeaseExpired) as caught:
            await store(operation)
        assert caught.value.run_id == "run-1"
    after = await store(lambda r: r.get(record.id))
    assert (after.version, after.lease_run_id) == (record.version, "run-1")

    await store(lambda r: r.release_lease(record.id, "run-1"))  # what recovery ends with
    written = await store(lambda r: r.apply_delta(record.id, messages=[TextMessage("hi")]))
    assert written.lease_run_id is None and written.lease_expires_at is None
    with pytest.raises(LeaseLost):
        await store(lambda r: r.append_messages(record.id, [TextMessage("x")], run_id="run-1"))


async def test_a_renewed_expired_lease_holds_again(store: Store, clock: FakeClock) -> None:
    """Recovery that finds the run alive (its own process stalled) renews its lease: writes are
    then refused as while running, not as past an expired lease."""
    record = await running(store)
    clock.advance(TTL + 1)
    assert await store(lambda r: r.expired_lease(record.id)) == "run-1"
    assert await store(lambda r: r.renew_lease(record.id, "run-1", TTL)) is True

    assert await store(lambda r: r.expired_lease(record.id)) is None
    for operation in [
        lambda r: r.apply_delta(record.id, messages=[TextMessage("hi")]),
        lambda r: r.acquire_lease(record.id, "run-2", TTL),
    ]:
        with pytest.raises(LeaseHeld) as caught:
            await store(operation)
        assert not isinstance(caught.value, LeaseExpired)
    after = await store(lambda r: r.get(record.id))
    assert after.lease_run_id == "run-1" and after.is_running(clock())
    assert after.version == record.version


async def test_an_expired_holder_without_rivals_keeps_its_lease(
    store: Store, clock: FakeClock
) -> None:
    record = await running(store)
    clock.advance(TTL + 1)
    assert await store(lambda r: r.renew_lease(record.id, "run-1", TTL)) is True
    appended = await store(
        lambda r: r.append_messages(record.id, [TextMessage("x")], run_id="run-1")
    )
    assert appended.is_running(clock())


async def test_lease_operations_leave_the_version_alone(store: Store, clock: FakeClock) -> None:
    created = await store.create()
    clock.advance(1)
    await store(lambda r: r.acquire_lease(created.id, "run-1", TTL))
    await store(lambda r: r.renew_lease(created.id, "run-1", TTL))
    await store(lambda r: r.acquire_lease(created.id, "run-1", TTL))  # the holder again: extends
    await store(lambda r: r.release_lease(created.id, "run-1"))
    after = await store(lambda r: r.get(created.id))
    assert (after.version, after.updated_at, after.lease_run_id) == (1, created.updated_at, None)


async def test_leases_on_missing_conversations(store: Store) -> None:
    assert await store(lambda r: r.renew_lease("0" * 32, "run-1", TTL)) is False
    await store(lambda r: r.release_lease("0" * 32, "run-1"))
    with pytest.raises(ValueError):
        await store(lambda r: r.renew_lease("0" * 32, "run-1", 0))


async def test_the_runs_last_messages_release_its_lease_in_the_same_write(store: Store) -> None:
    record = await running(store)
    final = TextMessage("done", Role.ASSISTANT)
    stored = await store(
        lambda r: r.append_messages(record.id, [final], run_id="run-1", release_lease=True)
    )
    assert stored.lease_run_id is None and stored.message_count == 2
    assert stored.version == record.version + 1
    again = await store(lambda r: r.acquire_lease(record.id, "run-2", TTL))
    assert again.lease_run_id == "run-2"


async def test_runs_append_in_one_go_each_checked_on_its_own(
    store: Store, clock: FakeClock
) -> None:
    first, second, lost = [await running(store, f"run-{n}") for n in "123"]
    clock.advance(1)
    reply = TextMessage("a reply", Role.ASSISTANT)

    outcomes = await store(
        lambda r: r.append_for_runs(
            [
                RunAppend(first.id, "run-1", [reply]),
                RunAppend(second.id, "run-2", [reply], release_lease=True),
                RunAppend(lost.id, "run-9", [reply]),  # not the holder
                RunAppend(first.id, "run-1", [reply, reply], release_lease=True),
                RunAppend("0" * 32, "run-1", [reply]),
            ]
        )
    )

    one, two, refused, one_again, missing = outcomes
    assert isinstance(one, ConversationRecord) and isinstance(one_again, ConversationRecord)
    assert (one.version, one.message_count, one.lease_run_id) == (2, 2, "run-1")
    assert (one_again.version, one_again.message_count, one_again.lease_run_id) == (3, 4, None)
    assert isinstance(two, ConversationRecord) and two.lease_run_id is None
    assert isinstance(refused, LeaseLost) and isinstance(missing, ConversationNotFound)
    assert await store(lambda r: r.get(first.id)) == one_again
    assert await store(lambda r: r.get(second.id)) == two
    untouched = await store(lambda r: r.get(lost.id))
    assert (untouched.version, untouched.message_count, untouched.lease_run_id) == (1, 1, "run-3")
    stored = await store(lambda r: r.load_messages(first.id))
    assert list(stored)[1:] == [reply, reply, reply]


async def test_runs_append_client_tool_calls_once(store: Store) -> None:
    record = await running(store)
    call = ToolCallMessage("lookup", "call-1", {"q": "x"}, pending=True)

    first, again = await store(
        lambda r: r.append_for_runs(
            [RunAppend(record.id, "run-1", [call]), RunAppend(record.id, "run-1", [call])]
        )
    )

    assert isinstance(first, ConversationRecord) and first.pending_tool_call_ids == ("call-1",)
    assert isinstance(again, DuplicateToolCall)
    after = await store(lambda r: r.get(record.id))
    assert after.pending_tool_call_ids == ("call-1",) and after.message_count == 2
