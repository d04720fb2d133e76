"""Parley under a path prefix, as a proxy serves it (``uvicorn --root-path /parley``, the proxy
stripping the prefix: docs/deploy.md), on a real uvicorn: the routes answer as at the root, and
what clients follow (``Location``, the playground's links, the docs' document) names the prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.api.conftest import LiveServer

pytestmark = pytest.mark.postgres

PREFIX = "/parley"
JSON = {"content-type": "application/json"}


async def test_locations_name_the_prefix(live_server: Callable[..., LiveServer]) -> None:
    server = live_server(prefix=PREFIX)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        created = await http.post("/conversations", json={"system_prompt": "s"})
        assert created.status_code == 201
        conv_id = created.json()["id"]
        assert created.headers["location"] == f"{PREFIX}/conversations/{conv_id}"
        forked = await http.post(f"/conversations/{conv_id}/fork")
        assert forked.headers["location"] == f"{PREFIX}/conversations/{forked.json()['id']}"
        body = {"messages": [{"role": "user", "content": "hi"}]}
        imported = await http.post("/conversations/import?format=openai", json=body)
        assert imported.headers["location"] == f"{PREFIX}/conversations/{imported.json()['id']}"
        # the header is a path of the server's address: following it reads the conversation
        origin = server.url.removesuffix(PREFIX)
        followed = await http.get(origin + created.headers["location"])
        assert followed.status_code == 200 and followed.json()["id"] == conv_id


async def test_the_answers_that_depend_on_the_path_hold_under_it(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(prefix=PREFIX, max_body_bytes=1024, max_import_bytes=64 * 1024)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        # 405 names the path's methods, not none
        assert (await http.request("OPTIONS", "/conversations")).headers["allow"] == "GET, POST"
        assert (await http.put("/conversations/abc")).headers["allow"] == "DELETE, GET, PATCH"
        # the routes that load a whole conversation keep their larger limit
        messages = [{"type": "TextMessage", "role": "user", "text": "w" * 100}] * 40
        load = json.dumps({"messages": {"version": "1.0", "messages": messages}})
        assert 1024 < len(load) < 64 * 1024
        assert (await http.post("/conversations", content=load, headers=JSON)).status_code == 201
        # the docs pages keep their policy: no other site frames them
        for page in ("/docs", "/redoc"):
            policy = (await http.get(page)).headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in policy, page


async def test_the_playground_and_the_docs_load_from_under_the_prefix(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(prefix=PREFIX)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        page = (await http.get("/")).text
        assert (await http.get("/playground/index.html")).text == page  # the page by its name
        links = [
            f'href="{PREFIX}/playground/style.css"',
            f'src="{PREFIX}/playground/app.js"',
            f'href="{PREFIX}/docs"',
            f'href="{PREFIX}/redoc"',
        ]
        for link in links:
            assert link in page, link
        document: dict[str, Any] = (await http.get("/openapi.json")).json()
        assert document["servers"] == [{"url": PREFIX}]
        assert f"'{PREFIX}/openapi.json'" in (await http.get("/docs")).text
