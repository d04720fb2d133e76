"""GET /metrics after real requests and a real run: the series, their labels and their counts."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from app.settings import Settings
from app.storage.database import Database
from app.storage.errors import DatabaseUnavailable
from tests.api.conftest import app_client
from tests.api.sse import parse

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient) -> Series:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


async def test_a_scrape_after_a_run_carries_run_token_and_latency_series(
    client: httpx.AsyncClient,
) -> None:
    before = await scrape(client)
    conv_id = (await client.post("/conversations", json={})).json()["id"]
    body = {"messages": [{"role": "user", "text": "why is the sky blue"}]}
    response = await client.post(f"/conversations/{conv_id}/stream", json=body)
    assert parse(response.text)[-1].data["status"] == "completed"
    after = await scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    offline = {"provider": "offline"}
    assert grew("parley_runs_started_total", **offline) == 1
    assert grew("parley_runs_finished_total", provider="offline", status="completed") == 1
    assert value(after, "parley_runs_active", **offline) == value(
        before, "parley_runs_active", **offline
    )
    assert grew("parley_output_tokens_total", **offline) == 5  # the offline model: one a word
    assert grew("parley_time_to_first_token_seconds_count", **offline) == 1
    assert grew("parley_inter_token_gap_seconds_count", **offline) == 4
    stream = {"route": "/conversations/{conversation_id}/stream", "method": "POST"}
    assert grew("parley_http_requests_total", status="200", **stream) == 1
    assert grew("parley_http_request_duration_seconds_count", **stream) == 1
    assert grew("parley_http_request_duration_seconds_bucket", le="+Inf", **stream) == 1
    created = {"route": "/conversations", "method": "POST", "status": "201"}
    assert grew("parley_http_requests_total", **created) == 1


async def test_unknown_paths_share_one_route_label(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    for path in ("/nope/1", "/nope/2"):
        assert (await client.get(path)).status_code == 404
    after = await scrape(client)
    labels = {"route": "<unmatched>", "method": "GET", "status": "404"}
    assert (
        value(after, "parley_http_requests_total", **labels)
        - value(before, "parley_http_requests_total", **labels)
        == 2
    )
    assert not any("/nope/" in str(labels) for _, labels in after)


async def test_a_head_request_is_counted_under_its_route(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    assert (await client.head("/healthz")).status_code == 200
    after = await scrape(client)
    labels = {"route": "/healthz", "method": "HEAD", "status": "200"}
    assert (
        value(after, "parley_http_requests_total", **labels)
        - value(before, "parley_http_requests_total", **labels)
        == 1
    )


async def test_the_pool_gauge_counts_connections_in_use(client: httpx.AsyncClient) -> None:
    # Between requests no connection of this app is checked out — once the event writer's
    # first cycle, which starts with the app, has given its connection back.
    for _ in range(100):
        series = await scrape(client)
        if value(series, "parley_db_pool_connections_in_use") == 0:
            break
        await asyncio.sleep(0.02)
    assert value(series, "parley_db_pool_connections_in_use") == 0
    assert ("parley_db_pool_connections_in_use", frozenset()) in series


async def test_a_stream_is_timed_to_its_last_byte(database_url: str) -> None:
    settings = Settings(database_url=database_url, sse_ping_seconds=0, offline_delay_ms=40)
    stream = {"route": "/conversations/{conversation_id}/stream", "method": "POST"}
    async with app_client(settings) as client:
        before = value(await scrape(client), "parley_http_request_duration_seconds_sum", **stream)
        conv_id = (await client.post("/conversations", json={})).json()["id"]
        body = {"messages": [{"role": "user", "text": "one two three four five"}]}
        await client.post(f"/conversations/{conv_id}/stream", json=body)
        after = value(await scrape(client), "parley_http_request_duration_seconds_sum", **stream)
    assert after - before >= 5 * 0.040  # five words, each 40 ms after the one before


async def test_connections_that_failed_to_open_again_are_not_counted_as_given_back(
    tmp_path: Path,
) -> None:
    """SQLAlchemy "checks in" a pooled connection it could not open again (the database went
    away): the gauge fell by one at each, and stayed below zero once the database was back."""
    in_use = "parley_db_pool_connections_in_use"
    before = REGISTRY.get_sample_value(in_use)
    database = Database(f"sqlite+aiosqlite:///{tmp_path}/gone/parley.db")
    try:
        async with database.session() as session:
            await session.execute(text("SELECT 1"))
            await session.invalidate()  # the pool must open this connection again
        shutil.rmtree(tmp_path / "gone")  # and now it cannot
        for _ in range(3):
            with pytest.raises(DatabaseUnavailable):
                async with database.session() as session:
                    await session.execute(text("SELECT 1"))
        assert REGISTRY.get_sample_value(in_use) == before
    finally:
        await database.dispose()


async def test_unknown_methods_share_one_method_label(client: httpx.AsyncClient) -> None:
    """uvicorn's h11 parser lets any token through as the method: each one made new series."""
    labels = {"route": "/conversations", "method": "other", "status": "405"}
    before = value(await scrape(client), "parley_http_requests_total", **labels)
    for method in ("M1", "M2", "PROPFIND"):
        assert (await client.request(method, "/conversations")).status_code == 405
    after = await scrape(client)
    assert value(after, "parley_http_requests_total", **labels) - before == 3
    assert not any(("method", m) in labels for _, labels in after for m in ("M1", "M2"))


async def test_answers_given_before_routing_count_under_their_route(
    client: httpx.AsyncClient,
) -> None:
    """A body too large or not strict JSON is refused before the router runs: those answers
    were counted under ``<unmatched>``, not under the route they were sent to."""
    conv_id = (await client.post("/conversations", json={})).json()["id"]
    deltas = {"route": "/conversations/{conversation_id}/deltas", "method": "POST"}
    before = await scrape(client)
    headers = {"content-type": "application/json"}
    too_large = b'{"messages": [' + b" " * 2_000_000 + b"]}"
    nul = b'{"messages": [{"role": "user", "text": "\\u0000"}]}'
    assert (
        await client.post(f"/conversations/{conv_id}/deltas", content=too_large, headers=headers)
    ).status_code == 413
    assert (
        await client.post(f"/conversations/{conv_id}/deltas", content=nul, headers=headers)
    ).status_code == 422
    after = await scrape(client)
    for status in ("413", "422"):
        grew = value(after, "parley_http_requests_total", status=status, **deltas) - value(
            before, "parley_http_requests_total", status=status, **deltas
        )
        assert grew == 1, status
    # a fixed path wins over a template that matches it too, as in the router
    imported = {"route": "/conversations/import", "method": "POST", "status": "422"}
    assert (
        await client.post("/conversations/import", content=nul, headers=headers)
    ).status_code == 422
    last = await scrape(client)
    grew = value(last, "parley_http_requests_total", **imported) - value(
        after, "parley_http_requests_total", **imported
    )
    assert grew == 1
