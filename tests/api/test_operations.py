"""Liveness and readiness: /readyz is 503 on a database behind the migrations or not answering;
HEAD wherever GET is served (probes, ``curl -I``)."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from alembic import command
from alembic.config import Config

from app.main import YOUNG_GC_THRESHOLD, create_app
from app.settings import MAX_DURATION_SECONDS, Settings
from app.storage.schema import head_revisions
from tests.api.conftest import app_client


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


async def get(settings: Settings, path: str) -> httpx.Response:
    async with app_client(settings) as client:
        return await client.get(path)


async def test_head_answers_as_get_without_a_body_but_never_starts_a_run(
    client: httpx.AsyncClient,
) -> None:
    conv = (await client.post("/conversations", json={"system_prompt": "s"})).json()
    await client.post(
        f"/conversations/{conv['id']}/deltas", json={"messages": [{"role": "user", "text": "hi"}]}
    )
    for path in ("/healthz", "/readyz", "/conversations", f"/conversations/{conv['id']}", "/"):
        got, head = await client.get(path), await client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"", path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == str(len(got.content)), path
    stream = await client.head(f"/conversations/{conv['id']}/stream")
    assert stream.status_code == 405
    assert stream.headers["allow"] == "GET, POST"
    assert (await client.get(f"/conversations/{conv['id']}/runs")).json()["items"] == []


async def test_healthz_and_readyz_on_a_migrated_database(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "schema_revision": sorted(head_revisions())}


async def test_readyz_is_503_one_revision_behind(
    blank_database_url: str, alembic_config: Callable[[str], Config]
) -> None:
    config = alembic_config(blank_database_url)
    await asyncio.to_thread(command.upgrade, config, "head")
    settings = Settings(database_url=blank_database_url)
    assert (await get(settings, "/readyz")).status_code == 200
    await asyncio.to_thread(command.downgrade, config, "-1")

    response = await get(settings, "/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == "/problems/not_ready" and problem["reason"] == "schema"
    assert all(head in problem["detail"] for head in head_revisions())
    assert problem["instance"] == response.headers["x-request-id"]
    assert (await get(settings, "/healthz")).status_code == 200  # alive all the same


async def test_readyz_is_503_while_the_process_drains(settings: Settings) -> None:
    """After SIGTERM a replica leaves the rotation: a probe on a connection kept alive still
    reached it during the drain and was told "ready"."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            assert (await client.get("/readyz")).status_code == 200
            app.state.services.manager.shutting_down = True  # as the SIGTERM watcher does
            response = await client.get("/readyz")
            assert (await client.get("/healthz")).status_code == 200  # alive all the same
    assert response.status_code == 503
    assert response.json()["reason"] == "shutting_down"
    assert response.json()["code"] == "not_ready"


async def test_readyz_is_503_when_the_database_does_not_answer() -> None:
    """No server at all on that port: no PostgreSQL needed for this one."""
    url = f"postgresql+asyncpg://parley@127.0.0.1:{closed_port()}/parley"
    response = await get(Settings(database_url=url), "/readyz")
    assert response.status_code == 503
    assert response.json()["reason"] == "database"
    assert "does not answer" in response.json()["detail"]


async def database_unavailable_on_four_routes(
    database_url: str, caplog: pytest.LogCaptureFixture, text: str = "hi"
) -> tuple[list[dict[str, Any]], list[str]]:
    """Create, list, read and stream on ``database_url``: each answer's problem (checked to be
    a 503 ``database_unavailable`` with ``Retry-After``), and the lines logged for them (checked
    to be warnings without a traceback)."""
    body = {"messages": [{"role": "user", "text": text}]}
    async with app_client(Settings(database_url=database_url)) as client:
        responses = [
            await client.post("/conversations", json={"metadata": {"title": text}}),
            await client.get("/conversations"),
            await client.get("/conversations/" + "a" * 32),
            await client.post("/conversations/" + "a" * 32 + "/stream", json=body),
        ]
    problems = []
    for response in responses:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "2"
        problems.append(response.json())
        assert problems[-1]["code"] == "database_unavailable"
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("app.api"))
    return problems, [r.getMessage() for r in caplog.records if r.name == "app.api.problems"]


