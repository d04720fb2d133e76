"""The runs layer with a scripted adapter, on both databases: a run's row and log, followers on
another process, cancel, shutdown, failures, tools, a lost lease, abandoned runs, pruning."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text, update

from app.api.sse import frame
from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ModelResponse,
    ProviderError,
    RequestOptions,
    StreamChunk,
    TextMessage,
    ToolSpec,
    Usage,
    collect_response,
)
from app.runs.config import ConfigContext
from app.runs.delta import Delta
from app.runs.errors import BadEventId, EventsExpired, ShuttingDown
from app.runs.events import EventName, RunEvent, chunk_event
from app.runs.follow import RunReader
from app.runs.log_codec import merged_rows
from app.runs.runner import RunService
from app.runs.server_tools import builtin_tools
from app.runs.services import Services
from app.settings import Settings
from app.storage import (
    ConversationNotFound,
    Database,
    LeaseHeld,
    RunNotFound,
    RunRepository,
    VersionConflict,
    utcnow,
)
from app.storage.tables import CONVERSATIONS
from tests.api.conftest import wait_for
from tests.domain.domain_support import (
    HANG,
    ScriptedAdapter,
    selector,
    text_reply,
    tool_reply,
)
from tests.runs.conftest import (
    OWNER,
    MakeServices,
    all_events,
    conversations,
    new_conversation,
    start_run,
    stored_events,
)


class PacedAdapter:
    """Answers ``words`` words, one delta every ``delay`` seconds."""

    name = "scripted"
    default_model = "paced-1"

    def __init__(self, words: int = 40, delay: float = 0.01) -> None:
        self.words, self.delay = words, delay

    async def send_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> ModelResponse:
        return await collect_response(self.stream_message(messages, tools, options))

    async def stream_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> AsyncIterator[StreamChunk]:
        yield ContentBlockStart(0)
        for i in range(self.words):
            await asyncio.sleep(self.delay)
            yield ContentBlockDelta(f"w{i} ")
        yield ContentBlockStop(0)
        yield MessageStop()


def names(events: list[RunEvent]) -> list[str]:
    return [e.name for e in events]


def body(event: RunEvent) -> Any:
    import json

    return json.loads(event.data)


def deltas(events: list[RunEvent]) -> str:
    return "".join(body(e)["delta"] for e in events if e.name == "content_block_delta")


async def test_a_run_is_a_row_and_its_log_replays_exactly(make_services: MakeServices) -> None:
    services = await make_services(ScriptedAdapter([text_reply("Hel", "lo", " world")]))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    live = await all_events(run)
    assert names(live) == [
        "run_started",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_stop",
        "message",
        "done",
    ]
    assert [e.seq for e in live] == list(range(1, 10))
    assert body(live[-1]) == {"status": "completed", "message_count": 3, "version": 2}
    assert body(live[-2])["message"] == {
        "type": "TextMessage",
        "text": "Hello world",
        "role": "assistant",
    }
    other = await make_services(ScriptedAdapter([]))  # another process reads the log
    replayed = await stored_events(other, conv_id, run.run_id)
    assert [(e.seq, e.name, e.data) for e in replayed] == [(e.seq, e.name, e.data) for e in live]
    async with other.reader(None) as reader:
        runs = RunRepository(reader.session)
        record = await runs.get(run.run_id)
        rows = await runs.events_after(run.run_id, 0)
    assert record.status == "completed" and record.finished_at is not None
    assert record.usage == {
        "input_tokens": 10,
        "output_tokens": 3,
        "reasoning_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert len(rows) < len(live)  # the three deltas share a row
    assert services.writer.transactions <= 3


async def test_a_reader_on_another_process_follows_a_live_run(
    make_services: MakeServices,
) -> None:
    owner = await make_services(PacedAdapter(30, 0.01), follow_poll_seconds=0.05)
    other = await make_services(ScriptedAdapter([]), follow_poll_seconds=0.05)
    conv_id = await new_conversation(owner, "hi")
    run = await start_run(owner, conv_id, on_disconnect="continue")
    await asyncio.sleep(0.05)
    followed, live = await asyncio.gather(
        stored_events(other, conv_id, run.run_id), all_events(run)
    )
    assert [(e.seq, e.name, e.data) for e in followed] == [(e.seq, e.name, e.data) for e in live]
    assert deltas(followed) == " ".join(f"w{i}" for i in range(30)) + " "


async def test_a_reader_on_another_process_leaves_nothing_behind_once_done(
    make_services: MakeServices,
) -> None:
    """Without NOTIFY (SQLite), nothing wakes the wait of a reader of another process's run:
    the wait itself forgets the run, or each run ever followed would stay in memory."""
    owner = await make_services(PacedAdapter(10, 0.01), follow_poll_seconds=0.02)
    other = await make_services(ScriptedAdapter([]), follow_poll_seconds=0.02)
    conv_id = await new_conversation(owner, "hi")
    run = await start_run(owner, conv_id, on_disconnect="continue")
    followers = [stored_events(other, conv_id, run.run_id) for _ in range(3)]
    for followed in await asyncio.gather(*followers):
        assert names(followed)[-1] == "done"
    assert other.manager._remote == {} and other.manager._remote_waiters == {}


async def test_cancel_from_another_process_stops_the_run_and_stores_its_words(
    make_services: MakeServices,
) -> None:
    # 30 s of words: a cancel that works ends it long before, however loaded the machine
    owner = await make_services(PacedAdapter(3000, 0.01))
    other = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(owner, "hi")
    run = await start_run(owner, conv_id)
    async for batch in run.follow(0):  # some words first
        if any(e.name == "content_block_delta" for e in batch):
            break
    assert await conversations(other).cancel(conv_id) == run.run_id
    events = await asyncio.wait_for(all_events(run), 20)
    assert body(events[-1])["status"] == "aborted"
    [message] = [body(e) for e in events if e.name == "message"]
    assert message["message"]["incomplete"] is True
    assert message["message"]["text"] == deltas(events)
    stored = await conversations(other).messages(conv_id)
    assert stored[-1].to_serializable_dict() == message["message"]
    record = await RunReader(other, OWNER).get(conv_id, run.run_id)
    assert record.status == "aborted" and record.cancel_requested


async def test_a_client_that_goes_away_cancels_only_a_run_it_did_not_ask_to_continue(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(20, 0.01))
    first = await start_run(services, await new_conversation(services, "a"))
    kept = await start_run(
        services, await new_conversation(services, "b"), on_disconnect="continue"
    )
    services.manager.detached(first)
    services.manager.detached(kept)
    assert body((await all_events(first))[-1])["status"] == "aborted"
    assert body((await all_events(kept))[-1])["status"] == "completed"


async def test_shutdown_interrupts_runs_and_refuses_new_ones(make_services: MakeServices) -> None:
    services = await make_services(PacedAdapter(200, 0.01))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    await asyncio.sleep(0.05)
    await services.drain()
    events = await all_events(run)
    assert names(events)[-3:] == ["message", "error", "done"]
    assert body(events[-2])["code"] == "shutting_down"
    assert body(events[-1])["status"] == "interrupted"
    with pytest.raises(ShuttingDown):
        await start_run(services, await new_conversation(services, "again"))


async def test_a_provider_error_fails_the_run_and_keeps_the_text(
    make_services: MakeServices,
) -> None:
    error = ProviderError("rate_limited", "slow down", retryable=True, retry_after=3)
    adapter = ScriptedAdapter([[ContentBlockStart(0), ContentBlockDelta("so far"), error]])
    services = await make_services(adapter)
    conv_id = await new_conversation(services, "hi")
    events = await all_events(await start_run(services, conv_id))
    assert names(events)[-3:] == ["message", "error", "done"]
    assert body(events[-2]) == {
        "code": "rate_limited",
        "detail": "slow down",
        "retryable": True,
        "retry_after": 3,
    }
    assert body(events[-3])["message"]["text"] == "so far"
    assert body(events[-1])["status"] == "failed"
    [record], _ = await RunReader(services, OWNER).list(conv_id, 10, None)
    assert record.status == "failed" and record.error_code == "rate_limited"


async def test_server_tools_store_each_call_before_announcing_it(
    make_services: MakeServices,
) -> None:
    adapter = ScriptedAdapter(
        [tool_reply("adding", ("add_numbers", {"numbers": [1, 2]}, "c1")), text_reply("3")]
    )
    services = await make_services(adapter)
    conv_id = await new_conversation(services, "add", tools=["add_numbers"])
    events = await all_events(await start_run(services, conv_id))
    messages = [body(e) for e in events if e.name == "message"]
    assert [m["index"] for m in messages] == [2, 3]
    assert messages[0]["message"]["result"] == 3
    assert messages[1]["version"] > messages[0]["version"]
    assert body(events[-1]) == {"status": "completed", "message_count": 4, "version": 3}


async def test_a_client_tool_ends_the_run_with_requires_action(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([tool_reply("", ("lookup", {}, "call_1"))]))
    tool = {"name": "lookup", "description": "", "parameters": {"type": "object"}}
    conv_id = await new_conversation(services, "look", client_tools=[tool])
    events = await all_events(await start_run(services, conv_id))
    assert names(events)[-3:] == ["message", "requires_action", "done"]
    assert body(events[-2])["tool_calls"][0]["tool_call_id"] == "call_1"
    assert body(events[-1])["status"] == "requires_action"


async def test_a_run_that_loses_its_lease_stops_without_writing(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(500, 0.01), run_lease_seconds=0.3)
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    await asyncio.sleep(0.15)  # a flush of its first words
    async with services.repository(None) as repo:
        await repo.session.execute(
            update(CONVERSATIONS)
            .where(CONVERSATIONS.c.id == conv_id)
            .values(lease_run_id="someone-else")
        )
        before = await RunRepository(repo.session).events_after(run.run_id, 0)
    events = await asyncio.wait_for(all_events(run), 3)
    # the readers are told (a notice, no position: resume elsewhere), and get no `done` the
    # log does not hold
    assert names(events)[-1] == "error" and events[-1].seq == 0 and "done" not in names(events)
    assert body(events[-1])["code"] == "lease_lost"
    await asyncio.wait_for(run.task, 3)  # type: ignore[arg-type]
    assert run.stop_reason == "lease_lost"
    assert len(await conversations(services).messages(conv_id)) == 2
    await asyncio.sleep(0.2)  # past a flush
    async with services.reader(None) as reader:
        after = await RunRepository(reader.session).events_after(run.run_id, 0)
    assert after == before  # the taken run's log got nothing more


async def test_a_run_whose_conversation_was_deleted_meanwhile_stops_as_lease_lost(
    make_services: MakeServices, caplog: pytest.LogCaptureFixture
) -> None:
    """A process that stood still past its lease finds its run ended by another and the
    conversation deleted since: the run stops as ``lease_lost`` / ``aborted`` (it lost the
    conversation), not as an internal failure logged as an error."""
    services = await make_services(PacedAdapter(500, 0.01), run_lease_seconds=0.3)
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    await asyncio.sleep(0.15)  # a flush of its first words
    async with services.repository(None) as repo:
        await repo.session.execute(CONVERSATIONS.delete().where(CONVERSATIONS.c.id == conv_id))
    events = await asyncio.wait_for(all_events(run), 3)
    # the readers are told (a notice, no position: resume elsewhere), and get no `done` the
    # log does not hold
    assert names(events)[-1] == "error" and events[-1].seq == 0 and "done" not in names(events)
    assert body(events[-1])["code"] == "lease_lost"
    await asyncio.wait_for(run.task, 3)  # type: ignore[arg-type]
    assert run.stop_reason == "lease_lost"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def dead_run(
    services: Services, conv_id: str, run_id: str, *deltas: str, lease: float = 0.05
) -> None:
    """A run whose process died after streaming ``deltas``: its lease (0.05 s) left to expire,
    its row ``running``, its log the block's start and the deltas."""
    async with services.repository(None) as repo:
        await repo.acquire_lease(conv_id, run_id, lease)
        runs = RunRepository(repo.session)
        await runs.create(run_id, conv_id, OWNER, "cancel")
        chunks = [ContentBlockStart(0), *(ContentBlockDelta(d) for d in deltas)]
        events = [chunk_event(i, c) for i, c in enumerate(chunks)]
        await runs.add_events(merged_rows(run_id, events))


