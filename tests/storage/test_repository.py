"""ConversationRepository: round trips, listing, deltas, tool calls, clear, delete, bad rows."""

from __future__ import annotations

import json

import pytest

from app.domain import AgentMessage, MessageList, Role, TextMessage, ToolCallMessage
from app.storage import (
    ConversationNotFound,
    DuplicateToolCall,
    InvalidCursor,
    StoredDataError,
    ToolCallNotPending,
    ToolOutcome,
    VersionConflict,
)
from tests.storage.storage_support import AWKWARD_JSON, FakeClock, Store, as_sent


def sample_messages() -> MessageList:
    """Every message type, with the optional fields set and unset."""
    return MessageList(
        [
            AgentMessage("You answer in one sentence."),
            TextMessage("Why is the sky blue? ☀️ «ça»", role=Role.USER),
            TextMessage("Rayleigh scattering", role=Role.ASSISTANT),
            ToolCallMessage(
                "weather", "call_1", {"city": "Oslo", "days": [1, 2]}, result={"temp_c": 21.5}
            ),
            ToolCallMessage("search", "call_2", {"q": "x"}, error="timed out", message="Let me"),
            TextMessage("The sky is bl", role=Role.ASSISTANT, incomplete=True),
            TextMessage("system note", role=Role.SYSTEM),
            ToolCallMessage("ask_user", "call_3", {"question": "sure?"}, pending=True),
        ]
    )


async def test_round_trip_gives_exactly_the_serialized_document(store: Store) -> None:
    original = sample_messages()
    record = await store.create(original, config={"model": "m"}, metadata={"tag": ["a"]})

    loaded = await store(lambda r: r.load_messages(record.id))

    assert loaded.to_dict() == original.to_dict()
    assert loaded == original
    rows = await store.sql(
        "SELECT idx, data FROM messages WHERE conversation_id = :c ORDER BY idx", c=record.id
    )
    assert [json.loads(data) for _, data in rows] == original.to_dict()["messages"]
    assert record.version == 1
    assert record.message_count == len(original)
    assert record.pending_tool_call_ids == ("call_3",)
    assert (record.config, record.metadata) == ({"model": "m"}, {"tag": ["a"]})


async def test_get_returns_what_create_returned(store: Store) -> None:
    created = await store.create(sample_messages(), owner="bob", config={"temperature": 0.5})

    fetched = await store(lambda r: r.get(created.id), owner="bob")

    assert fetched == created
    assert fetched.created_at.tzinfo is not None
    assert not fetched.is_running()


async def test_config_metadata_and_messages_read_back_exactly_as_written(store: Store) -> None:
    reordered = dict(reversed(AWKWARD_JSON.items()))
    call = ToolCallMessage("lookup", "call_1", AWKWARD_JSON, result=reordered)
    created = await store.create(
        MessageList([TextMessage("hi", role=Role.USER), call]),
        config=AWKWARD_JSON,
        metadata=AWKWARD_JSON,
    )

    fetched = await store(lambda r: r.get(created.id))
    (listed,), _ = await store(lambda r: r.list(limit=5), "alice")
    changed = await store(lambda r: r.apply_delta(created.id, config=reordered))
    refetched = await store(lambda r: r.get(created.id))
    loaded = await store(lambda r: r.load_messages(created.id))

    for record in (fetched, listed):
        assert as_sent(record.config) == as_sent(record.metadata) == as_sent(AWKWARD_JSON)
    for record in (changed, refetched):
        assert as_sent(record.config) == as_sent(reordered)
        assert as_sent(record.metadata) == as_sent(AWKWARD_JSON)
    stored_call = loaded[1]
    assert isinstance(stored_call, ToolCallMessage)
    assert as_sent(stored_call.arguments) == as_sent(AWKWARD_JSON)
    assert as_sent(stored_call.result) == as_sent(reordered)


async def test_get_hides_unknown_malformed_and_foreign_conversations(store: Store) -> None:
    record = await store.create(owner="alice")
    dashed = (
        f"{record.id[:8]}-{record.id[8:12]}-{record.id[12:16]}-{record.id[16:20]}-{record.id[20:]}"
    )

    assert (await store(lambda r: r.get(dashed))).id == record.id
    for conversation_id, owner in [
        (record.id, "mallory"),
        ("0" * 32, None),
        ("not-a-uuid", None),
        ("", None),
    ]:
        with pytest.raises(ConversationNotFound):
            await store(lambda r, c=conversation_id: r.get(c), owner=owner)
    with pytest.raises(ConversationNotFound):
        await store(lambda r: r.load_messages("f" * 32))


