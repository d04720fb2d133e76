"""Titles made after the first completed reply (PARLEY_AUTO_TITLE) with the offline model: on
one process and on two sharing the database (exactly one title), counted in the run's usage,
never failing the run; on both databases."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from prometheus_client import REGISTRY

from app.settings import Settings
from tests.api.conftest import app_client, wait_for

WORDS = "Why is the sky so very blue at noon"


async def start(client: httpx.AsyncClient, cid: str, text: str) -> httpx.Response:
    url = f"/conversations/{cid}/stream"
    response = await client.post(url, json={"messages": [{"role": "user", "text": text}]})
    assert response.status_code == 200 and "event: done" in response.text, response.text
    return response


async def title_of(client: httpx.AsyncClient, cid: str) -> Any:
    return (await client.get(f"/conversations/{cid}")).json()["title"]


def titles(outcome: str) -> float:
    return REGISTRY.get_sample_value("parley_titles_total", {"outcome": outcome}) or 0.0


async def test_a_title_is_made_from_the_first_words_and_counted_in_the_runs_usage(
    settings: Settings,
) -> None:
    async with app_client(settings.model_copy(update={"auto_title": True})) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        await start(client, cid, WORDS)
        assert await wait_for(lambda: title_of(client, cid)) == "Why is the sky so very"
        conv = (await client.get(f"/conversations/{cid}")).json()
        assert conv["version"] == 3  # the delta and the reply; the made title moves nothing
        [run] = (await client.get(f"/conversations/{cid}/runs")).json()["items"]
        # The reply echoes the 9 words, and so does the title's call (cut to 6 afterwards).
        assert run["usage"]["output_tokens"] == 2 * len(WORDS.split())
        await start(client, cid, "another question entirely")
        await asyncio.sleep(0.1)
        assert await title_of(client, cid) == "Why is the sky so very"
        found = (await client.get("/conversations", params={"q": "sky"})).json()["items"]
        assert [c["id"] for c in found] == [cid]


async def test_a_title_set_before_the_reply_is_kept(settings: Settings) -> None:
    async with app_client(settings.model_copy(update={"auto_title": True})) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        await client.patch(f"/conversations/{cid}", json={"title": "Mine"})
        await start(client, cid, WORDS)
        await asyncio.sleep(0.1)
        assert await title_of(client, cid) == "Mine"


async def test_without_the_setting_no_title_is_made(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/conversations", json={})).json()["id"]
    await start(client, cid, WORDS)
    await asyncio.sleep(0.1)
    assert await title_of(client, cid) is None


async def test_a_failing_title_call_never_fails_the_run(settings: Settings) -> None:
    failed = titles("failed")
    overrides = {"auto_title": True, "title_provider": "nowhere"}
    async with app_client(settings.model_copy(update=overrides)) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        response = await start(client, cid, WORDS)
        assert "completed" in response.text
        assert await wait_for(lambda: asyncio.sleep(0, titles("failed") > failed))
        assert await title_of(client, cid) is None
        [run] = (await client.get(f"/conversations/{cid}/runs")).json()["items"]
        assert run["status"] == "completed"


async def test_two_processes_make_exactly_one_title_per_conversation(live_server: Any) -> None:
    """Each conversation's first two replies end on different processes in quick succession:
    both may ask for a title, one stores it."""
    servers = [live_server(auto_title=True) for _ in range(2)]
    stored = titles("stored")
    first, second = (httpx.AsyncClient(base_url=s.url, timeout=10) for s in servers)
    async with first as a, second as b:
        clients = [a, b]
        cids = [(await a.post("/conversations", json={})).json()["id"] for _ in range(4)]

        async def two_replies(cid: str, first: int) -> None:
            for turn in range(2):
                await start(clients[(first + turn) % 2], cid, f"{WORDS} turn {turn}")

        await asyncio.gather(*(two_replies(cid, i % 2) for i, cid in enumerate(cids)))

        async def all_titled() -> bool:
            return all([await title_of(b, cid) for cid in cids])

        assert await wait_for(all_titled)
        await asyncio.sleep(0.2)  # a late second title task would land by now
        assert {await title_of(a, cid) for cid in cids} == {"Why is the sky so very"}
        assert titles("stored") - stored == len(cids)
