"""First outputs first (app/runs/priority.py), on both databases. A start *presses* from its
request until its model request is under way (``asked()`` until its answer); meanwhile, for
``HOLD_MOST`` at most, the event writer holds its flushes back (another run's ending, and so its
``done``, waits) and flushes what it held the moment the start is answered, and, for
``PAUSE_MOST`` at most, a reply that has had its first output reads no more until the starts
asked before it press no more (starts asked later do not hold it). A start waiting for a slow
model presses nothing; a start refused, or a run ended before its model call, owes nothing. A
start being set up is taken here as a start takes it — ``first_outputs.asked()`` — since what
it does meanwhile (its request, its transaction) takes microseconds in a test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    RequestOptions,
    StreamChunk,
    TextMessage,
    ToolSpec,
)
from app.runs import priority
from app.runs.errors import NothingToAnswer
from app.runs.events import RunEvent
from app.runs.live import LiveRun
from app.runs.services import Services
from tests.runs.conftest import MakeServices, all_events, new_conversation, start_run
from tests.runs.test_runs import PacedAdapter, body, names


class GatedAdapter(PacedAdapter):
    """Answers "ok" at once — or, to a conversation whose last message is "wait", only once
    ``gate`` is set (a model slow to answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def stream_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> AsyncIterator[StreamChunk]:
        last = messages[-1]
        if isinstance(last, TextMessage) and last.text == "wait":
            await self.gate.wait()
        yield ContentBlockStart(0)
        yield ContentBlockDelta("ok")
        yield ContentBlockStop(0)
        yield MessageStop()


async def _done_within(run_events: asyncio.Task[list[RunEvent]], seconds: float) -> bool:
    done, _ = await asyncio.wait({run_events}, timeout=seconds)
    return bool(done)


def _windows(monkeypatch: pytest.MonkeyPatch, hold: float, pause: float) -> None:
    """How long a pressing start holds the writer, and the replies under way, at most."""
    monkeypatch.setattr(priority, "HOLD_MOST", hold)
    monkeypatch.setattr(priority, "PAUSE_MOST", pause)


async def test_an_ending_waits_while_a_start_is_set_up_then_goes_at_once(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _windows(monkeypatch, 30.0, 30.0)  # held as long as the start presses
    services = await make_services(GatedAdapter())
    first_outputs = services.writer.first_outputs
    quick = await start_run(services, await new_conversation(services, "hi"))
    quick_events = asyncio.create_task(all_events(quick))
    await _until(quick, "content_block_start")
    pressing = first_outputs.asked()  # a start being set up, asked after the reply began

    # The quick run's reply is over, but its ending is held: its `done` waits.
    await asyncio.wait_for(_until(quick, "message_stop"), 10.0)
    assert not await _done_within(quick_events, 0.5)
    assert first_outputs.waiting == 1

    pressing()  # its model request is under way: what the writer held goes now
    assert await _done_within(quick_events, 10.0)
    assert body(quick_events.result()[-1])["status"] == "completed"
    assert first_outputs.waiting == 0


async def test_a_reply_under_way_lets_an_earlier_start_be_set_up_first(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _windows(monkeypatch, 30.0, 30.0)
    services = await make_services(GatedAdapter())
    first_outputs = services.writer.first_outputs
    pressing = first_outputs.asked()
    quick = await start_run(services, await new_conversation(services, "hi"))

    # The quick reply's first output is sent; the rest waits for the start asked before it.
    await _until(quick, "content_block_start")
    await asyncio.sleep(0.3)
    assert names(quick.events)[-1] == "content_block_start"
    assert first_outputs.pauses == 1

    pressing()
    events = await asyncio.wait_for(all_events(quick), 10.0)
    assert names(events).count("content_block_delta") == 1
    assert body(events[-1])["status"] == "completed"


async def test_a_start_asked_after_a_reply_paused_does_not_hold_it(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _windows(monkeypatch, 30.0, 30.0)
    services = await make_services(GatedAdapter())
    first_outputs = services.writer.first_outputs
    earlier = first_outputs.asked()
    quick = await start_run(services, await new_conversation(services, "hi"))
    await _until(quick, "content_block_start")  # its first output: paused behind `earlier`
    assert names(quick.events)[-1] == "content_block_start"
    later = first_outputs.asked()

    earlier()  # the start before it is under way; the one after it still presses
    # All of its reply (its `done` waits for the writer, which the later start holds):
    await asyncio.wait_for(_until(quick, "message_stop"), 10.0)
    assert first_outputs.waiting == 1
    later()
    assert body((await all_events(quick))[-1])["status"] == "completed"


async def test_a_start_waiting_for_a_slow_model_holds_nothing(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _windows(monkeypatch, 30.0, 30.0)  # a hold would outlast the test
    adapter = GatedAdapter()
    services = await make_services(adapter)
    slow = await start_run(services, await new_conversation(services, "wait"))
    await _until_nothing_waits(services)  # its model request is under way: it presses no more

    quick = await start_run(services, await new_conversation(services, "hi"))
    events = await asyncio.wait_for(all_events(quick), 10.0)  # not paused, its done not held
    assert body(events[-1])["status"] == "completed"
    assert services.writer.first_outputs.pauses == 0
    adapter.gate.set()
    assert body((await all_events(slow))[-1])["status"] == "completed"


async def test_a_start_presses_no_longer_than_the_most(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _windows(monkeypatch, 0.2, 0.2)
    services = await make_services(GatedAdapter())
    first_outputs = services.writer.first_outputs
    stuck = first_outputs.asked()  # a start that is never answered
    quick = await start_run(services, await new_conversation(services, "hi"))

    events = await asyncio.wait_for(all_events(quick), 10.0)

    assert body(events[-1])["status"] == "completed"
    assert first_outputs.waiting == 1
    assert first_outputs.held_until(0.0) == 0.0  # it no longer holds the writer
    stuck()


async def test_a_reply_stays_paused_after_the_writer_stops_holding(
    make_services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two windows are apart: a start that has pressed longer than ``HOLD_MOST`` no longer
    holds the writer, but the replies under way still let it go first until ``PAUSE_MOST``."""
    _windows(monkeypatch, 0.1, 30.0)
    services = await make_services(GatedAdapter())
    first_outputs = services.writer.first_outputs
    slow_start = first_outputs.asked()
    quick = await start_run(services, await new_conversation(services, "hi"))
    await _until(quick, "content_block_start")
    await asyncio.sleep(0.5)
    assert first_outputs.held_until(0.0) == 0.0  # the writer flushes again
    assert names(quick.events)[-1] == "content_block_start"  # the reply still waits

    slow_start()
    assert body((await asyncio.wait_for(all_events(quick), 10.0))[-1])["status"] == "completed"


async def test_starts_that_never_reach_a_model_owe_the_writer_nothing(
    make_services: MakeServices,
) -> None:
    adapter = GatedAdapter()
    services = await make_services(adapter)
    nothing = await new_conversation(services)  # only a system prompt: nothing to answer
    with pytest.raises(NothingToAnswer):
        await start_run(services, nothing)
    assert services.writer.first_outputs.waiting == 0

    stopped = await start_run(services, await new_conversation(services, "wait"))
    assert services.writer.first_outputs.waiting == 1
    stopped.stop("cancel")  # ended before its model answered
    assert body((await all_events(stopped))[-1])["status"] == "aborted"
    await _until_nothing_waits(services)


async def _until(run: LiveRun, name: str) -> None:
    """Until ``run`` has sent an event called ``name``."""
    async for batch in run.follow(0):
        if any(e.name == name for e in batch):
            return


async def _until_nothing_waits(services: Services) -> None:
    for _ in range(100):
        if services.writer.first_outputs.waiting == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{services.writer.first_outputs.waiting} starts still owed")
