"""Finding conversations: edits (title, metadata, archived), filters, full-text search with
ranking, snippets and paging, and queries that are not the index's syntax; on both databases."""

from __future__ import annotations

import asyncio

import pytest

from app.domain import MessageList, Role, TextMessage, ToolCallMessage
from app.storage import Filters, InvalidCursor, RunAppend, VersionConflict, merge_document
from tests.storage.storage_support import Store


def chat(*texts: str) -> MessageList:
    """User and assistant turns, alternating, starting with the user."""
    roles = (Role.USER, Role.ASSISTANT)
    return MessageList([TextMessage(t, role=roles[i % 2]) for i, t in enumerate(texts)])


async def create(store: Store, *texts: str, **kw: object):  # type: ignore[no-untyped-def]
    """A conversation one second after the one before (the listing's order is by creation)."""
    store.clock.advance(1)
    return await store.create(chat(*texts), **kw)


async def find(store: Store, owner: str = "alice", limit: int = 20, **kw: object):  # type: ignore[no-untyped-def]
    cursor = kw.pop("cursor", None)
    return await store(lambda r: r.find(limit, cursor, Filters(**kw)), owner)  # type: ignore[arg-type]


async def ids(store: Store, owner: str = "alice", **kw: object) -> list[str]:
    found, _ = await find(store, owner, **kw)
    return [f.record.id for f in found]


async def test_edit_sets_title_archived_and_merges_metadata(store: Store) -> None:
    created = await create(store, "hi", metadata={"a": 1, "b": {"x": 1, "y": 2}})
    edited = await store(
        lambda r: r.edit(
            created.id,
            title="Greetings",
            set_title=True,
            archived=True,
            update_metadata=lambda m: merge_document(m, {"a": None, "b": {"y": None}, "c": "z"}),
            expected_version=1,
        ),
        "alice",
    )
    assert (edited.title, edited.archived, edited.version) == ("Greetings", True, 2)
    assert edited.metadata == {"b": {"x": 1}, "c": "z"}
    assert await store(lambda r: r.get(created.id), "alice") == edited
    cleared = await store(lambda r: r.edit(created.id, title=None, set_title=True), "alice")
    assert (cleared.title, cleared.archived, cleared.version) == (None, True, 3)


async def test_edit_on_a_stale_version_changes_nothing(store: Store) -> None:
    created = await create(store, "hi")
    with pytest.raises(VersionConflict):
        await store(lambda r: r.edit(created.id, title="x", set_title=True, expected_version=7))
    assert await store(lambda r: r.get(created.id)) == created


async def test_an_edit_while_a_run_holds_the_lease_survives_the_runs_ending(store: Store) -> None:
    created = await create(store, "hello")
    await store(lambda r: r.acquire_lease(created.id, "run-1", 30))
    edited = await store(lambda r: r.edit(created.id, title="Mine", set_title=True), "alice")
    assert edited.version == 2 and edited.lease_run_id == "run-1"
    reply = [TextMessage("hello back", role=Role.ASSISTANT)]
    [ended] = await store(
        lambda r: r.append_for_runs([RunAppend(created.id, "run-1", reply, release_lease=True)])
    )
    assert not isinstance(ended, Exception)
    stored = await store(lambda r: r.get(created.id))
    assert (stored.title, stored.version, stored.message_count) == ("Mine", 3, 2)
    assert stored.lease_run_id is None


async def test_title_if_untitled_stores_once(store: Store) -> None:
    created = await create(store, "hi")
    assert await store(lambda r: r.title_if_untitled(created.id, "First"))
    assert not await store(lambda r: r.title_if_untitled(created.id, "Second"))
    stored = await store(lambda r: r.get(created.id))
    assert (stored.title, stored.version) == ("First", 1)


async def test_archived_and_metadata_filters(store: Store) -> None:
    kept = await create(store, "a", metadata={"team": "red", "n": 5})
    other = await create(store, "b", metadata={"team": "blue", "n": "5"})
    shelved = await create(store, "c", metadata={"team": "red"})
    await store(lambda r: r.edit(shelved.id, archived=True))
    await create(store, "d", owner="bob", metadata={"team": "red"})

    assert await ids(store) == [other.id, kept.id]
    assert await ids(store, archived=True) == [shelved.id]
    assert await ids(store, archived=None) == [shelved.id, other.id, kept.id]
    assert await ids(store, metadata={"team": "red"}) == [kept.id]
    assert await ids(store, archived=None, metadata={"team": "red"}) == [shelved.id, kept.id]
    # Exact string matches only: the number 5 is not the string "5".
    assert await ids(store, metadata={"n": "5"}) == [other.id]
    assert await ids(store, metadata={"team": "red", "n": "5"}) == []
    assert await ids(store, metadata={'it\'s "odd"': "x"}) == []


