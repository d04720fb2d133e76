"""Idempotency-Key on POST /conversations, …/deltas and …/stream, on both databases.

A retry with the same key and request gets the first result (a stream: the same run, from its
first event, on real uvicorn); another request under the key is a 422; concurrent requests
with one key make one effect; keys are per owner and expire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import cast

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.conversations.idempotency import IdempotencyService
from app.main import create_app
from app.settings import Settings
from app.storage import Database
from app.storage.idempotency import PENDING, IdempotencyRepository, KeyRecord, KeyRef
from app.storage.records import utcnow
from tests.api.conftest import LiveServer, app_client
from tests.api.sse import events, parse

pytestmark = pytest.mark.postgres

KEY = {"Idempotency-Key": "3f1c2b7e-key-1"}
JSON_KEY = {**KEY, "Content-Type": "application/json"}


async def test_a_retried_create_returns_the_first_conversation(
    client: httpx.AsyncClient,
) -> None:
    # Numbers and a key order that jsonb would rewrite: the stored response is its text.
    metadata = {"n": 1, "z": 1e16, "x": -0.0, "big": 2**64 + 1}
    body = {"system_prompt": "Be brief.", "metadata": metadata}
    first = await client.post("/conversations", json=body, headers=KEY)
    again = await client.post("/conversations", json=body, headers=KEY)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert len((await client.get("/conversations")).json()["items"]) == 1


async def test_the_same_key_with_another_body_is_a_422(client: httpx.AsyncClient) -> None:
    assert (await client.post("/conversations", json={}, headers=KEY)).status_code == 201
    other = await client.post("/conversations", json={"system_prompt": "x"}, headers=KEY)
    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused"
    assert other.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]


async def test_the_same_json_spelled_otherwise_is_the_same_request(
    client: httpx.AsyncClient,
) -> None:
    first = await client.post(
        "/conversations",
        content=b'{"system_prompt":"Be brief.","metadata":{"n":1,"m":2}}',
        headers=JSON_KEY,
    )
    again = await client.post(
        "/conversations",
        content=b'{ "metadata": {"m": 2, "n": 1},\n  "system_prompt": "Be brief." }',
        headers=JSON_KEY,
    )
    assert first.status_code == again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    reordered = await client.post(
        "/conversations",
        content=b'{"system_prompt":"Be brief.","metadata":{"n":2,"m":1}}',
        headers=JSON_KEY,
    )
    assert reordered.json()["code"] == "idempotency_key_reused"


async def test_keys_are_scoped_by_owner_and_route(client: httpx.AsyncClient) -> None:
    mine = await client.post("/conversations", json={}, headers=KEY)
    theirs = await client.post(
        "/conversations", json={}, headers={**KEY, "Authorization": "Bearer other"}
    )
    assert theirs.status_code == 201 and theirs.json()["id"] != mine.json()["id"]
    delta = {"messages": [{"role": "user", "text": "hi"}]}
    path = f"/conversations/{mine.json()['id']}/deltas"
    assert (await client.post(path, json=delta, headers=KEY)).status_code == 200


async def test_a_retried_delta_appends_once(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/conversations", json={})).json()["id"]
    delta = {"messages": [{"role": "user", "text": "only once"}]}
    first = await client.post(f"/conversations/{cid}/deltas", json=delta, headers=KEY)
    again = await client.post(f"/conversations/{cid}/deltas", json=delta, headers=KEY)
    assert first.status_code == again.status_code == 200
    assert again.json()["message_count"] == first.json()["message_count"] == 1
    assert again.headers["etag"] == first.headers["etag"]
    assert (await client.get(f"/conversations/{cid}")).json()["message_count"] == 1


async def test_a_key_on_a_path_longer_than_its_scope_column_is_a_plain_404(
    client: httpx.AsyncClient,
) -> None:
    """An id of 300 characters makes the route's scope longer than the key table holds
    (255): PostgreSQL refused the claim, a 500. Such a path is scoped by its digest."""
    delta = {"messages": [{"role": "user", "text": "hi"}]}
    for route in ("deltas", "stream"):
        response = await client.post(f"/conversations/{'a' * 300}/{route}", json=delta, headers=KEY)
        assert response.status_code == 404, response.text
        assert response.json()["code"] == "conversation_not_found"


async def test_a_failed_request_frees_its_key(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/conversations", json={})).json()["id"]
    delta = {"messages": [{"role": "user", "text": "hi"}]}
    stale = {**KEY, "If-Match": '"7"'}
    for _ in range(2):  # not 409 "in use", not a replay: the request runs again
        response = await client.post(f"/conversations/{cid}/deltas", json=delta, headers=stale)
        assert response.status_code == 412


async def test_a_key_expires(settings: Settings) -> None:
    short = settings.model_copy(update={"idempotency_ttl_seconds": 0.05})
    async with app_client(short) as client:
        first = await client.post("/conversations", json={}, headers=KEY)
        await asyncio.sleep(0.1)
        later = await client.post("/conversations", json={"system_prompt": "x"}, headers=KEY)
        assert later.status_code == 201 and later.json()["id"] != first.json()["id"]


async def test_a_key_in_use_is_a_409_with_retry_after(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        service = IdempotencyService(app.state.services, "anonymous")
        assert await service.begin("POST /conversations", KEY["Idempotency-Key"], "h") is None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            response = await client.post("/conversations", json={}, headers=KEY)
    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_in_use"
    assert response.headers["retry-after"] == "1"


async def test_a_key_freed_while_a_claim_reads_it_is_claimed_again(
    database: Database, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that meets the key held, then reads it just after its request failed and freed
    it, claims it again: it never serves its request without the key (on PostgreSQL, many
    clients retrying one delta through three processes appended it up to 8 times)."""
    if backend == "sqlite":
        pytest.skip("SQLite's write lock keeps a claim's INSERT and SELECT together")
    ref = KeyRef("anonymous", "POST /conversations/c/deltas", "k")
    ttl, stale = timedelta(hours=1), timedelta(minutes=1)
    async with database.transaction() as session:
        assert await IdempotencyRepository(session).claim(ref, "h", utcnow(), ttl, stale) is None
    read = IdempotencyRepository.get

    async def freed_first(self: IdempotencyRepository, ref: KeyRef) -> KeyRecord | None:
        monkeypatch.setattr(IdempotencyRepository, "get", read)
        async with database.transaction() as other:  # the first request failed meanwhile
            await IdempotencyRepository(other).release(ref)
        return await read(self, ref)

    monkeypatch.setattr(IdempotencyRepository, "get", freed_first)
    async with database.transaction() as session:
        assert await IdempotencyRepository(session).claim(ref, "h", utcnow(), ttl, stale) is None
    async with database.transaction() as session:
        held = await IdempotencyRepository(session).get(ref)
    assert held is not None and held.state == PENDING