async def test_an_abandoned_run_is_ended_by_the_next_writer_with_its_streamed_text(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(services, "hi")
    run_id = "0" * 31 + "1"
    # a run whose process died after two deltas
    await dead_run(services, conv_id, run_id, "half ", "done")
    await asyncio.sleep(0.1)
    reader = RunReader(services, OWNER)
    resume = await reader.resume(conv_id, f"{run_id}:3")
    assert resume is not None
    rest = [e async for batch in reader.follow(resume) for e in batch]  # ends the run
    assert names(rest) == ["message", "error", "done"]
    assert body(rest[0])["message"] == {
        "type": "TextMessage",
        "text": "half done",
        "role": "assistant",
        "incomplete": True,
    }
    assert body(rest[1])["code"] == "process_lost"
    assert body(rest[2])["status"] == "interrupted"
    record = await reader.get(conv_id, run_id)
    assert record.status == "interrupted" and record.error_code == "process_lost"
    view = await conversations(services).get(conv_id)
    assert view.status == "idle" and view.record.message_count == 3


async def test_a_stale_if_match_past_an_abandoned_run_still_stores_its_ending(
    make_services: MakeServices,
) -> None:
    """A write with the ETag a reader saw (the conversation idle, its lease expired) ends the
    dead run first, one version up, and is then refused with 412. The ending must stay: rolled
    back with the write, readers kept seeing the old version, the 412 named one that did not
    exist, and a retry with the ETag read again met the same 412 until the writer's sweep."""
    services = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(services, "hi")
    seen = (await conversations(services).get(conv_id)).record.version
    run_id = "0" * 31 + "2"
    await dead_run(services, conv_id, run_id, "half")  # its process died after a delta
    await asyncio.sleep(0.1)
    view = await conversations(services).get(conv_id)
    assert view.status == "idle" and view.record.version == seen
    delta = Delta(messages=[TextMessage("next")])
    with pytest.raises(VersionConflict) as refused:
        await conversations(services).apply_delta(conv_id, delta, seen)
    after = await conversations(services).get(conv_id)
    assert refused.value.current_version == after.record.version == seen + 1
    assert after.record.message_count == view.record.message_count + 1  # "half", incomplete
    record = await RunReader(services, OWNER).get(conv_id, run_id)
    assert record.status == "interrupted"
    done = await conversations(services).apply_delta(conv_id, delta, after.record.version)
    assert done.record.message_count == after.record.message_count + 1


async def test_resume_refuses_what_is_not_ours_and_ends_quietly_after_done(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([text_reply("a"), text_reply("b")]))
    conv_id = await new_conversation(services, "hi")
    other_conv = await new_conversation(services, "there")
    run = await start_run(services, conv_id)
    events = await all_events(run)
    reader = RunReader(services, OWNER)
    with pytest.raises(BadEventId):
        await reader.resume(conv_id, "nine")
    with pytest.raises(RunNotFound):
        await reader.resume(other_conv, f"{run.run_id}:1")
    with pytest.raises(ConversationNotFound):
        await RunReader(services, "someone else").resume(conv_id, f"{run.run_id}:1")
    assert await reader.resume(conv_id, f"{run.run_id}:{events[-1].seq}") is None
    resume = await reader.resume(conv_id, f"{run.run_id}:{events[-3].seq}")
    assert resume is not None
    rest = [e async for batch in reader.follow(resume) for e in batch]
    assert names(rest) == ["message", "done"]


async def test_events_of_finished_runs_are_pruned_after_the_retention(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([text_reply("a")]))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    await all_events(run)
    async with services.repository(None) as repo:
        pruned = await RunRepository(repo.session).prune_events(utcnow() + timedelta(seconds=1))
    assert pruned >= 1
    with pytest.raises(EventsExpired):
        await RunReader(services, OWNER).resume(conv_id, f"{run.run_id}:1")
    assert len(await conversations(services).messages(conv_id)) == 3  # the messages stay


async def test_the_writer_prunes_on_its_own(make_services: MakeServices) -> None:
    services = await make_services(
        ScriptedAdapter([text_reply("a")]),
        run_event_retention_seconds=0.01,
        prune_interval_seconds=0.05,
    )
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    await all_events(run)
    await asyncio.sleep(0.3)
    async with services.reader(None) as reader:
        assert not await RunRepository(reader.session).has_events(run.run_id)


async def test_a_run_with_nothing_to_answer_leaves_no_row(make_services: MakeServices) -> None:
    services = await make_services(ScriptedAdapter([HANG]))
    conv_id = await new_conversation(services)
    from app.runs.errors import NothingToAnswer

    with pytest.raises(NothingToAnswer):
        await RunService(services, OWNER).start(conv_id)
    assert (await RunReader(services, OWNER).list(conv_id, 5, None))[0] == []
    assert (await conversations(services).get(conv_id)).status == "idle"


async def test_one_run_that_cannot_be_stored_costs_the_others_nothing(
    make_services: MakeServices,
) -> None:
    hang = [ContentBlockStart(0), HANG]
    services = await make_services(ScriptedAdapter([list(hang), list(hang)]))
    bad = await start_run(services, await new_conversation(services, "a"))
    good = await start_run(services, await new_conversation(services, "b"))
    await asyncio.sleep(0.3)
    delta = EventName.CONTENT_BLOCK_DELTA
    services.writer.add(bad, RunEvent(1, delta, "{}"))  # seq 1 is stored
    services.writer.add(good, RunEvent(good.seq + 50, delta, '{"delta":"x"}'))
    await asyncio.sleep(0.3)
    async with services.reader(None) as reader:
        runs = RunRepository(reader.session)
        assert [r.seq for r in await runs.events_after(good.run_id, good.seq)] == [good.seq + 50]
        assert (await runs.events_after(bad.run_id, 0))[0].name == "run_started"


class SlowCloseAdapter(PacedAdapter):
    """Like PacedAdapter, but closing its stream takes a while (as closing an HTTP response
    does): a stop can land between the model's last word and the stored reply."""

    async def stream_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().stream_message(messages, tools, options):
                yield chunk
        finally:
            await asyncio.sleep(0.3)


async def test_a_cancel_after_the_models_last_word_finds_the_run_completed(
    make_services: MakeServices,
) -> None:
    services = await make_services(SlowCloseAdapter(3, 0.001))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    async for batch in run.follow(0):
        if any(e.name == "message_stop" for e in batch):
            break
    await conversations(services).cancel(conv_id)
    events = await all_events(run)
    assert body(events[-1])["status"] == "completed"
    [message] = [body(e)["message"] for e in events if e.name == "message"]
    assert message == {"type": "TextMessage", "text": "w0 w1 w2 ", "role": "assistant"}


async def test_a_run_stopped_before_its_task_began_still_ends(make_services: MakeServices) -> None:
    services = await make_services(PacedAdapter(50, 0.01))
    run = await start_run(services, await new_conversation(services, "hi"))
    services.manager.detached(run)  # the client left at once
    events = await asyncio.wait_for(all_events(run), 2)
    assert body(events[-1])["status"] == "aborted"
    assert (await conversations(services).get(run.conversation_id)).status == "idle"


async def test_a_run_that_starts_while_draining_is_interrupted(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(200, 0.01))
    conv_id = await new_conversation(services, "hi")
    starting = asyncio.create_task(start_run(services, conv_id))
    await asyncio.sleep(0)  # it is past the shutdown check, waiting for the database
    await services.drain()
    run = await starting
    events = await asyncio.wait_for(all_events(run), 2)
    assert body(events[-1])["status"] == "interrupted"


async def test_lone_surrogates_from_a_model_are_replaced_not_fatal(
    make_services: MakeServices,
) -> None:
    from app.domain import ToolUse

    adapter = ScriptedAdapter(
        [
            [
                ContentBlockStart(0),
                ContentBlockDelta("a\ud800b\x00c"),
                ToolUse("add_numbers", {"n\udc00": [1]}, "c1"),
                MessageStop("tool_use"),
            ],
            text_reply("fine"),
        ]
    )
    services = await make_services(adapter)
    conv_id = await new_conversation(services, "hi", tools=["add_numbers"])
    events = await all_events(await start_run(services, conv_id))
    assert [frame(e, "r") for e in events]  # every frame encodes
    assert deltas(events).startswith("a\ufffdb\ufffdc")
    assert body(events[-1])["status"] == "completed"
    stored = await conversations(services).messages(conv_id)
    assert stored[2].to_serializable_dict()["arguments"] == {"n\ufffd": [1]}


async def test_a_busy_database_delays_the_log_but_loses_nothing(
    make_services: MakeServices, database_url: str, backend: str
) -> None:
    if backend != "sqlite":
        pytest.skip("the test makes the database busy by holding SQLite's write lock")
    settings = Settings(database_url=database_url)
    configs = ConfigContext(selector(PacedAdapter(60, 0.01)), builtin_tools(), tool_timeout=5)
    services = Services(settings, Database(database_url, busy_timeout_ms=200), configs)
    await services.start()
    try:
        await _busy_database_run(make_services, services, database_url)
    finally:
        await services.stop()


async def _busy_database_run(make_services: MakeServices, services: Any, database_url: str) -> None:
    import sqlite3

    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id, on_disconnect="continue")
    await asyncio.sleep(0.1)
    blocker = sqlite3.connect(database_url.split("///", 1)[1], timeout=0.1)
    blocker.execute("BEGIN EXCLUSIVE")
    await asyncio.sleep(1.5)  # several busy timeouts: flushes fail, and are retried
    blocker.rollback()
    blocker.close()
    live = await asyncio.wait_for(all_events(run), 10)
    other = await make_services(ScriptedAdapter([]))
    replayed = await stored_events(other, conv_id, run.run_id)
    assert [e.seq for e in replayed] == list(range(1, len(live) + 1))
    assert deltas(replayed) == deltas(live)