async def test_list_pages_newest_first(store: Store, clock: FakeClock) -> None:
    ids = []
    for i in range(7):
        ids.append((await store.create(owner="alice")).id)
        if i != 3:  # two conversations share a created_at: the id breaks the tie
            clock.advance(1)
    await store.create(owner="bob")
    expected = sorted(
        [(r.created_at, r.id) for r in [await store(lambda r, i=i: r.get(i)) for i in ids]],
        reverse=True,
    )

    seen, cursor, pages = [], None, 0
    while True:
        page, cursor = await store(lambda r, c=cursor: r.list(limit=3, cursor=c), "alice")
        seen.extend(page)
        pages += 1
        if cursor is None:
            break

    assert [(r.created_at, r.id) for r in seen] == expected
    assert pages == 3 and all(r.owner == "alice" for r in seen)
    assert await store(lambda r: r.list(limit=5), "nobody") == ([], None)


async def test_list_refuses_cursors_it_did_not_issue(store: Store) -> None:
    await store.create()
    await store.create()
    _, cursor = await store(lambda r: r.list(limit=1), "alice")
    assert cursor is not None
    for bad in ["garbage", cursor[:-3], "W10", "WyJ4IiwieSJd", cursor + "!!"]:
        with pytest.raises(InvalidCursor):
            await store(lambda r, b=bad: r.list(limit=1, cursor=b), "alice")


async def test_apply_delta_appends_completes_and_sets_config(
    store: Store, clock: FakeClock
) -> None:
    created = await store.create(sample_messages(), config={"model": "a"})
    clock.advance(5)

    record = await store(
        lambda r: r.apply_delta(
            created.id,
            messages=[TextMessage("and at sunset?")],
            tool_results=[ToolOutcome("call_3", result={"answer": "yes"})],
            config={"model": "b"},
            expected_version=1,
        )
    )

    assert record.version == 2 and record.updated_at == clock()
    assert record.created_at == created.created_at
    assert record.config == {"model": "b"}
    assert record.pending_tool_call_ids == ()
    loaded = await store(lambda r: r.load_messages(created.id))
    assert len(loaded) == record.message_count == len(sample_messages()) + 1
    completed = loaded[7]
    assert isinstance(completed, ToolCallMessage)
    assert (completed.pending, completed.result) == (False, {"answer": "yes"})
    assert loaded[8] == TextMessage("and at sunset?")


async def test_an_empty_delta_changes_nothing(store: Store) -> None:
    created = await store.create(sample_messages())
    assert await store(lambda r: r.apply_delta(created.id)) == created
    assert await store(lambda r: r.append_messages(created.id, [])) == created


async def test_a_stale_version_is_refused_and_changes_nothing(store: Store) -> None:
    created = await store.create(sample_messages(), config={"model": "a"})
    await store(lambda r: r.append_messages(created.id, [TextMessage("1")], expected_version=1))
    before = await store(lambda r: r.get(created.id))
    messages_before = await store(lambda r: r.load_messages(created.id))

    for operation in [
        lambda r: r.append_messages(created.id, [TextMessage("2")], expected_version=1),
        lambda r: r.apply_delta(
            created.id,
            messages=[TextMessage("2")],
            tool_results=[ToolOutcome("call_3", result=1)],
            config={"model": "b"},
            expected_version=1,
        ),
        lambda r: r.clear(created.id, expected_version=1),
        lambda r: r.delete(created.id, expected_version=1),
    ]:
        with pytest.raises(VersionConflict) as caught:
            await store(operation)
        assert (caught.value.current_version, caught.value.expected_version) == (2, 1)

    assert await store(lambda r: r.get(created.id)) == before
    assert await store(lambda r: r.load_messages(created.id)) == messages_before


async def test_completing_a_tool_call_twice_is_refused(store: Store) -> None:
    created = await store.create(sample_messages())
    done = await store(
        lambda r: r.apply_delta(created.id, tool_results=[ToolOutcome("call_3", error="no")])
    )
    assert done.pending_tool_call_ids == ()

    for call_id in ["call_3", "call_1", "unknown"]:
        with pytest.raises(ToolCallNotPending) as caught:
            await store(
                lambda r, c=call_id: r.apply_delta(
                    created.id, messages=[TextMessage("x")], tool_results=[ToolOutcome(c)]
                )
            )
        assert caught.value.tool_call_id == call_id
    assert (await store(lambda r: r.get(created.id))).version == done.version


