"""A large JSON body is parsed once, in a worker thread, not on the event loop (which serves
every other request and renews the runs' leases meanwhile); a small one as before."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.api.bodies import LARGE_BODY

Parse = tuple[int, str]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Parse]:
    """Each ``json.loads`` of a request-sized text: its length and the thread it ran on."""
    seen: list[Parse] = []
    original: Callable[..., Any] = json.loads

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        if len(text) > 10_000:
            seen.append((len(text), threading.current_thread().name))
        return original(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", loads)
    return seen


def _openai(size: int) -> dict[str, Any]:
    text = "lorem ipsum " * (size // 12 // 4)
    return {"messages": [{"role": "user", "content": text} for _ in range(4)]}


async def test_a_large_import_is_parsed_once_off_the_event_loop(
    client: httpx.AsyncClient, parses: list[Parse]
) -> None:
    document = _openai(4 * LARGE_BODY)
    r = await client.post("/conversations/import?format=openai", json=document)
    assert r.status_code == 201, r.text
    bodies = [p for p in parses if p[0] > LARGE_BODY]
    assert len(bodies) == 1, parses  # the middleware's parse, handed on to the route
    assert bodies[0][1] != threading.main_thread().name
    stored = (await client.get(f"/conversations/{r.json()['id']}/messages")).json()
    assert [m["text"] for m in stored["messages"]] == [m["content"] for m in document["messages"]]


async def test_a_large_body_with_what_no_database_stores_is_still_refused(
    client: httpx.AsyncClient,
) -> None:
    document = _openai(4 * LARGE_BODY)
    document["messages"][2]["content"] += "\x00"
    r = await client.post("/conversations/import?format=openai", json=document)
    assert r.status_code == 422
    assert "body.messages.2.content" in r.json()["detail"]
    assert (await client.get("/conversations")).json()["items"] == []


async def test_a_large_body_that_is_no_json_gets_the_framework_s_400(
    client: httpx.AsyncClient,
) -> None:
    body = b'{"messages": [' + b'"x",' * LARGE_BODY
    headers = {"Content-Type": "application/json"}
    r = await client.post("/conversations/import?format=openai", content=body, headers=headers)
    assert r.status_code == 400
