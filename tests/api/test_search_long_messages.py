"""A message far longer than the search index holds (PostgreSQL's tsvector: 1 MB) is stored
whole — as a delta and as a model's reply — and found by a word of its indexed start (both
databases). It was a 500, and a failed run for a reply, on PostgreSQL."""

from __future__ import annotations

import httpx

from app.settings import Settings
from tests.api.conftest import app_client

# 150,000 distinct words of 9 characters: 1.35 MB of text, a tsvector well over 1 MB
LONG = " ".join(f"w{i:07d}x" for i in range(150_000))


async def test_a_long_message_and_a_long_reply_are_stored_and_found(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        offline_delay_ms=0,
        max_text_chars=2_000_000,
        max_body_bytes=4_000_000,
        # a reply of 150,000 words takes seconds of CPU: on a loaded machine (under coverage)
        # the run's renewals came later than the 6 s lease, and it stopped with `lease_lost`
        run_lease_seconds=60,
    )
    async with app_client(settings) as client:
        conv = (await client.post("/conversations", json={})).json()["id"]
        body = {"messages": [{"role": "user", "text": LONG}]}
        response = await client.post(f"/conversations/{conv}/stream", json=body)
        assert response.status_code == 200, response.text
        assert '"status":"completed"' in response.text.replace(" ", "")
        stored = (await client.get(f"/conversations/{conv}/messages")).json()["messages"]
        assert [m["text"] for m in stored] == [LONG, LONG]  # the offline model echoes it
        found = await _search(client, "w0000042x")
        assert found == [conv]
        assert await _search(client, "w0149999x") == []  # past the indexed start


async def _search(client: httpx.AsyncClient, word: str) -> list[str]:
    page = (await client.get("/conversations", params={"q": word})).json()
    return [item["id"] for item in page["items"]]