async def test_a_reader_of_another_process_ends_when_the_run_ends_past_its_id(
    make_services: MakeServices,
) -> None:
    owner = await make_services(PacedAdapter(10, 0.01))
    other = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(owner, "hi")
    run = await start_run(owner, conv_id)
    reader = RunReader(other, OWNER)
    resume = await reader.resume(conv_id, f"{run.run_id}:999")
    assert resume is not None
    rest = await asyncio.wait_for(asyncio.ensure_future(_collect(reader.follow(resume))), 5)
    assert rest == []


async def _collect(batches: AsyncIterator[list[RunEvent]]) -> list[RunEvent]:
    return [e async for batch in batches for e in batch]


async def test_readers_of_other_processes_runs_are_told_when_this_one_shuts_down(
    make_services: MakeServices,
) -> None:
    owner = await make_services(PacedAdapter(300, 0.01))
    other = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(owner, "hi")
    run = await start_run(owner, conv_id, on_disconnect="continue")
    reader = RunReader(other, OWNER)
    resume = await reader.resume(conv_id, f"{run.run_id}:1")
    assert resume is not None
    following = asyncio.ensure_future(_collect(reader.follow(resume)))
    await asyncio.sleep(0.3)
    await other.drain()
    rest = await asyncio.wait_for(following, 3)
    assert rest[-1].name == "error" and rest[-1].seq == 0
    assert body(rest[-1])["code"] == "shutting_down"
    assert b"id:" not in frame(rest[-1], run.run_id)


