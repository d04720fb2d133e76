"""Deliveries from the outbox (both databases): every run ending reaches a receiver that fails,
times out and redirects first, signed (verified with standardwebhooks' ``Webhook.verify``), in
order per conversation; listing, replay, the events filter, and ``enqueue`` called directly."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import httpx2
from standardwebhooks import Webhook

from app.storage import Database
from app.webhooks import enqueue
from tests.api.conftest import wait_for
from tests.api.sse import parse
from tests.webhooks.conftest import register
from tests.webhooks.receiver import Receiver

TOOL = {"name": "lookup", "description": "Look it up.", "parameters": {"type": "object"}}


async def run_once(client: httpx.AsyncClient, conv_id: str, text: str) -> dict[str, Any]:
    """Stream one run of ``text``; its ``done`` event's data (with the run id)."""
    response = await client.post(
        f"/conversations/{conv_id}/stream", json={"messages": [{"role": "user", "text": text}]}
    )
    assert response.status_code == 200, response.text
    events = parse(response.text)
    started = next(e for e in events if e.name == "run_started")
    return {**events[-1].data, "run_id": started.data["run_id"]}


async def new_conversation(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    conv_id: str = response.json()["id"]
    return conv_id


async def test_a_failing_slow_redirecting_receiver_gets_each_ending_signed_and_in_order(
    client: httpx.AsyncClient,
) -> None:
    with Receiver(["fail", "timeout", "redirect", "fail"], slow_seconds=1.0) as receiver:
        hook = await register(client, receiver.url)
        plain = await new_conversation(client)
        tools = await new_conversation(client, config={"client_tools": [TOOL]})
        runs = [
            await run_once(client, plain, "one"),
            await run_once(client, tools, 'call lookup {"q": 1}'),
            await run_once(client, plain, "two"),
            await run_once(client, plain, "three"),
        ]
        assert [r["status"] for r in runs] == ["completed", "requires_action"] + ["completed"] * 2

        assert await wait_for(lambda: _count(receiver, len(runs)), within=15)
        bodies = list(receiver.verified(hook["secret"]))
        by_run = {b["data"]["run_id"]: b for b in bodies}
        assert set(by_run) == {r["run_id"] for r in runs}  # every ending, at least once
        for run in runs:
            body = by_run[run["run_id"]]
            assert body["type"] == f"run.{run['status']}"
            assert body["data"]["status"] == run["status"]
            assert set(body["data"]) == {"conversation_id", "run_id", "status"}  # no text
        # in order per conversation: the plain conversation's runs as they ran
        plain_order = [b["data"]["run_id"] for b in bodies if b["data"]["conversation_id"] == plain]
        assert plain_order == [r["run_id"] for r in runs if r is not runs[1]]
        # the failures were retried with the same webhook-id; the redirect was not followed
        assert not any(r.path.endswith("/moved") for r in receiver.received)
        steps = [r.step for r in receiver.received]
        assert steps[:4] == ["fail", "timeout", "redirect", "fail"]
        retried = receiver.received[0].message_id
        assert [r.message_id for r in receiver.received].count(retried) >= 2
        # a tampered body or another secret does not verify
        request = receiver.accepted()[0]
        other = Webhook("whsec_" + "A" * 44)
        for secret, body_bytes in ((other, request.body), (Webhook(hook["secret"]), b"{}")):
            try:
                secret.verify(body_bytes, request.headers)
            except Exception:
                continue
            raise AssertionError("a bad signature verified")

        path = f"/webhooks/{hook['id']}/deliveries"

        async def all_delivered() -> Any:  # recorded once the receiver's answer is read
            items = (await client.get(path)).json()["items"]
            return items if all(d["status"] == "delivered" for d in items) else None

        listed = await wait_for(all_delivered, within=5)
        assert listed and {d["run_id"] for d in listed} == set(by_run)
        first = next(d for d in listed if d["webhook_id"] == retried)
        assert first["attempts"] >= 2 and first["last_status_code"] in (200, 204)


async def _count(receiver: Receiver, runs: int) -> bool:
    return len({r.json()["data"]["run_id"] for r in receiver.accepted()}) >= runs


async def test_a_background_run_ending_arrives_within_a_second(database_url: str) -> None:
    from app.settings import Settings
    from tests.api.conftest import app_client

    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        webhook_allow_private=True,
        offline_delay_ms=20,
    )  # the default poll: 0.5 s
    with Receiver() as receiver:
        async with app_client(settings) as client:
            hook = await register(client, receiver.url, ["run.completed"])
            conv_id = await new_conversation(client)
            url = f"/conversations/{conv_id}/stream?on_disconnect=continue"
            async with client.stream(
                "POST", url, json={"messages": [{"role": "user", "text": "a b c d e"}]}
            ) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("event: content_block_delta"):
                        break  # the client goes away; the run goes on
            run = await wait_for(lambda: _finished(client, conv_id), within=10)
            ended_at = time.monotonic()
            assert await wait_for(lambda: _count(receiver, 1), within=5)
            took = receiver.accepted()[0].at - ended_at
            print(f"\nthe ending arrived {took:.3f} s after the run was seen ended")
            assert took < 1.0, f"the ending arrived {took:.2f} s after the run ended"
            (body,) = receiver.verified(hook["secret"])
            assert body["data"] == {
                "conversation_id": conv_id,
                "run_id": run["id"],
                "status": "completed",
            }