async def test_routes_answer_503_database_unavailable_when_the_database_does_not_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A clear 503 the client may retry (not a 500 and a traceback a request), the cause in one
    log line for the operator and not in the answer."""
    url = f"postgresql+asyncpg://parley@127.0.0.1:{closed_port()}/parley"
    problems, lines = await database_unavailable_on_four_routes(url, caplog)
    for problem in problems:
        assert "127.0.0.1" not in problem["detail"] and "Errno" not in problem["detail"]
    assert len(lines) == 4 and all("ConnectionRefusedError" in line for line in lines)


async def test_routes_answer_503_saying_so_on_a_database_that_is_not_migrated(
    blank_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Started without the migrations (no PARLEY_MIGRATE_ON_START, no ``make migrate``): every
    route that reads or writes is a 503 telling the migrations are missing, not a 500 and a
    traceback; the log has the driver's one line, without the statement or its values."""
    problems, lines = await database_unavailable_on_four_routes(
        blank_database_url, caplog, text="secret words"
    )
    assert all("migrations" in problem["detail"] for problem in problems)
    assert len(lines) == 4
    for line in lines:
        assert "\n" not in line and "[SQL" not in line and "secret words" not in line
        assert "no such table" in line or "does not exist" in line


async def test_migrate_on_start_brings_a_blank_database_to_the_head(
    blank_database_url: str,
) -> None:
    settings = Settings(database_url=blank_database_url)
    assert (await get(settings, "/readyz")).status_code == 503
    migrating = Settings(database_url=blank_database_url, migrate_on_start=True)
    assert (await get(migrating, "/readyz")).status_code == 200


async def test_a_started_app_has_made_its_provider_clients(settings: Settings) -> None:
    """Start-up makes the SDK clients (tens of ms each: TLS contexts) that the first request
    of each provider made before; shutdown closes them."""
    keys = {"openai_api_key": "sk-x", "anthropic_api_key": "sk-y"}
    app = create_app(Settings(**{**settings.model_dump(), **keys}))
    selector = app.state.services.configs.selector
    adapters = [selector.adapter(name) for name in ("openai", "anthropic")]
    assert [a._client for a in adapters] == [None, None]
    async with app.router.lifespan_context(app):
        clients = [a._client for a in adapters]
        assert [type(c).__name__ for c in clients] == ["AsyncOpenAI", "AsyncAnthropic"]
    assert all(c.is_closed() for c in clients)


async def test_serving_keeps_the_start_up_heap_out_of_the_collector(settings: Settings) -> None:
    """While the app serves, what start-up made is frozen (a full collection does not walk it)
    and the youngest generation is collected less often; shutdown puts both back."""
    before = gc.get_threshold()
    assert before[0] != YOUNG_GC_THRESHOLD
    async with app_client(settings) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert gc.get_freeze_count() > 10_000
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_the_collector_is_put_back_when_the_last_of_two_apps_stops(
    settings: Settings,
) -> None:
    """Two apps in one process, the first started stopping first: the second still serves with
    the start-up heap frozen; once it stops too, the collector is as it was."""
    before = gc.get_threshold()
    first, second = app_client(settings), app_client(settings)
    await first.__aenter__()
    try:
        client = await second.__aenter__()
    finally:
        await first.__aexit__(None, None, None)
    try:
        assert (await client.get("/healthz")).status_code == 200
        assert gc.get_freeze_count() > 10_000
        assert gc.get_threshold()[0] == YOUNG_GC_THRESHOLD
    finally:
        await second.__aexit__(None, None, None)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_the_longest_durations_the_settings_allow_still_serve(database_url: str) -> None:
    """The bound on the durations that dates are computed from is one the dates can hold:
    a lease, an idempotency TTL and an event retention of ten years serve as usual."""
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        run_lease_seconds=MAX_DURATION_SECONDS,
        idempotency_ttl_seconds=MAX_DURATION_SECONDS,
        run_event_retention_seconds=MAX_DURATION_SECONDS,
    )
    async with app_client(settings) as client:
        created = await client.post("/conversations", json={}, headers={"Idempotency-Key": "k"})
        assert created.status_code == 201, created.text
        again = await client.post("/conversations", json={}, headers={"Idempotency-Key": "k"})
        assert again.json()["id"] == created.json()["id"]
        stream = await client.post(
            f"/conversations/{created.json()['id']}/stream",
            json={"messages": [{"role": "user", "text": "a b"}]},
        )
        assert stream.status_code == 200 and '"status":"completed"' in stream.text