async def test_search_ranks_title_and_message_matches_with_snippets(store: Store) -> None:
    once = await store.create(chat("tell me about volcanoes", "Lava is hot rock"))
    twice = await store.create(
        chat("tell me about volcanoes", "volcanoes volcanoes everywhere, and lava too")
    )
    titled = await create(store, "unrelated words")
    await store(lambda r: r.edit(titled.id, title="Volcanoes of Iceland", set_title=True))
    await create(store, "nothing to see")
    await create(store, "volcanoes", owner="bob")

    found, cursor = await find(store, query="Volcanoes")
    assert [f.record.id for f in found] == [titled.id, twice.id, once.id]
    assert cursor is None
    snippets = {f.record.id: f.snippet for f in found}
    assert snippets[titled.id] == "Volcanoes of Iceland"
    assert "volcanoes" in (snippets[twice.id] or "")
    assert "volcanoes" in (snippets[once.id] or "")

    found, _ = await find(store, query="lava")
    assert {f.record.id for f in found} == {once.id, twice.id}
    assert "Lava is hot rock" in (next(f for f in found if f.record.id == once.id).snippet or "")
    assert await ids(store, query="lava rock") == [once.id]  # every word
    assert await ids(store, query="lava magma") == []


async def test_search_follows_every_write_path(store: Store) -> None:
    created = await create(store, "first words")
    await store(lambda r: r.apply_delta(created.id, messages=chat("zebra crossing")))
    assert await ids(store, query="zebra") == [created.id]
    await store(lambda r: r.acquire_lease(created.id, "run-1", 30))
    reply = [TextMessage("giraffe answer", role=Role.ASSISTANT)]
    await store(lambda r: r.append_for_runs([RunAppend(created.id, "run-1", reply, True)]))
    assert await ids(store, query="giraffe") == [created.id]
    await store(lambda r: r.rewind(created.id, 2))
    assert await ids(store, query="giraffe") == []
    assert await ids(store, query="zebra") == [created.id]
    await store(lambda r: r.clear(created.id))
    assert await ids(store, query="zebra") == []
    await store(lambda r: r.edit(created.id, title="okapi", set_title=True))
    assert await ids(store, query="okapi") == [created.id]
    await store(lambda r: r.edit(created.id, title=None, set_title=True))
    assert await ids(store, query="okapi") == []
    await store(lambda r: r.edit(created.id, title="okapi", set_title=True))
    await store(lambda r: r.delete(created.id))
    assert await ids(store, query="okapi") == []


async def test_only_text_messages_are_searched(store: Store) -> None:
    messages = chat("hello")
    messages.append(ToolCallMessage("weather", "call_1", {"city": "Reykjavik"}, result="rain"))
    await store.create(messages)
    assert await ids(store, query="reykjavik") == []


async def test_search_pages_are_complete_and_do_not_repeat(store: Store) -> None:
    made = [await store.create(chat("marmot " * (1 + i % 4) + f"number {i}")) for i in range(11)]
    seen: list[str] = []
    cursor = None
    while True:
        found, cursor = await find(store, limit=3, query="marmot", cursor=cursor)
        seen.extend(f.record.id for f in found)
        if cursor is None:
            break
    assert sorted(seen) == sorted(c.id for c in made)
    assert len(seen) == len(set(seen))
    whole, _ = await find(store, limit=50, query="marmot")
    assert seen == [f.record.id for f in whole]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "'; DROP TABLE messages; --",
        "a OR b NOT c AND",
        "NEAR(x y)",
        "col:value ^start *",
        "(((",
        "x\x00y",
        "!&|<->:*",
        "é" * 5000,
        "\u202e\ufeff",
    ],
)
async def test_hostile_queries_are_words_or_nothing(store: Store, query: str) -> None:
    created = await create(store, "x y value start c b a")
    found, _ = await find(store, query=query)
    assert [f.record.id for f in found] in ([], [created.id])


async def test_a_cursor_that_is_not_a_search_cursor_is_refused(store: Store) -> None:
    await create(store, "word")
    _, newest_cursor = await find(store, limit=1)
    for cursor in ("nope", newest_cursor or "x"):
        with pytest.raises(InvalidCursor):
            await find(store, query="word", cursor=cursor)


async def test_titling_at_once_from_several_sessions_stores_exactly_one(store: Store) -> None:
    created = await create(store, "hi")
    attempts = [f"title {i}" for i in range(4)]
    stored = await asyncio.gather(
        *(store(lambda r, t=t: r.title_if_untitled(created.id, t)) for t in attempts)
    )
    assert sum(stored) == 1
    winner = attempts[stored.index(True)]
    assert (await store(lambda r: r.get(created.id))).title == winner