async def test_the_writer_ends_runs_whose_process_died_on_its_own(
    make_services: MakeServices,
) -> None:
    services = await make_services(ScriptedAdapter([]), run_lease_seconds=0.2)
    conv_id = await new_conversation(services, "hi")
    run_id = "0" * 31 + "2"
    async with services.repository(None) as repo:
        await repo.acquire_lease(conv_id, run_id, 0.05)
        await RunRepository(repo.session).create(run_id, conv_id, OWNER, "cancel")

    async def ended() -> bool:  # within a third of a term; a loaded machine may take longer
        return (await RunReader(services, OWNER).get(conv_id, run_id)).status != "running"

    await wait_for(ended, within=10.0)
    record = await RunReader(services, OWNER).get(conv_id, run_id)
    assert record.status == "interrupted"


async def test_a_dead_run_is_ended_soon_after_its_lease_expires(
    make_services: MakeServices,
) -> None:
    """The conversation reads ``idle`` as soon as a dead process's lease expires; its run must
    not go on saying ``running`` (its partial reply missing from the history) for long after.
    The sweep waited for leases expired a whole term ago, every term: up to two terms more."""
    services = await make_services(ScriptedAdapter([]), run_lease_seconds=3)
    conv_id = await new_conversation(services, "hi")
    run_id = "0" * 31 + "3"
    await dead_run(services, conv_id, run_id, "half")

    async def ended() -> bool:
        return (await RunReader(services, OWNER).get(conv_id, run_id)).status != "running"

    # The lease expires 0.05 s in; a sweep each third of a term (1 s) ends the run about a
    # second in. Waiting a whole term (3 s) more, as the sweep did, is past 2.5 s.
    await wait_for(ended, within=2.5)
    assert (await conversations(services).get(conv_id)).status == "idle"
    record = await RunReader(services, OWNER).get(conv_id, run_id)
    assert record.status == "interrupted"
    stored = await conversations(services).messages(conv_id)
    assert stored[-1].text == "half" and stored[-1].incomplete


