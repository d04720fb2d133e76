"""A key's limits in-process, on both databases: requests per minute, concurrent runs, output
tokens per day and dollars per month (before a run, and between a run's rounds)."""

from __future__ import annotations

import asyncio
import json

import httpx

from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse
from tests.spend.conftest import ADMIN_HEADERS, bearer, make_key

ASK = {"messages": [{"role": "user", "text": "one two three four five"}]}


async def start(client: httpx.AsyncClient, token: str, body: object = ASK) -> httpx.Response:
    made = await client.post("/conversations", json={}, headers=bearer(token))
    assert made.status_code == 201, made.text
    return await client.post(
        f"/conversations/{made.json()['id']}/stream", json=body, headers=bearer(token)
    )


def assert_refused(response: httpx.Response, code: str) -> int:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    return int(response.headers["retry-after"])


async def test_requests_per_minute_are_counted_in_the_database(client: httpx.AsyncClient) -> None:
    token = (await make_key(client, requests_per_minute=3))["token"]
    for _ in range(3):
        assert (await client.get("/conversations", headers=bearer(token))).status_code == 200
    refused = await client.get("/conversations", headers=bearer(token))
    assert 1 <= assert_refused(refused, "rate_limited") <= 60
    other = (await make_key(client, requests_per_minute=1))["token"]
    assert (await client.get("/conversations", headers=bearer(other))).status_code == 200


async def test_a_key_has_at_most_its_concurrent_runs(settings: Settings) -> None:
    slow = settings.model_copy(update={"offline_delay_ms": 100})
    async with app_client(slow) as client:
        token = (await make_key(client, max_concurrent_runs=1))["token"]
        first, second = await asyncio.gather(start(client, token), start(client, token))
        statuses = sorted([first.status_code, second.status_code])
        assert statuses == [200, 429]
        refused = first if first.status_code == 429 else second
        assert assert_refused(refused, "too_many_runs") >= 1
        assert (await start(client, token)).status_code == 200  # the first one ended


async def test_output_tokens_per_day(client: httpx.AsyncClient) -> None:
    token = (await make_key(client, output_tokens_per_day=5))["token"]
    assert (await start(client, token)).status_code == 200  # 5 words: 5 output tokens
    refused = await start(client, token)
    assert 1 <= assert_refused(refused, "budget_exceeded") <= 86_400


async def test_dollars_per_month(client: httpx.AsyncClient) -> None:
    # A reply costs (input + output) tokens at $1,000 a million: cents; the budget is a cent.
    made = await make_key(client, budget_usd_per_month=0.01)
    token = made["token"]
    ran = await start(client, token)
    assert ran.status_code == 200 and parse(ran.text)[-1].data["status"] == "completed"
    refused = await start(client, token)
    assert assert_refused(refused, "budget_exceeded") <= 31 * 86_400
    # A bigger budget lets it run again, at once (this process forgets what it read).
    await client.patch(
        f"/admin/keys/{made['id']}", json={"budget_usd_per_month": 100}, headers=ADMIN_HEADERS
    )
    assert (await start(client, token)).status_code == 200


async def test_a_run_crossing_its_budget_stops_before_its_next_round(
    client: httpx.AsyncClient,
) -> None:
    """The model call that crossed the budget finishes and its tool call is stored; the next
    model call is not made: `error budget_exceeded`, then `done failed`."""
    token = (await make_key(client, budget_usd_per_month=0.001))["token"]
    made = await client.post(
        "/conversations", json={"config": {"tools": ["add_numbers"]}}, headers=bearer(token)
    )
    cid = made.json()["id"]
    ask = {"messages": [{"role": "user", "text": 'call add_numbers {"numbers": [1, 2]}'}]}
    response = await client.post(f"/conversations/{cid}/stream", json=ask, headers=bearer(token))
    events = parse(response.text)
    names = [e.name for e in events]
    assert names.count("message_stop") == 1
    assert names[-2:] == ["error", "done"]
    assert events[-2].data["code"] == "budget_exceeded"
    assert events[-1].data["status"] == "failed"
    stored = (await client.get(f"/conversations/{cid}/messages", headers=bearer(token))).json()
    call = stored["messages"][-1]
    assert call["type"] == "ToolCallMessage" and json.loads(json.dumps(call))["result"] == 3
    state = (await client.get(f"/conversations/{cid}", headers=bearer(token))).json()
    assert state["status"] == "idle" and state["usage"]["calls"] == 1


async def test_a_regenerate_refused_by_the_budget_keeps_the_reply(
    client: httpx.AsyncClient,
) -> None:
    """The AI SDK's regenerate rewinds the last reply away and runs again: refused (429), the
    reply was gone all the same; the rewind is now part of the start's transaction."""
    token = (await make_key(client, output_tokens_per_day=3))["token"]
    cid = (await client.post("/conversations", json={}, headers=bearer(token))).json()["id"]
    parts = [{"type": "text", "text": "one two three"}]
    chat = {"id": cid, "messages": [{"id": "m1", "role": "user", "parts": parts}]}
    sent = await client.post("/ai-sdk/chat", json=chat, headers=bearer(token))
    assert sent.status_code == 200, sent.text
    url = f"/conversations/{cid}/messages"
    before = (await client.get(url, headers=bearer(token))).json()["messages"]
    assert len(before) == 2
    for trigger in ({"trigger": "regenerate-message"}, {"messageId": f"{cid}-0"}):
        again = await client.post("/ai-sdk/chat", json={**chat, **trigger}, headers=bearer(token))
        assert_refused(again, "budget_exceeded")
        assert (await client.get(url, headers=bearer(token))).json()["messages"] == before
