"""The runs of a conversation over HTTP: listing, one run, resuming with Last-Event-ID."""

from __future__ import annotations

import httpx

from app.main import create_app
from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse
from tests.api.test_streams import create, stream

PROBLEM = "application/problem+json"


async def test_runs_are_listed_newest_first_and_read_one_by_one(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    first = await stream(client, conv_id, {"messages": [{"role": "user", "text": "one"}]})
    second = await stream(client, conv_id, {"messages": [{"role": "user", "text": "two"}]})
    ids = [events[0].data["run_id"] for events in (second, first)]
    page = (await client.get(f"/conversations/{conv_id}/runs", params={"limit": 1})).json()
    assert [r["id"] for r in page["items"]] == ids[:1]
    rest = (
        await client.get(f"/conversations/{conv_id}/runs", params={"cursor": page["next_cursor"]})
    ).json()
    assert [r["id"] for r in rest["items"]] == ids[1:] and rest["next_cursor"] is None
    run = (await client.get(f"/conversations/{conv_id}/runs/{ids[0]}")).json()
    assert run["status"] == "completed" and run["on_disconnect"] == "cancel"
    assert run["usage"] == {
        "input_tokens": run["usage"]["input_tokens"],
        "output_tokens": 1,
        "reasoning_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert run["usage"]["input_tokens"] > 0
    assert run["finished_at"] is not None and run["cancel_requested"] is False
    missing = await client.get(f"/conversations/{conv_id}/runs/{'0' * 32}")
    assert missing.status_code == 404 and missing.json()["code"] == "run_not_found"
    assert (await client.get(f"/conversations/{conv_id}/runs/nope")).status_code == 404
    other = await client.get(
        f"/conversations/{conv_id}/runs", headers={"Authorization": "Bearer someone-else"}
    )
    assert other.status_code == 404


async def test_post_runs_starts_a_background_run_that_a_get_follows(
    settings: Settings,
) -> None:
    slow = settings.model_copy(update={"offline_delay_ms": 30})
    async with app_client(slow) as client:
        conv_id = await create(client)
        bundle = {"messages": [{"role": "user", "text": "one two three"}]}
        started = await client.post(f"/conversations/{conv_id}/runs", json=bundle)
        assert started.status_code == 202, started.text
        run = started.json()
        assert run["conversation_id"] == conv_id and run["on_disconnect"] == "continue"
        assert run["status"] == "running"
        assert started.headers["location"] == f"/conversations/{conv_id}/runs/{run['id']}"
        busy = await client.post(f"/conversations/{conv_id}/runs")
        assert busy.status_code == 409 and busy.json()["run_id"] == run["id"]
        follow = await client.get(f"/conversations/{conv_id}/stream")
        events = parse(follow.text)
        assert follow.headers["x-run-id"] == run["id"] and events[0].name == "run_started"
        assert events[-1].name == "done" and events[-1].data["status"] == "completed"
        stored = (await client.get(started.headers["location"])).json()
        assert stored["id"] == run["id"] and stored["status"] == "completed"
        await client.post(f"/conversations/{conv_id}/deltas", json=bundle)
        second = await client.post(f"/conversations/{conv_id}/runs")  # an empty body works
        assert second.status_code == 202 and second.json()["id"] != run["id"]
        runs = (await client.get(f"/conversations/{conv_id}/runs")).json()["items"]
        assert len(runs) == 2


async def test_resume_replays_the_rest_by_header_or_query(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    events = await stream(client, conv_id, {"messages": [{"role": "user", "text": "a b c"}]})
    url = f"/conversations/{conv_id}/stream"
    by_header = await client.get(url, headers={"Last-Event-ID": events[3].id or ""})
    by_query = await client.get(url, params={"last_event_id": events[3].id})
    for response in (by_header, by_query):
        assert response.status_code == 200
        assert [(e.id, e.name, e.data) for e in parse(response.text)] == [
            (e.id, e.name, e.data) for e in events[4:]
        ]
    state = (await client.get(f"/conversations/{conv_id}")).json()
    assert state["message_count"] == 2  # a resume never runs the model


async def test_resume_refusals_are_problems(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    other = await create(client)
    events = await stream(client, conv_id, {"messages": [{"role": "user", "text": "hi"}]})
    url = f"/conversations/{conv_id}/stream"
    bad = await client.get(url, headers={"Last-Event-ID": "7"})
    assert bad.status_code == 400 and bad.headers["content-type"] == PROBLEM
    assert bad.json()["code"] == "bad_last_event_id"
    elsewhere = await client.get(
        f"/conversations/{other}/stream", headers={"Last-Event-ID": events[1].id or ""}
    )
    assert elsewhere.status_code == 404 and elsewhere.json()["type"] == "/problems/run_not_found"


async def test_a_shutting_down_server_refuses_new_runs_with_503(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            conv_id = await create(client)
            app.state.services.manager.shutting_down = True
            response = await client.post(
                f"/conversations/{conv_id}/stream",
                json={"messages": [{"role": "user", "text": "hi"}]},
            )
            assert response.status_code == 503
            assert response.headers["retry-after"] == "2"
            assert response.json()["code"] == "shutting_down"
            state = (await client.get(f"/conversations/{conv_id}")).json()
            assert state["message_count"] == 0  # nothing was applied


async def test_a_run_asked_for_the_moment_the_server_is_told_to_stop_is_a_503(
    settings: Settings,
) -> None:
    """Between SIGTERM and the drain noticing it (a tenth of a second) a new run was started,
    only to be interrupted at once: it is refused like any run asked for after the drain."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            conv_id = await create(client)
            # What uvicorn's SIGTERM handler's flag says, before the drain has begun.
            app.state.services.manager.exit_requested = lambda: True
            response = await client.post(
                f"/conversations/{conv_id}/stream",
                json={"messages": [{"role": "user", "text": "hi"}]},
            )
            assert response.status_code == 503, response.text
            assert response.json()["code"] == "shutting_down"
            assert (await client.get(f"/conversations/{conv_id}/runs")).json()["items"] == []


async def test_head_on_the_stream_starts_no_run(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    await client.post(
        f"/conversations/{conv_id}/deltas", json={"messages": [{"role": "user", "text": "hi"}]}
    )
    response = await client.head(f"/conversations/{conv_id}/stream")
    assert response.status_code == 405
    assert (await client.get(f"/conversations/{conv_id}/runs")).json()["items"] == []
