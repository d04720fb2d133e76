"""Issue 14 in storage: every query scoped to the repository's owner, rewind, and pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.domain import MessageList, TextMessage, ToolCallMessage
from app.storage import (
    ConversationNotFound,
    ConversationRepository,
    LeaseHeld,
    ToolCallNotPending,
    ToolOutcome,
    VersionConflict,
)
from tests.storage.storage_support import Store
from tests.storage.test_repository import sample_messages

Operation = Callable[[ConversationRepository, str], Awaitable[Any]]

CHANGES: dict[str, Operation] = {
    "get": lambda r, c: r.get(c),
    "load_messages": lambda r, c: r.load_messages(c),
    "load_page": lambda r, c: r.load_page(c, 0, 5),
    "apply_delta": lambda r, c: r.apply_delta(c, messages=[TextMessage("x")]),
    "append_messages": lambda r, c: r.append_messages(c, [TextMessage("x")]),
    "clear": lambda r, c: r.clear(c),
    "rewind": lambda r, c: r.rewind(c, 1),
    "delete": lambda r, c: r.delete(c),
    "acquire_lease": lambda r, c: r.acquire_lease(c, "run-1", 60),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
async def test_another_owner_sees_nothing_and_changes_nothing(store: Store, name: str) -> None:
    created = await store.create(sample_messages(), owner="alice")
    with pytest.raises(ConversationNotFound):
        await store(lambda r: CHANGES[name](r, created.id), "mallory")
    assert await store(lambda r: r.get(created.id), "alice") == created
    assert await store(lambda r: r.load_messages(created.id)) == sample_messages()


async def test_another_owner_can_neither_renew_nor_release_a_lease(store: Store) -> None:
    created = await store.create(owner="alice")
    await store(lambda r: r.acquire_lease(created.id, "run-1", 60), "alice")
    assert not await store(lambda r: r.renew_lease(created.id, "run-1", 60), "mallory")
    await store(lambda r: r.release_lease(created.id, "run-1"), "mallory")
    assert (await store(lambda r: r.get(created.id))).lease_run_id == "run-1"
    assert await store(lambda r: r.renew_lease(created.id, "run-1", 60), "alice")


async def test_a_repository_without_an_owner_cannot_create_or_list(store: Store) -> None:
    with pytest.raises(ValueError, match="made for an owner"):
        await store(lambda r: r.list(5))
    with pytest.raises(ValueError, match="made for an owner"):
        await store(lambda r: r.create(MessageList(), {}, {}))


async def test_rewind_keeps_the_first_messages_and_drops_pending_calls_after(
    store: Store,
) -> None:
    created = await store.create(sample_messages())
    assert created.pending_tool_call_ids == ("call_3",)
    rewound = await store(lambda r: r.rewind(created.id, 3, expected_version=1))
    assert (rewound.message_count, rewound.version) == (3, 2)
    assert rewound.pending_tool_call_ids == ()
    assert list(await store(lambda r: r.load_messages(created.id))) == sample_messages()[:3]
    # the pending call's id is free again: the same call can be made anew
    again = ToolCallMessage("ask_user", "call_3", {}, pending=True)
    after = await store(lambda r: r.append_messages(created.id, [again]))
    assert after.pending_tool_call_ids == ("call_3",)
    with pytest.raises(ToolCallNotPending):
        await store(lambda r: r.apply_delta(created.id, tool_results=[ToolOutcome("call_1", 1)]))


async def test_rewind_to_every_length_and_refusals(store: Store) -> None:
    created = await store.create(sample_messages())
    same = await store(lambda r: r.rewind(created.id, len(sample_messages())))
    assert same.message_count == len(sample_messages())
    for bad in (-1, len(sample_messages()) + 1):
        with pytest.raises(ValueError, match="keep must be between 0 and 8"):
            await store(lambda r, b=bad: r.rewind(created.id, b))
    with pytest.raises(VersionConflict):
        await store(lambda r: r.rewind(created.id, 1, expected_version=1))
    await store(lambda r: r.acquire_lease(created.id, "run-1", 60))
    with pytest.raises(LeaseHeld):
        await store(lambda r: r.rewind(created.id, 1))
    await store(lambda r: r.release_lease(created.id, "run-1"))
    emptied = await store(lambda r: r.rewind(created.id, 0))
    assert emptied.message_count == 0
    assert list(await store(lambda r: r.load_messages(created.id))) == []


async def test_load_page_reads_a_slice_and_the_length(store: Store) -> None:
    created = await store.create(sample_messages())
    everything = list(sample_messages())
    for start, limit in [(0, 3), (3, 3), (6, 3), (8, 3), (20, 1), (0, 100)]:
        page, count = await store(lambda r, s=start, n=limit: r.load_page(created.id, s, n))
        assert (page, count) == (everything[start : start + limit], 8)
    with pytest.raises(ValueError):
        await store(lambda r: r.load_page(created.id, -1, 3))
    with pytest.raises(ValueError):
        await store(lambda r: r.load_page(created.id, 0, 0))
