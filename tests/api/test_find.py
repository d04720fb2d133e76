"""PATCH /conversations/{id} (title, metadata, archived) and the listing's filters and search,
through httpx, on both databases."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import app_client

PROBLEM = "application/problem+json"
MERGE = {"content-type": "application/merge-patch+json"}


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def patch(client: httpx.AsyncClient, cid: str, body: Any, **headers: str) -> httpx.Response:
    return await client.request(
        "PATCH", f"/conversations/{cid}", json=body, headers={**MERGE, **headers}
    )


async def listed(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await client.get("/conversations", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_patch_sets_title_metadata_and_archived_one_version_up(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client, metadata={"a": 1, "nested": {"x": 1, "y": 2}})
    assert (conv["title"], conv["archived"]) == (None, False)
    body = {"title": "Sky", "metadata": {"a": None, "nested": {"y": None}, "b": "c"}}
    response = await patch(client, conv["id"], body, **{"if-match": '"1"'})
    assert response.status_code == 200, response.text
    out = response.json()
    assert response.headers["etag"] == '"2"'
    assert (out["title"], out["version"], out["archived"]) == ("Sky", 2, False)
    assert out["metadata"] == {"nested": {"x": 1}, "b": "c"}
    assert (await client.get(f"/conversations/{conv['id']}")).json() == out

    # application/json works as well; nulls: no title, no metadata, not archived.
    await patch(client, conv["id"], {"archived": True})
    response = await client.patch(
        f"/conversations/{conv['id']}", json={"title": None, "metadata": None, "archived": None}
    )
    out = response.json()
    assert (out["title"], out["metadata"], out["archived"], out["version"]) == (
        None,
        {},
        False,
        4,
    )


async def test_patch_refuses_a_stale_version_unknown_fields_and_long_titles(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client)
    stale = await patch(client, conv["id"], {"title": "x"}, **{"if-match": '"9"'})
    assert stale.status_code == 412
    assert stale.headers["content-type"] == PROBLEM
    for bad in ({"name": "x"}, {"title": "x" * 201}, {"archived": "yes"}, {"metadata": [1]}):
        response = await patch(client, conv["id"], bad)
        assert response.status_code == 422, (bad, response.text)
    response = await patch(client, conv["id"], {"title": "x" * 200})
    assert response.status_code == 200
    blank = await patch(client, conv["id"], {"title": "   "})
    assert blank.json()["title"] is None
    unchanged = (await client.get(f"/conversations/{conv['id']}")).json()
    assert unchanged["version"] == 3


async def test_patch_of_another_owners_conversation_is_404(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    response = await client.patch(
        f"/conversations/{conv['id']}",
        json={"title": "mine"},
        headers={"authorization": "Bearer someone-else"},
    )
    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
    assert (await client.get(f"/conversations/{conv['id']}")).json()["title"] is None


async def test_patch_while_a_run_is_running_is_kept_after_it_ends(settings: Settings) -> None:
    settings = settings.model_copy(update={"offline_delay_ms": 20})
    words = " ".join(f"w{i}" for i in range(25))
    async with app_client(settings) as client:
        conv = await create(client)
        url = f"/conversations/{conv['id']}"
        run = asyncio.create_task(
            client.post(f"{url}/stream", json={"messages": [{"role": "user", "text": words}]})
        )
        for _ in range(200):
            if (await client.get(url)).json()["status"] == "running":
                break
            await asyncio.sleep(0.01)
        response = await patch(client, conv["id"], {"title": "During", "metadata": {"k": "v"}})
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "running"
        during = response.json()["version"]
        streamed = await run
        assert streamed.status_code == 200 and "event: done" in streamed.text
        after = (await client.get(url)).json()
        assert (after["title"], after["metadata"], after["status"]) == (
            "During",
            {"k": "v"},
            "idle",
        )
        assert after["version"] > during
        assert after["message_count"] == 2


async def test_archived_and_metadata_filters(client: httpx.AsyncClient) -> None:
    red = await create(client, metadata={"team": "red"})
    blue = await create(client, metadata={"team": "blue", "n": 5})
    shelved = await create(client, metadata={"team": "red"})
    await patch(client, shelved["id"], {"archived": True})
    assert [c["id"] for c in await listed(client)] == [blue["id"], red["id"]]
    assert [c["id"] for c in await listed(client, archived="true")] == [shelved["id"]]
    assert len(await listed(client, archived="all")) == 3
    assert [c["id"] for c in await listed(client, **{"metadata.team": "red"})] == [red["id"]]
    assert await listed(client, **{"metadata.n": "5"}) == []
    response = await client.get("/conversations", params={"archived": "maybe"})
    assert response.status_code == 422
    response = await client.get("/conversations?metadata.team=red&metadata.team=blue")
    assert response.status_code == 422
    many = "&".join(f"metadata.k{i}=v" for i in range(11))
    assert (await client.get(f"/conversations?{many}")).status_code == 422


async def test_search_finds_by_reply_text_ranked_with_snippets(client: httpx.AsyncClient) -> None:
    first = await create(
        client,
        messages=[
            {"role": "user", "text": "What is a quokka?"},
            {"role": "assistant", "text": "A quokka is a small marsupial from Rottnest Island."},
        ],
    )
    titled = await create(client, messages=[{"role": "user", "text": "hello"}])
    await patch(client, titled["id"], {"title": "All about the quokka"})
    await create(client, messages=[{"role": "user", "text": "nothing here"}])
    found = await listed(client, q="Quokka")
    assert [c["id"] for c in found] == [titled["id"], first["id"]]
    assert found[0]["snippet"] == "All about the quokka"
    marsupial = await listed(client, q="marsupial")
    assert [c["id"] for c in marsupial] == [first["id"]]
    assert "small marsupial from Rottnest" in marsupial[0]["snippet"]
    assert (await listed(client))[0]["snippet"] is None
    assert len(await listed(client, q="   ")) == 3  # no words: no search


async def test_search_pages_with_its_cursor(client: httpx.AsyncClient) -> None:
    made = {
        (await create(client, messages=[{"role": "user", "text": "wombat " * (i % 3 + 1)}]))["id"]
        for i in range(7)
    }
    seen: list[str] = []
    params: dict[str, Any] = {"q": "wombat", "limit": 2}
    while True:
        page = (await client.get("/conversations", params=params)).json()
        seen.extend(c["id"] for c in page["items"])
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert len(seen) == len(set(seen)) and set(seen) == made


@pytest.mark.parametrize(
    "q",
    ['"unbalanced', "a AND OR NOT", "NEAR(", "*", "x:y", "%00", "'); --", "\u0000", "ü" * 500],
)
async def test_hostile_queries_never_fail(client: httpx.AsyncClient, q: str) -> None:
    await create(client, messages=[{"role": "user", "text": "a y x unbalanced"}])
    response = await client.get("/conversations", params={"q": q})
    assert response.status_code == 200, response.text


async def test_a_query_over_the_limit_is_422(client: httpx.AsyncClient) -> None:
    response = await client.get("/conversations", params={"q": "x" * 501})
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
