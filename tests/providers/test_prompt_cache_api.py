"""Prompt caching end to end, on both databases: a 60-turn conversation with a small context
budget, through Parley's HTTP API and the real anthropic SDK, on the prefix-cache fake. Most of
its input is read from the cache (stepped truncation keeps the prefix), and the cache reads and
writes the fake reported are what the streams' ``message_stop`` carried and the runs stored."""

from __future__ import annotations

from typing import Any

import pytest

from app.providers.openai_chat import prompt_cache_key
from app.settings import Settings
from tests.api.conftest import app_client

from . import wire
from .anthropic_cache import CachingModel
from .cache_run import converse
from .fake_server import FakeServer, Reply

TURNS = 60
SKIP = 3  # the first requests write the cache; the share is measured after them


@pytest.mark.parametrize("reasoning", [None, {"effort": "high"}], ids=["plain", "thinking"])
async def test_a_long_conversation_reads_most_of_its_input_from_the_cache(
    database_url: str, reasoning: dict[str, Any] | None
) -> None:
    """With thinking on, the replies' signed thinking goes back in the history (never marked:
    the fake refuses ``cache_control`` on it, and thinking changed by a byte)."""
    model = CachingModel()
    async with FakeServer() as upstream:
        model.serve(upstream)
        settings = Settings(
            database_url=database_url,
            sse_ping_seconds=0,
            anthropic_api_key="sk-ant-test",
            anthropic_base_url=upstream.url,
        )
        async with app_client(settings) as client:
            seen = await converse(client, TURNS, 3000, reasoning)

    assert all(r.path == "/v1/messages" for r in upstream.received)
    assert len(upstream.received) == len(model.cache.usage) > TURNS  # none refused, lookups too
    assert model.calls >= TURNS // 7
    thinking = [r.body.get("thinking") for r in upstream.received]
    assert thinking == [{"type": "adaptive"} if reasoning else None] * len(thinking)
    if reasoning:
        assert len(model.issued.thinking) == len(upstream.received)
    share = model.cache.cached_share(skip=SKIP)
    print(f"cached share of input tokens after {SKIP} requests: {share:.1%}")
    assert share >= 0.6, share

    # the stream's message_stop usage is the fake's, call by call
    assert [(u["cache_read_tokens"], u["cache_write_tokens"]) for u in seen.streamed] == [
        (u.read, u.written) for u in model.cache.usage
    ]
    assert [u["input_tokens"] for u in seen.streamed] == [u.total for u in model.cache.usage]
    assert seen.streamed_after(SKIP).share == share

    # the runs stored the same, summed
    stored, streamed = seen.stored_total(), seen.streamed_after(0)
    assert (stored.input, stored.read, stored.written) == (
        streamed.input,
        streamed.read,
        streamed.written,
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_openai_requests_carry_the_conversations_prompt_cache_key(
    database_url: str, api: str
) -> None:
    reply = wire.rs_text("ok") if api == "responses" else wire.oa_text("ok")
    async with FakeServer() as upstream:
        upstream.script(Reply(events=reply), Reply(events=reply), Reply(events=reply))
        settings = Settings(
            database_url=database_url,
            sse_ping_seconds=0,
            openai_api_key="sk-test",
            openai_base_url=f"{upstream.url}/v1",
            openai_api=api,
        )
        async with app_client(settings) as client:
            ids = []
            for text in ("one", "two"):
                created = await client.post("/conversations", json={"config": {}})
                ids.append(created.json()["id"])
                user = {"messages": [{"role": "user", "text": text}]}
                response = await client.post(f"/conversations/{ids[-1]}/stream", json=user)
                assert response.status_code == 200, response.text
            again = {"messages": [{"role": "user", "text": "three"}]}
            response = await client.post(f"/conversations/{ids[0]}/stream", json=again)
            assert response.status_code == 200, response.text
    keys = [body["prompt_cache_key"] for body in upstream.bodies]
    assert keys == [prompt_cache_key(ids[0]), prompt_cache_key(ids[1]), prompt_cache_key(ids[0])]
    assert keys[0] != keys[1]