async def test_a_stalled_process_keeps_its_own_runs(make_services: MakeServices) -> None:
    """The loop stopped for several lease terms (a long pause, a frozen container): its leases
    expired, but its runs are alive. Neither its own writer's sweep nor a write it serves meanwhile
    may end them as abandoned: the write is refused as while running, the run completes."""
    services = await make_services(PacedAdapter(20, 0.01), run_lease_seconds=0.2)
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    reading = asyncio.create_task(all_events(run))
    await asyncio.sleep(0.05)
    time.sleep(1.0)  # noqa: ASYNC251 - the loop stalls: five lease terms, no renewal
    with pytest.raises(LeaseHeld):
        async with services.repository(OWNER) as repo:
            await repo.append_messages(conv_id, [TextMessage("meanwhile")])
    events = await asyncio.wait_for(reading, 5)
    assert body(events[-1])["status"] == "completed"
    assert "error" not in names(events)
    stored = await conversations(services).messages(conv_id)
    assert [m.text for m in stored[1:]] == ["hi", "".join(f"w{i} " for i in range(20))]
    record = await RunReader(services, OWNER).get(conv_id, run.run_id)
    assert record.status == "completed"


async def test_a_cancel_after_a_stall_stops_the_run_as_asked(make_services: MakeServices) -> None:
    services = await make_services(PacedAdapter(200, 0.01), run_lease_seconds=0.2)
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    reading = asyncio.create_task(all_events(run))
    await asyncio.sleep(0.05)
    time.sleep(0.5)  # noqa: ASYNC251 - the loop stalls past the lease
    assert await conversations(services).cancel(conv_id) == run.run_id
    events = await asyncio.wait_for(reading, 5)
    assert body(events[-1])["status"] == "aborted"
    assert (await RunReader(services, OWNER).get(conv_id, run.run_id)).status == "aborted"


