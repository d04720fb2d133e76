"""The usage ledger on both databases: one row per model call, equal to the runs'
`message_stop` usage, written once (an idempotent retry charges nothing more), priced by the
table (an unknown model: cost null, counted), summed by `/usage`, a conversation's totals and
`/metrics`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from prometheus_client import REGISTRY
from sqlalchemy import event as sa_event

from app.domain import Usage
from app.main import create_app
from app.settings import Settings
from app.spend import Charge, Payer, PriceTable
from app.spend.ledger import charge, charge_many, conversation_totals, usage_report
from app.storage import Database
from tests.api.conftest import app_client, wait_for
from tests.api.sse import Event, parse
from tests.spend.conftest import ADMIN_HEADERS, bearer, make_key

KINDS = Usage.KINDS


def stop_usage(events: list[Event]) -> dict[str, int]:
    """The sum of the stream's `message_stop` usage, by kind."""
    total = dict.fromkeys(KINDS, 0)
    for event in events:
        if event.name == "message_stop":
            for kind in KINDS:
                total[kind] += event.data["usage"].get(kind) or 0
    return total


async def converse(client: httpx.AsyncClient, token: str, *texts: str) -> tuple[str, list[Event]]:
    cid = (await client.post("/conversations", json={}, headers=bearer(token))).json()["id"]
    seen: list[Event] = []
    for text in texts:
        body = {"messages": [{"role": "user", "text": text}]}
        response = await client.post(
            f"/conversations/{cid}/stream", json=body, headers=bearer(token)
        )
        assert response.status_code == 200, response.text
        seen += parse(response.text)
    return cid, seen


def only(report: dict[str, Any]) -> dict[str, Any]:
    (item,) = report["items"]
    return dict(item)


async def test_the_ledger_equals_the_runs_message_stop_usage(client: httpx.AsyncClient) -> None:
    token = (await make_key(client))["token"]
    cid, events = await converse(client, token, "one two three", "four five")
    expected = stop_usage(events)
    totals = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()["usage"]
    assert {k: totals[k] for k in KINDS} == expected
    assert totals["calls"] == 2 and totals["unpriced_calls"] == 0
    per_million = 1000.0  # tests/spend/conftest.py's price of the offline model
    cost = (expected["input_tokens"] + expected["output_tokens"]) * per_million / 1e6
    assert abs(totals["cost_usd"] - cost) < 1e-9
    mine = (await client.get("/usage?group_by=conversation", headers=bearer(token))).json()
    assert only(mine)["group"] == cid and only(mine)["output_tokens"] == expected["output_tokens"]


async def test_an_idempotent_retry_charges_nothing_more(client: httpx.AsyncClient) -> None:
    token = (await make_key(client))["token"]
    cid = (await client.post("/conversations", json={}, headers=bearer(token))).json()["id"]
    body = {"messages": [{"role": "user", "text": "once only"}]}
    headers = {**bearer(token), "Idempotency-Key": "retry-1"}
    first = await client.post(f"/conversations/{cid}/stream", json=body, headers=headers)
    again = await client.post(f"/conversations/{cid}/stream", json=body, headers=headers)
    assert again.headers["x-run-id"] == first.headers["x-run-id"]
    totals = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()["usage"]
    assert totals["calls"] == 1
    assert totals["output_tokens"] == stop_usage(parse(first.text))["output_tokens"]


