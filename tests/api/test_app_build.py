"""An app is cheap to build and to answer: its routes are those each router module built once,
at import (``_include_routes`` in app/main.py), not built again for each app on its first
requests; and what a refusal or a 405 needs of the OpenAPI document is read from the routes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.dependencies import utils

from app.api.paths import documented_operations
from app.main import create_app
from app.settings import Settings
from tests.api.conftest import app_client


async def test_an_app_and_its_first_requests_build_no_route(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    real = utils.get_dependant

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs.get("call"))
        return real(*args, **kwargs)

    monkeypatch.setattr(utils, "get_dependant", counted)
    async with app_client(settings) as client:
        created = await client.post("/conversations", json={})
        assert created.status_code == 201
        conv_id = created.json()["id"]
        assert (await client.get(f"/conversations/{conv_id}")).status_code == 200
        assert (await client.get("/webhooks")).status_code == 200
    assert built == []


def test_two_apps_serve_the_same_routes(settings: Settings) -> None:
    first, second = create_app(settings), create_app(settings)
    theirs = {id(route) for route in second.router.routes}
    shared = [route for route in first.router.routes if id(route) in theirs]
    assert len(shared) >= 40  # every API route (the docs pages' are each app's own)


def test_the_documented_operations_are_the_documents(settings: Settings) -> None:
    """What a refusal before routing and a 405 read from the routes is the OpenAPI document's
    paths and methods."""
    app = create_app(settings)
    document = {
        path: frozenset(method.upper() for method in operations if method.isalpha())
        for path, operations in app.openapi()["paths"].items()
    }
    assert documented_operations(app.routes) == document


async def test_refusals_and_405s_build_no_openapi_document(settings: Settings) -> None:
    """Naming a refused request's route (its metrics label) and a 405's ``Allow`` takes the
    routes, not the OpenAPI document (0.3 s of CPU to build, on the event loop)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            not_json = await client.post(
                "/conversations", content=b"x", headers={"content-type": "text/plain"}
            )
            assert not_json.status_code == 415
            wrong = await client.put("/conversations")
            assert wrong.status_code == 405
            assert wrong.headers["allow"] == "GET, POST"
            assert (await client.get("/nowhere")).status_code == 404
    assert app.openapi_schema is None