async def _finished(client: httpx.AsyncClient, conv_id: str) -> dict[str, Any] | None:
    runs = (await client.get(f"/conversations/{conv_id}/runs")).json()["items"]
    return runs[0] if runs and runs[0]["status"] != "running" else None


async def test_only_the_events_asked_for_and_only_to_the_owners_endpoints(
    client: httpx.AsyncClient,
) -> None:
    with Receiver() as wanted, Receiver() as other, Receiver() as bobs:
        await register(client, wanted.url, ["run.completed"])
        await register(client, other.url, ["run.failed", "run.aborted"])
        await register(client, bobs.url, ["run.completed"], Authorization="Bearer bob")
        off = await register(client, other.url, ["run.completed"])
        await client.patch(f"/webhooks/{off['id']}", json={"enabled": False})
        conv_id = await new_conversation(client)
        await run_once(client, conv_id, "hello")
        assert await wait_for(lambda: _count(wanted, 1), within=5)
        await asyncio.sleep(0.5)
        assert other.received == [] and bobs.received == []


async def test_replay_sends_it_again_with_the_same_webhook_id(client: httpx.AsyncClient) -> None:
    with Receiver() as receiver:
        hook = await register(client, receiver.url, ["run.completed"])
        conv_id = await new_conversation(client)
        await run_once(client, conv_id, "hello")
        path = f"/webhooks/{hook['id']}/deliveries"

        async def delivered() -> Any:
            items = (await client.get(path)).json()["items"]
            return items[0] if items and items[0]["status"] == "delivered" else None

        delivery = await wait_for(delivered, within=5)
        replayed = await client.post(f"{path}/{delivery['id']}/replay")
        assert replayed.status_code == 202 and replayed.json()["status"] == "pending"
        assert await wait_for(lambda: _requests(receiver, 2), within=5)
        first, second = receiver.accepted()
        assert first.message_id == second.message_id == delivery["webhook_id"]
        assert first.body == second.body
        missing = await client.post(f"{path}/{'0' * 32}/replay")
        assert missing.status_code == 404 and missing.json()["code"] == "delivery_not_found"


async def _requests(receiver: Receiver, count: int) -> bool:
    return len(receiver.accepted()) >= count


async def test_enqueue_called_in_a_transaction_sends_only_what_committed(
    client: httpx.AsyncClient, database: Database
) -> None:
    """``enqueue`` as the title writer calls it: in its own transaction, sent once committed."""
    with Receiver() as receiver:
        hook = await register(client, receiver.url, ["conversation.titled"])
        conv_id = await new_conversation(client)
        data = {"conversation_id": conv_id}
        async with database.session() as session:  # rolled back: nothing is sent
            assert await enqueue(session, "anonymous", "conversation.titled", {**data, "x": 1})
        async with database.transaction() as session:
            assert await enqueue(session, "anonymous", "conversation.titled", data) == 1
            assert await enqueue(session, "someone-else", "conversation.titled", data) == 0
        assert await wait_for(lambda: _requests(receiver, 1), within=5)
        await asyncio.sleep(0.3)
        (body,) = receiver.verified(hook["secret"])
        assert body["type"] == "conversation.titled" and body["data"] == data


async def test_a_receiver_that_never_answers_well_is_given_up_after_the_retry_period(
    database_url: str,
) -> None:
    from app.settings import Settings
    from tests.api.conftest import app_client
    from tests.webhooks.conftest import FAST

    settings = Settings(
        database_url=database_url, sse_ping_seconds=0, **{**FAST, "webhook_retry_seconds": 1}
    )  # type: ignore[arg-type]
    with Receiver(["fail"] * 1000) as receiver:
        async with app_client(settings) as client:
            hook = await register(client, receiver.url, ["run.completed"])
            await run_once(client, await new_conversation(client), "hello")
            path = f"/webhooks/{hook['id']}/deliveries"

            async def failed() -> Any:
                items = (await client.get(path)).json()["items"]
                return items if items and items[0]["status"] == "failed" else None

            (delivery,) = await wait_for(failed, within=10)
            assert delivery["attempts"] >= 3 and delivery["next_attempt_at"] is None
            assert delivery["last_status_code"] == 500 and delivery["last_error"] == "HTTP 500"
            assert len(receiver.received) == delivery["attempts"]