REFUSE_POISON = {
    "sqlite": [
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON messages WHEN NEW.data LIKE '%poison%' "
        "BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
    ],
    "postgres": [
        "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN IF NEW.data LIKE "
        "'%poison%' THEN RAISE EXCEPTION 'poison refused' USING ERRCODE = 'check_violation'; "
        "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON messages FOR EACH ROW "
        "EXECUTE FUNCTION refuse_poison()",
    ],
}


async def test_a_reply_storage_refuses_fails_the_run_and_frees_the_conversation(
    make_services: MakeServices, backend: str
) -> None:
    """The database refuses the reply (here a trigger; in life, data it cannot hold): the run
    ends ``failed`` without it, its ``error`` and ``done`` are stored as its streams got them,
    and the conversation is free at once (not after its lease)."""
    services = await make_services(ScriptedAdapter([text_reply("poison"), text_reply("fine")]))
    async with services.repository(None) as repo:
        for statement in REFUSE_POISON[backend]:
            await repo.session.execute(text(statement))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    events = await all_events(run)
    assert names(events)[-2:] == ["error", "done"]
    assert body(events[-2])["code"] == "internal"
    assert body(events[-1]) == {"status": "failed", "message_count": 2, "version": 1}
    stored = await stored_events(services, conv_id, run.run_id)
    assert [(e.seq, e.name, e.data) for e in stored[-2:]] == [
        (e.seq, e.name, e.data) for e in events[-2:]
    ]
    [record], _ = await RunReader(services, OWNER).list(conv_id, 10, None)
    assert record.status == "failed" and record.error_code == "internal"
    again = await all_events(await start_run(services, conv_id))  # no wait for the lease
    assert body(again[-1])["status"] == "completed"
    assert [m.text for m in await conversations(services).messages(conv_id)][-2:] == ["hi", "fine"]