async def test_usage_by_key_model_and_day_admin_sees_all_a_key_its_own(
    client: httpx.AsyncClient,
) -> None:
    a, b = await make_key(client, name="a"), await make_key(client, name="b")
    _, seen_a = await converse(client, a["token"], "alpha beta")
    await converse(client, b["token"], "gamma", "delta epsilon zeta")
    by_key = (await client.get("/usage?group_by=key", headers=ADMIN_HEADERS)).json()
    groups = {i["group"]: i for i in by_key["items"]}
    assert set(groups) == {a["id"], b["id"]}
    assert groups[a["id"]]["output_tokens"] == stop_usage(seen_a)["output_tokens"]
    assert groups[b["id"]]["calls"] == 2
    own = (await client.get("/usage?group_by=key", headers=bearer(a["token"]))).json()
    assert [i["group"] for i in own["items"]] == [a["id"]]
    model = only((await client.get("/usage?group_by=model", headers=ADMIN_HEADERS)).json())
    assert model["group"] == "offline/echo" and model["calls"] == 3
    day = only((await client.get("/usage?group_by=day", headers=ADMIN_HEADERS)).json())
    assert day["group"] == datetime.now(UTC).strftime("%Y-%m-%d")
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    empty = await client.get("/usage", params={"from": later}, headers=ADMIN_HEADERS)
    assert empty.json()["items"] == []
    backwards = await client.get(
        "/usage", params={"from": later, "to": "2020-01-01T00:00:00Z"}, headers=ADMIN_HEADERS
    )
    assert backwards.status_code == 200 and backwards.json()["items"] == []
    # The last two exist with their offset but not in UTC (were a 500: OverflowError).
    for bad in (
        "2020-01-01T00:00:00",
        "0.5",
        "1700000000",
        "2020-13-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
    ):
        refused = await client.get("/usage", params={"from": bad}, headers=ADMIN_HEADERS)
        assert refused.status_code == 422, bad
        assert refused.json()["errors"][0]["loc"] == ["query", "from"]


async def test_metrics_count_tokens_by_kind_and_cost_by_model(client: httpx.AsyncClient) -> None:
    token = (await make_key(client))["token"]
    await converse(client, token, "metrics please")
    text = (await client.get("/metrics")).text
    assert 'parley_model_tokens_total{kind="output",provider="offline"}' in text
    assert 'parley_cost_usd_total{model="echo",provider="offline"}' in text


async def test_an_unknown_model_is_charged_with_cost_null_and_counted_once(
    database: Database,
) -> None:
    def unpriced() -> float:
        labels = {"provider": "openai", "model": "gpt-mystery"}
        return REGISTRY.get_sample_value("parley_unpriced_calls_total", labels) or 0.0

    before = unpriced()
    payer = Payer("r" * 32, "c" * 32, "key:x", None)
    usage = Usage(100, 10, 0, 0, 0)
    charges = [Charge(1, "openai", "gpt-mystery", usage, datetime.now(UTC))]
    for _ in range(2):  # written twice (a recovery after an ending): kept once
        async with database.transaction() as session:
            await charge(session, payer, charges, PriceTable({}))
    async with database.session(readonly=True) as session:
        totals = await conversation_totals(session, "c" * 32)
        report = await usage_report(session, "model", None, None, None)
    assert totals["calls"] == 1 and totals["cost_usd"] is None and totals["unpriced_calls"] == 1
    assert report[0]["group"] == "openai/gpt-mystery"
    assert unpriced() == before + 1


async def test_the_endings_of_one_flush_are_charged_in_one_statement_each_call_once(
    database: Database,
) -> None:
    """A flush's endings (app/runs/writer.py) charge several runs together: each call gets its
    row, a call already written (one run's ending written again) is kept and not counted again,
    and runs with the same call numbers do not shadow each other."""

    def calls(model: str) -> float:
        labels = {"provider": "openai", "model": model}
        return REGISTRY.get_sample_value("parley_unpriced_calls_total", labels) or 0.0

    now = datetime.now(UTC)
    payers = [Payer(f"{n}" * 32, "d" * 32, "key:x", None) for n in range(3)]
    bills = [
        (
            payer,
            [Charge(call, "openai", f"gpt-flush-{n}", Usage(n + 1, call), now) for call in (1, 2)],
        )
        for n, payer in enumerate(payers)
    ]
    async with database.transaction() as session:
        await charge(session, *bills[0], PriceTable({}))
    before = [calls(f"gpt-flush-{n}") for n in range(3)]
    inserts: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("INSERT INTO usage_ledger"):
            inserts.append(statement)

    sa_event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        async with database.transaction() as session:
            await charge_many(session, bills, PriceTable({}))
            await charge_many(session, [], PriceTable({}))
    finally:
        sa_event.remove(database.engine.sync_engine, "before_cursor_execute", count)
    assert len(inserts) == 1
    assert [calls(f"gpt-flush-{n}") - before[n] for n in range(3)] == [0, 2, 2]
    async with database.session(readonly=True) as session:
        totals = await conversation_totals(session, "d" * 32)
    assert totals["calls"] == 6
    assert totals["input_tokens"] == 2 * (1 + 2 + 3) and totals["output_tokens"] == 3 * (1 + 2)