async def test_a_claim_refused_for_another_reason_raises_rather_than_retrying(
    database: Database,
) -> None:
    """Claiming again is for a key freed meanwhile: an INSERT refused for something else (here
    a missing request hash) is raised after a few tries, never retried for good."""
    ref = KeyRef("anonymous", "POST /conversations/c/deltas", "k")
    ttl, stale = timedelta(hours=1), timedelta(minutes=1)
    with pytest.raises(IntegrityError):
        async with database.transaction() as session:
            bad_hash = cast(str, None)
            await IdempotencyRepository(session).claim(ref, bad_hash, utcnow(), ttl, stale)


async def test_concurrent_requests_with_one_key_make_one_conversation(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server()
    async with httpx.AsyncClient(base_url=server.url) as client:
        tries = [client.post("/conversations", json={}, headers=KEY) for _ in range(6)]
        responses = await asyncio.gather(*tries)
        statuses = sorted(r.status_code for r in responses)
        assert set(statuses) <= {201, 409} and 201 in statuses
        ids = {r.json()["id"] for r in responses if r.status_code == 201}
        assert len(ids) == 1
        assert len((await client.get("/conversations")).json()["items"]) == 1


async def test_a_retried_stream_resumes_the_same_run(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(offline_delay_ms=30)
    bundle = {"messages": [{"role": "user", "text": "one two three four"}]}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        path = f"/conversations/{cid}/stream?on_disconnect=continue"
        async with client.stream("POST", path, json=bundle, headers=KEY) as first:
            run_id = first.headers["x-run-id"]
            async for _ in first.aiter_lines():
                break  # the run has started; the client "loses" the connection
        retry = await client.post(path, json=bundle, headers=KEY)
        assert retry.status_code == 200
        assert retry.headers["x-run-id"] == run_id
        events = parse(retry.text)
        assert events[0].id == f"{run_id}:1" and events[0].name == "run_started"
        assert events[-1].name == "done"
        text = "".join(e.data.get("delta", "") for e in events if e.name == "content_block_delta")
        assert text.split() == ["one", "two", "three", "four"]
        again = await client.post(path, json=bundle, headers=KEY)  # after the end: same events
        assert [e.id for e in parse(again.text)] == [e.id for e in events]
        runs = (await client.get(f"/conversations/{cid}/runs")).json()["items"]
        assert [r["id"] for r in runs] == [run_id]
        assert (await client.get(f"/conversations/{cid}")).json()["message_count"] == 2


async def test_a_retried_stream_with_last_event_id_continues_after_it(
    live_server: Callable[..., LiveServer],
) -> None:
    """fetch-event-source retries a POST with the same key and the last id it got: it gets the
    rest of the run once, no event twice (an id of another run replays from the start)."""
    server = live_server(offline_delay_ms=30)
    bundle = {"messages": [{"role": "user", "text": "one two three four five six"}]}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        path = f"/conversations/{cid}/stream?on_disconnect=continue"
        seen = []
        async with client.stream("POST", path, json=bundle, headers=KEY) as first:
            run_id = first.headers["x-run-id"]
            async for event in events(first.aiter_lines()):
                seen.append(event)
                if event.name == "content_block_delta":
                    break  # cut after the first word
        last = seen[-1].id
        retry = await client.post(path, json=bundle, headers={**KEY, "Last-Event-ID": last})
        assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
        assert retry.text.startswith("retry: ")
        rest = parse(retry.text)
        ids = [e.id for e in seen + rest]
        assert ids == [f"{run_id}:{n}" for n in range(1, len(ids) + 1)]
        text = "".join(
            e.data.get("delta", "") for e in seen + rest if e.name == "content_block_delta"
        )
        assert text == "one two three four five six" and rest[-1].name == "done"
        other = {**KEY, "Last-Event-ID": f"{'0' * 32}:3"}
        from_start = parse((await client.post(path, json=bundle, headers=other)).text)
        assert from_start[0].id == f"{run_id}:1" and from_start[-1].id == rest[-1].id


_FAIL_UPDATES = {
    "sqlite": [
        "CREATE TRIGGER parley_test_fail BEFORE UPDATE ON idempotency_keys "
        "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
    ],
    "postgres": [
        "CREATE FUNCTION parley_test_fail() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
        "CREATE TRIGGER parley_test_fail BEFORE UPDATE ON idempotency_keys "
        "FOR EACH ROW EXECUTE FUNCTION parley_test_fail()",
    ],
}
_UNDO = {
    "sqlite": ["DROP TRIGGER IF EXISTS parley_test_fail"],
    "postgres": [
        "DROP TRIGGER IF EXISTS parley_test_fail ON idempotency_keys",
        "DROP FUNCTION IF EXISTS parley_test_fail()",
    ],
}


async def test_a_stream_whose_key_cannot_be_recorded_stops_its_run(
    settings: Settings, database: Database, backend: str
) -> None:
    """The run started, then storing the key's result failed: the client gets a problem, so
    nobody will read the run — it is stopped (aborted), not left to run on, and the key is free."""

    async def run_sql(statements: list[str]) -> None:
        async with database.transaction() as session:
            for statement in statements:
                await session.execute(text(statement))

    settings = settings.model_copy(update={"offline_delay_ms": 50})
    words = " ".join(f"w{i}" for i in range(40))  # two seconds of reply, were it left to run
    bundle = {"messages": [{"role": "user", "text": words}]}
    async with app_client(settings) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        await run_sql(_FAIL_UPDATES[backend])
        try:
            failed = await client.post(f"/conversations/{cid}/stream", json=bundle, headers=KEY)
        finally:
            await run_sql(_UNDO[backend])
        assert failed.status_code >= 500
        assert failed.headers["content-type"].startswith("application/problem+json")
        status = "running"
        for _ in range(50):
            runs = (await client.get(f"/conversations/{cid}/runs")).json()["items"]
            status = runs[0]["status"]
            if status != "running":
                break
            await asyncio.sleep(0.02)
        assert status == "aborted"
        retry = await client.post(f"/conversations/{cid}/stream", json=bundle, headers=KEY)
        assert retry.status_code == 200 and "event: done" in retry.text