@pytest.mark.parametrize(
    "calls",
    [
        [("lookup", {"order": float("nan")}, "c1")],
        [("lookup", {"orders": [1, {"n": float("inf")}]}, "c1")],
        [("lookup", {"order": 1}, "c1"), ("lookup", {"order": 2}, "c1")],
    ],
    ids=["nan", "infinity", "same-id"],
)
async def test_a_tool_call_storage_could_not_hold_fails_the_run_as_a_bad_response(
    make_services: MakeServices, calls: list[tuple[str, dict[str, Any], str]]
) -> None:
    """A model's JSON may hold NaN or infinity, or give two calls of a reply one id: the run
    fails with ``bad_response`` (the text so far kept), its log says so, and the conversation
    is free at once — nothing half-stored, no lease left to expire."""
    tool = {"name": "lookup", "description": "", "parameters": {"type": "object"}}
    services = await make_services(ScriptedAdapter([tool_reply("let me see", *calls)]))
    conv_id = await new_conversation(services, "look", client_tools=[tool])
    run = await start_run(services, conv_id)
    events = await all_events(run)
    assert names(events)[-3:] == ["message", "error", "done"]
    assert body(events[-2])["code"] == "bad_response"
    assert body(events[-1])["status"] == "failed"
    stored = await stored_events(services, conv_id, run.run_id)
    assert [(e.seq, e.name) for e in stored] == [(e.seq, e.name) for e in events]
    messages = await conversations(services).messages(conv_id)
    assert messages[-1].to_serializable_dict() == body(events[-3])["message"]
    delta = Delta([TextMessage("still there?")])
    view = await conversations(services).apply_delta(conv_id, delta, None)
    assert view.record.message_count == len(messages) + 1


@pytest.mark.parametrize("count", [float("nan"), float("inf"), 1.5, "12", -3, True])
async def test_token_counts_that_are_no_counts_are_left_out(
    make_services: MakeServices, count: Any
) -> None:
    """A provider's usage may say NaN, 1.5 or "12": the run completes, its usage counts what
    is a count, and the run reads back (storage refused NaN on PostgreSQL; 1.5 broke reads)."""
    reply = [*text_reply("ok")[:-1], MessageStop("end_turn", Usage(count, 4))]
    services = await make_services(ScriptedAdapter([reply]))
    conv_id = await new_conversation(services, "hi")
    events = await all_events(await start_run(services, conv_id))
    assert body(events[-1])["status"] == "completed"
    [record], _ = await RunReader(services, OWNER).list(conv_id, 10, None)
    assert record.status == "completed"
    assert record.usage == {
        "input_tokens": 0,
        "output_tokens": 4,
        "reasoning_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