async def test_every_kind_of_ending_is_sent_as_its_event(database_url: str) -> None:
    from app.settings import Settings
    from tests.api.conftest import app_client
    from tests.webhooks.conftest import FAST

    settings = Settings(database_url=database_url, sse_ping_seconds=0, offline_delay_ms=20, **FAST)  # type: ignore[arg-type]
    with Receiver() as receiver:
        async with app_client(settings) as client:
            hook = await register(client, receiver.url)
            done = await run_once(client, await new_conversation(client), "hello")
            tools = await new_conversation(client, config={"client_tools": [TOOL]})
            waiting = await run_once(client, tools, 'call lookup {"q": 1}')
            limited = await new_conversation(
                client, config={"tools": ["add_numbers"], "max_tool_rounds": 0}
            )
            failed = await run_once(client, limited, 'call add_numbers {"numbers": [1]}')
            cancelled = await new_conversation(client)
            words = " ".join(f"w{i}" for i in range(200))  # 4 s: cancelled long before
            streaming = asyncio.create_task(run_once(client, cancelled, words))

            async def running() -> bool:
                runs = (await client.get(f"/conversations/{cancelled}/runs")).json()["items"]
                return bool(runs) and runs[0]["status"] == "running"

            assert await wait_for(running, within=5)
            assert (await client.post(f"/conversations/{cancelled}/cancel")).status_code == 202
            assert (await streaming)["status"] == "aborted"
            assert await wait_for(lambda: _count(receiver, 4), within=10)
            bodies = {b["data"]["conversation_id"]: b for b in receiver.verified(hook["secret"])}
    assert [r["status"] for r in (done, waiting, failed)] == [
        "completed",
        "requires_action",
        "failed",
    ]
    assert bodies[tools]["type"] == "run.requires_action"
    assert bodies[limited]["type"] == "run.failed"
    assert bodies[limited]["data"]["error_code"] == "max_tool_rounds"
    assert bodies[cancelled]["type"] == "run.aborted"
    assert {b["data"]["run_id"] for b in bodies.values()} >= {done["run_id"], failed["run_id"]}


async def test_made_deliveries_are_pruned_and_pending_ones_kept(database: Database) -> None:
    from datetime import timedelta

    from app.storage import utcnow
    from app.storage.webhooks import Attempt, WebhookRepository

    async with database.transaction() as session:
        repo = WebhookRepository(session)
        await repo.create_endpoint("o", "http://127.0.0.1:9/", ["conversation.titled"], "whsec_AA")
        for n in range(3):
            await enqueue(session, "o", "conversation.titled", {"conversation_id": f"c{n}"})
    async with database.transaction() as session:
        repo = WebhookRepository(session)
        now = utcnow()
        claims = await repo.claim(now, now + timedelta(seconds=30), 10)
        assert len(claims) == 3 and not await repo.any_due(now)
        await repo.record(claims[0], Attempt(True, 204, None, None))
        await repo.record(claims[1], Attempt(False, 500, "HTTP 500", None))
        assert await repo.prune(utcnow() + timedelta(seconds=1)) == 2
        assert await repo.any_due(utcnow()) is False  # the third is still held
        assert await repo.prune(utcnow() + timedelta(seconds=1)) == 0


async def test_an_attempt_goes_to_the_address_the_guard_approved(settings: Any) -> None:
    """A delivery connects to the checked address, not to what the name resolves to later
    (DNS rebinding): the name stays the Host header (and, for https, the certificate's name)."""
    from datetime import timedelta

    from app.storage import utcnow
    from app.storage.webhooks import Claimed
    from app.webhooks.delivery import Deliverer, pinned

    url, headers, extensions = pinned("https://hooks.example.com:8443/in?x=1", "93.184.216.34")
    assert str(url) == "https://93.184.216.34:8443/in?x=1"
    assert headers == {"host": "hooks.example.com:8443"}
    assert extensions == {"sni_hostname": "hooks.example.com"}
    assert pinned("http://127.0.0.1:9/x", None) == (httpx2.URL("http://127.0.0.1:9/x"), {}, {})

    with Receiver() as receiver:
        port = receiver.url.split(":")[2].split("/")[0]
        now = utcnow()
        claimed = Claimed(
            seq=1,
            id="d",
            message_id="msg_1",
            payload='{"type":"run.completed"}',
            attempts=0,
            created_at=now,
            expires_at=now + timedelta(hours=1),
            url=f"http://receiver.invalid:{port}/hooks",  # a name that resolves nowhere
            secret="whsec_" + "A" * 44,
            token="t",
        )
        deliverer = Deliverer(settings, Database(settings.database_url))
        deliverer.start()
        try:
            assert await deliverer.post(claimed, "127.0.0.1") == 204
        finally:
            await deliverer.close()
        (request,) = receiver.received
        assert request.headers["host"] == f"receiver.invalid:{port}"
        Webhook(claimed.secret).verify(request.body, request.headers)


