"""GET is safe: no GET route starts a run, whatever it is given (both databases).

Every GET route of the app — each documented operation and each route the router serves outside
the document (the docs pages, the playground, 405 stand-ins) — is called on a conversation that
waits for an answer (a run could start at once), with no parameter, with each documented
parameter alone, and with all of them; afterwards the runs table holds only the run made before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI
from sqlalchemy import func, select
from starlette.routing import Mount, Route

from app.main import create_app
from app.settings import Settings
from app.storage import Database
from app.storage.tables import RUNS
from tests.api.conftest import app_client
from tests.api.test_streams import create, stream


def _router_paths(routes: Iterable[Any], prefix: str = "") -> Iterator[str]:
    """The path of every GET route the app serves, its included routers' too."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            yield from _router_paths(included.routes, prefix + getattr(context, "prefix", ""))
        elif isinstance(route, Route) and "GET" in (route.methods or ()):
            yield prefix + route.path
        elif isinstance(route, Mount):
            yield prefix + route.path + "/"


def _value(param: dict[str, Any], known: dict[str, str]) -> str:
    """A value a client could send: the real id for an id, else one the schema allows."""
    name, schema = param["name"].lower(), param["schema"]
    if name in known:
        return known[name]
    if "enum" in schema:
        return str(schema["enum"][-1])
    if schema.get("type") == "integer":
        return str(schema.get("minimum", 1))
    if schema.get("type") == "boolean":
        return "true"
    return "abc"


def _calls(document: dict[str, Any], known: dict[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(url, request options) for each GET operation: bare, each parameter alone, all."""
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None:
            continue
        params = operation.get("parameters", [])
        url = re.sub(r"\{(\w+)\}", lambda m: known.get(m.group(1), "x"), path)
        optional = [p for p in params if p["in"] in ("query", "header")]
        for chosen in [[], *[[p] for p in optional], optional]:
            query = {p["name"]: _value(p, known) for p in chosen if p["in"] == "query"}
            headers = {p["name"]: _value(p, known) for p in chosen if p["in"] == "header"}
            yield url, {"params": query, "headers": headers}


async def _run_count(database_url: str) -> int:
    database = Database(database_url)
    try:
        async with database.session() as session:
            return int((await session.execute(select(func.count()).select_from(RUNS))).scalar_one())
    finally:
        await database.dispose()


async def test_no_get_route_starts_a_run(database_url: str, settings: Settings) -> None:
    app: FastAPI = create_app(settings)
    document = app.openapi()
    documented = {
        re.sub(r"\{\w+\}", "x", p) for p, ops in document["paths"].items() if "get" in ops
    }
    async with app_client(settings) as client:
        conv_id = await create(client)
        events = await stream(client, conv_id, {"messages": [{"role": "user", "text": "hi"}]})
        run_id = events[0].data["run_id"]
        waiting = {"messages": [{"role": "user", "text": "are you there"}]}
        assert (await client.post(f"/conversations/{conv_id}/deltas", json=waiting)).is_success
        before = await _run_count(database_url)
        known = {
            "conversation_id": conv_id,
            "run_id": run_id,
            "last_event_id": f"{run_id}:1",
            "last-event-id": f"{run_id}:1",
        }
        calls = list(_calls(document, known))
        served = set(_router_paths(app.routes))
        extra = sorted(p for p in served if re.sub(r"\{\w+\}", "x", p) not in documented)
        calls += [
            (re.sub(r"\{(\w+)\}", lambda m: known.get(m.group(1), "x"), p), {}) for p in extra
        ]
        assert any("/stream" in url for url, _ in calls) and "/" in extra
        statuses = {}
        for url, options in calls:
            response = await client.get(url, **options)
            statuses[url] = response.status_code
            assert response.status_code < 500, (url, options, response.text)
        assert statuses[f"/conversations/{conv_id}/stream"] in (200, 204)
        state = (await client.get(f"/conversations/{conv_id}")).json()
    assert await _run_count(database_url) == before
    assert state["status"] == "idle" and state["message_count"] == 3