async def test_one_delta_cannot_complete_the_same_call_twice(store: Store) -> None:
    created = await store.create(sample_messages())
    outcomes = [ToolOutcome("call_3", result=1), ToolOutcome("call_3", result=2)]
    with pytest.raises(ToolCallNotPending):
        await store(lambda r: r.apply_delta(created.id, tool_results=outcomes))
    assert (await store(lambda r: r.get(created.id))).pending_tool_call_ids == ("call_3",)


async def test_a_second_pending_call_with_the_same_id_is_refused(store: Store) -> None:
    created = await store.create(sample_messages())
    again = ToolCallMessage("ask_user", "call_3", pending=True)
    with pytest.raises(DuplicateToolCall):
        await store(lambda r: r.append_messages(created.id, [again]))
    with pytest.raises(DuplicateToolCall):
        await store.create(MessageList([again, again]))
    # Completing the old call in the same delta frees its id.
    record = await store(
        lambda r: r.apply_delta(
            created.id, messages=[again], tool_results=[ToolOutcome("call_3", result=0)]
        )
    )
    assert record.pending_tool_call_ids == ("call_3",)
    assert record.message_count == len(sample_messages()) + 1


async def test_clear_keeps_the_system_prompts(store: Store) -> None:
    messages = sample_messages()
    messages.insert(3, AgentMessage("Second prompt."))
    created = await store.create(messages)

    record = await store(lambda r: r.clear(created.id, expected_version=1))

    assert (record.version, record.message_count, record.pending_tool_call_ids) == (2, 2, ())
    assert list(await store(lambda r: r.load_messages(created.id))) == [
        AgentMessage("You answer in one sentence."),
        AgentMessage("Second prompt."),
    ]
    record = await store(lambda r: r.append_messages(created.id, [TextMessage("again")]))
    assert record.message_count == 3
    assert (await store(lambda r: r.load_messages(created.id)))[2] == TextMessage("again")


async def test_clear_without_a_system_prompt_empties_the_list(store: Store) -> None:
    created = await store.create(MessageList([TextMessage("a"), TextMessage("b")]))
    empty = await store.create()
    assert (await store(lambda r: r.clear(created.id))).message_count == 0
    assert (await store(lambda r: r.clear(empty.id))).version == 2
    assert len(await store(lambda r: r.load_messages(created.id))) == 0


async def test_delete_removes_the_conversation_and_its_messages(store: Store) -> None:
    doomed = await store.create(sample_messages())
    kept = await store.create(sample_messages())

    await store(lambda r: r.delete(doomed.id))

    with pytest.raises(ConversationNotFound):
        await store(lambda r: r.get(doomed.id))
    with pytest.raises(ConversationNotFound):
        await store(lambda r: r.delete(doomed.id))
    counts = await store.sql(
        "SELECT conversation_id, COUNT(*) FROM messages GROUP BY conversation_id"
    )
    assert [tuple(row) for row in counts] == [(kept.id, len(sample_messages()))]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"type": "Poem", "text": "x"}', "messages[2].type"),
        ('{"type": "TextMessage", "role": "user"}', "messages[2].text: is missing"),
        ("[1, 2]", "must be an object"),
    ],
)
async def test_a_corrupted_row_names_conversation_and_index(
    store: Store, data: str, problem: str
) -> None:
    broken = await store.create(sample_messages())
    healthy = await store.create(sample_messages())
    await store.sql(
        "UPDATE messages SET data = :d WHERE conversation_id = :c AND idx = 2", d=data, c=broken.id
    )

    with pytest.raises(StoredDataError) as caught:
        await store(lambda r: r.load_messages(broken.id))

    assert (caught.value.conversation_id, caught.value.index) == (broken.id, 2)
    assert broken.id in str(caught.value) and "message 2" in str(caught.value)
    assert problem in str(caught.value)
    assert await store(lambda r: r.load_messages(healthy.id)) == sample_messages()


async def test_a_missing_row_is_reported_not_skipped(store: Store) -> None:
    broken = await store.create(sample_messages())
    await store.sql("DELETE FROM messages WHERE conversation_id = :c AND idx = 4", c=broken.id)
    with pytest.raises(StoredDataError) as caught:
        await store(lambda r: r.load_messages(broken.id))
    assert caught.value.index == 4
    await store.sql("DELETE FROM messages WHERE conversation_id = :c AND idx > 3", c=broken.id)
    with pytest.raises(StoredDataError) as caught:
        await store(lambda r: r.load_messages(broken.id))
    assert caught.value.index == 4
