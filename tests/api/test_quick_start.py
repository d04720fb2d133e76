"""The stream start's quick way (app/api/bodies.py, ``quick``): the request a chat window sends
is answered without FastAPI's solving, any other the framework's way — the same answers."""

from __future__ import annotations

import inspect
from typing import Any

import fastapi.routing
import httpx
import pytest

from app.api.routes.streams import post_and_stream
from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse

HI = {"messages": [{"role": "user", "text": "hi there"}]}


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests FastAPI solved (their parameters and dependencies)."""
    paths: list[str] = []
    solve = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        paths.append(kwargs["request"].url.path)
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return paths


def without_instance(response: httpx.Response) -> dict[str, Any]:
    """The problem, less its ``instance`` (the request's own id)."""
    return {k: v for k, v in response.json().items() if k != "instance"}


async def started(client: httpx.AsyncClient, url: str, **request: Any) -> list[str]:
    response = await client.post(url, **request)
    assert response.status_code == 200, response.text
    events = parse(response.text)
    assert events[-1].data["status"] == "completed"
    return [e.data["delta"] for e in events if e.name == "content_block_delta"]


async def test_a_plain_start_is_answered_without_solving_and_as_fastapi_answers_it(
    client: httpx.AsyncClient, solved: list[str]
) -> None:
    url = f"/conversations/{(await client.post('/conversations', json={})).json()['id']}/stream"
    solved.clear()
    assert await started(client, url, json=HI) == ["hi", " there"]
    assert await started(client, url) == ["hi", " there"]  # no body: as the conversation stands
    assert solved == []
    # a query, or a header FastAPI reads for the route: its way, the same stream
    assert await started(client, f"{url}?on_disconnect=cancel", json=HI) == ["hi", " there"]
    assert await started(client, url, json=HI, headers={"If-Match": "*"}) == ["hi", " there"]
    assert solved == [url, url]


@pytest.mark.parametrize(
    "body",
    [
        {"messages": "hi"},  # not a bundle: the model refuses it
        {"messages": [{"role": "user", "text": "hi"}], "unknown": 1},
        [1, 2],
    ],
)
async def test_a_body_the_model_refuses_gets_fastapis_own_refusal(
    client: httpx.AsyncClient, solved: list[str], body: Any
) -> None:
    url = f"/conversations/{(await client.post('/conversations', json={})).json()['id']}/stream"
    solved.clear()
    quick = await client.post(url, json=body)
    full = await client.post(f"{url}?on_disconnect=cancel", json=body)
    assert quick.status_code == full.status_code == 422
    assert without_instance(quick) == without_instance(full)
    assert solved == [url, url]


async def test_the_caller_is_checked_as_fastapi_checks_it(
    settings: Settings, solved: list[str]
) -> None:
    keyed = settings.model_copy(update={"api_keys": settings.api_keys.__class__("k1")})
    async with app_client(keyed) as client:
        made = await client.post("/conversations", json={}, headers={"Authorization": "Bearer k1"})
        url = f"/conversations/{made.json()['id']}/stream"
        for headers in ({}, {"Authorization": "Bearer k2"}, {"Authorization": "Basic k1"}):
            quick = await client.post(url, json=HI, headers=headers)
            full = await client.post(f"{url}?protocol=parley", json=HI, headers=headers)
            assert quick.status_code == full.status_code == 401
            assert without_instance(quick) == without_instance(full)
        good = {"Authorization": "Bearer k1"}
        solved.clear()
        assert await started(client, url, json=HI, headers=good) == ["hi", " there"]
        assert solved == []


def test_the_quick_way_reads_every_parameter_the_route_takes() -> None:
    """``_plain_start`` calls the endpoint with what it read itself: a parameter added to the
    route (a header, a query, a dependency) must be read there too, or send the request the
    framework's way — else the quick way would silently skip it."""
    assert list(inspect.signature(post_and_stream).parameters) == [
        "request",
        "conversation_id",  # the path's
        "caller",  # get_caller, called
        "expected_version",  # If-Match: the framework's way when sent
        "body",  # DeltaBundle.model_validate
        "on_disconnect",  # a query: the framework's way when there is one
        "protocol",
        "idempotency_key",  # the framework's way when sent
        "last_event_id",
    ]
