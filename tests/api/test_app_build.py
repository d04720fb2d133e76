"""An app is cheap to build: its routes are those each router module built once, at import
(``_include_routes`` in app/main.py), not built again for each app on its first requests."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.dependencies import utils

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