async def test_an_aborted_run_is_charged_for_no_call_it_did_not_finish(
    settings: Settings,
) -> None:
    """A run completes (one call); the next is cancelled mid-reply (its call never reached its
    `message_stop`): the ledger holds the first call alone, equal to the streams'
    `message_stop`s, and the aborted run's row is charged nothing."""
    slow = settings.model_copy(update={"offline_delay_ms": 50})
    async with app_client(slow) as client:
        token = (await make_key(client))["token"]
        cid, first = await converse(client, token, "one two")
        ask = {"messages": [{"role": "user", "text": " ".join(f"w{i}" for i in range(40))}]}
        url = f"/conversations/{cid}/stream?on_disconnect=continue"
        streaming = asyncio.create_task(client.post(url, json=ask, headers=bearer(token)))
        await asyncio.sleep(0.5)
        cancelled = await client.post(f"/conversations/{cid}/cancel", headers=bearer(token))
        assert cancelled.status_code == 202, cancelled.text
        second = parse((await streaming).text)
        assert second[-1].data["status"] == "aborted"
        assert any(e.name == "content_block_delta" for e in second)
        totals = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()["usage"]
        both = first + second
        assert totals["calls"] == sum(e.name == "message_stop" for e in both) == 1
        assert {k: totals[k] for k in KINDS} == stop_usage(both)


async def test_an_automatic_title_is_charged_to_the_runs_key_once(settings: Settings) -> None:
    """The title's model call (PARLEY_AUTO_TITLE) is in the ledger: the conversation's totals,
    the key's `/usage` and so its budget count it, once, beside the run's own call."""
    async with app_client(settings.model_copy(update={"auto_title": True})) as client:
        made = await make_key(client)
        token = made["token"]
        cid, events = await converse(client, token, "why is the sky so very blue")

        async def titled() -> Any:
            state = await client.get(f"/conversations/{cid}", headers=bearer(token))
            return state.json()["usage"]["calls"] == 2 or None

        assert await wait_for(titled)
        totals = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()
        assert totals["title"] and totals["usage"]["calls"] == 2
        run_output = stop_usage(events)["output_tokens"]
        assert totals["usage"]["output_tokens"] > run_output  # the title's words too
        by_key = (await client.get("/usage?group_by=key", headers=ADMIN_HEADERS)).json()
        assert only(by_key)["group"] == made["id"] and only(by_key)["calls"] == 2


def titles(outcome: str) -> float:
    return REGISTRY.get_sample_value("parley_titles_total", {"outcome": outcome}) or 0.0


async def test_no_title_is_asked_for_once_the_keys_budget_is_spent(settings: Settings) -> None:
    """The title's model call was made (and charged) after a run that spent its key's budget:
    now it is not — no call 0 in the ledger, no title — until a reply after the budget is
    raised titles the conversation as usual."""
    app = create_app(settings.model_copy(update={"auto_title": True}))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
    ):
        titler = app.state.services.titler
        made = await make_key(client, output_tokens_per_day=1)  # the first reply spends it
        token, over_budget = made["token"], titles("over_budget")
        cid, _ = await converse(client, token, "why is the sky so very blue")
        await titler.wait()
        state = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()
        assert state["title"] is None and state["usage"]["calls"] == 1
        by_key = (await client.get("/usage?group_by=key", headers=ADMIN_HEADERS)).json()
        assert only(by_key)["calls"] == 1
        assert titles("over_budget") - over_budget == 1

        raised = {"output_tokens_per_day": 1_000_000}
        patched = await client.patch(
            f"/admin/keys/{made['id']}", json=raised, headers=ADMIN_HEADERS
        )
        assert patched.status_code == 200, patched.text
        body = {"messages": [{"role": "user", "text": "and at dusk"}]}
        again = await client.post(f"/conversations/{cid}/stream", json=body, headers=bearer(token))
        assert again.status_code == 200 and "event: done" in again.text, again.text
        await titler.wait()
        state = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()
        assert state["title"] == "why is the sky so very"
        assert state["usage"]["calls"] == 3  # the two replies and the title