async def test_a_url_that_turned_private_is_refused_at_delivery(database_url: str) -> None:
    from app.settings import Settings
    from tests.api.conftest import app_client
    from tests.webhooks.conftest import FAST

    with Receiver() as receiver:
        allowed = Settings(database_url=database_url, **FAST)  # type: ignore[arg-type]
        async with app_client(allowed) as client:
            hook = await register(client, receiver.url, ["run.completed"])
        strict = Settings(database_url=database_url, **{**FAST, "webhook_allow_private": False})  # type: ignore[arg-type]
        async with app_client(strict) as client:
            await run_once(client, await new_conversation(client), "hello")
            path = f"/webhooks/{hook['id']}/deliveries"

            async def attempted() -> Any:
                items = (await client.get(path)).json()["items"]
                return items if items and items[0]["attempts"] >= 1 else None

            (delivery,) = await wait_for(attempted, within=5)
        assert delivery["status"] == "pending" and delivery["last_status_code"] is None
        assert delivery["last_error"].startswith("refused: the host '127.0.0.1' resolves to")
        assert receiver.received == []


async def test_a_disabled_endpoints_pending_deliveries_wait_until_it_is_enabled(
    database: Database,
) -> None:
    from datetime import timedelta

    from app.storage import utcnow
    from app.storage.webhooks import WebhookRepository

    async with database.transaction() as session:
        repo = WebhookRepository(session)
        hook = await repo.create_endpoint("o", "http://127.0.0.1:9/", ["run.failed"], "whsec_AA")
        await enqueue(session, "o", "run.failed", {"conversation_id": "c", "run_id": "r"})
        await repo.update_endpoint("o", hook.id, {"enabled": False})
    async with database.transaction() as session:
        repo = WebhookRepository(session)
        now = utcnow()
        assert not await repo.any_due(now)
        assert await repo.claim(now, now + timedelta(seconds=30), 10) == []
        await repo.update_endpoint("o", hook.id, {"enabled": True})
        assert len(await repo.claim(now, now + timedelta(seconds=30), 10)) == 1


async def test_a_replay_while_the_first_attempt_is_in_flight_is_not_overwritten(
    client: httpx.AsyncClient,
) -> None:
    with Receiver(delay_seconds=0.3) as receiver:
        hook = await register(client, receiver.url, ["run.completed"])
        await run_once(client, await new_conversation(client), "hello")
        assert await wait_for(lambda: _in_flight(receiver), within=5)
        path = f"/webhooks/{hook['id']}/deliveries"
        (delivery,) = (await client.get(path)).json()["items"]
        assert delivery["status"] == "pending"  # its first attempt is being answered
        replayed = await client.post(f"{path}/{delivery['id']}/replay")
        assert replayed.status_code == 202
        assert await wait_for(lambda: _requests(receiver, 2), within=5)
        first, second = receiver.accepted()
        assert first.message_id == second.message_id == delivery["webhook_id"]


async def _in_flight(receiver: Receiver) -> bool:
    return bool(receiver.in_flight)


async def test_a_url_the_client_cannot_send_to_is_refused_and_never_stops_the_others(
    client: httpx.AsyncClient, settings: Any
) -> None:
    """`http://xn--/` passed the guard but made httpx raise (an IDNA error) inside the
    deliverer's round: the whole batch failed, its other deliveries unrecorded, every round."""
    from sqlalchemy import update

    from app.storage.webhook_tables import WebhookEndpointRow

    for bad in ("http://xn--/", "http://xn--a.com/", "http://ab\u200b.com/"):
        body = {"url": bad, "events": ["run.completed"]}
        refused = await client.post("/webhooks", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "webhook_url_refused"
    with Receiver() as receiver:
        await register(client, receiver.url, ["run.completed"])
        stale = await register(client, receiver.url, ["run.completed"])
        # An endpoint stored before the guard refused such URLs.
        database = Database(settings.database_url)
        try:
            async with database.transaction() as session:
                table = WebhookEndpointRow.__table__
                await session.execute(
                    update(table).where(table.c.id == stale["id"]).values(url="http://xn--/")
                )
        finally:
            await database.dispose()
        await run_once(client, await new_conversation(client), "hello")
        assert await wait_for(lambda: _count(receiver, 1), within=5)
        path = f"/webhooks/{stale['id']}/deliveries"

        async def attempted() -> Any:
            items = (await client.get(path)).json()["items"]
            return items if items and items[0]["attempts"] >= 1 else None

        (delivery,) = await wait_for(attempted, within=5)
        assert delivery["status"] == "pending"
        assert delivery["last_error"].startswith("refused: 'xn--' is not a host name")
