"""The allowed hosts (PARLEY_ALLOWED_HOSTS): a page on a name that resolves to Parley (DNS
rebinding) sends its own name as ``Host`` and a matching ``Origin``; the Origin check alone takes
that for Parley's own origin. Every such request is a 400 problem naming the setting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.api.conftest import LiveServer, app_client

PROBLEM = "application/problem+json"
EVIL = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}


def refused(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == "/problems/host_not_allowed"
    assert body["code"] == "host_not_allowed"
    assert "PARLEY_ALLOWED_HOSTS" in body["detail"]
    assert "evil.example:8000" in body["detail"]


@pytest.fixture
async def default_app(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


async def test_a_rebound_page_can_do_nothing_on_a_default_app(
    default_app: httpx.AsyncClient,
) -> None:
    client = default_app
    conv = (await client.post("/conversations", json={})).json()["id"]
    path = f"/conversations/{conv}"

    refused(await client.post("/conversations", json={}, headers=EVIL))
    refused(await client.get("/conversations", headers=EVIL))
    refused(await client.get(path, headers=EVIL))
    refused(await client.get(f"{path}/messages", headers=EVIL))
    bundle = {"messages": [{"role": "user", "text": "spend my money"}]}
    refused(await client.post(f"{path}/stream", json=bundle, headers=EVIL))
    refused(await client.delete(path, headers=EVIL))
    preflight = {**EVIL, "Access-Control-Request-Method": "POST"}
    refused(await client.options("/conversations", headers=preflight))

    # nothing changed: one conversation, never run, still there
    listed = (await client.get("/conversations")).json()["items"]
    assert [c["id"] for c in listed] == [conv]
    assert (await client.get(f"{path}/runs")).json()["items"] == []
    assert (await client.get(f"{path}/messages")).json()["messages"] == []


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1:9", "[::1]:8000", "LocalHost."]
)
async def test_the_loopback_names_work_by_default_with_any_port(
    default_app: httpx.AsyncClient, host: str
) -> None:
    response = await default_app.post("/conversations", json={}, headers={"Host": host})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_the_probes_answer_any_host(default_app: httpx.AsyncClient, path: str) -> None:
    response = await default_app.get(path, headers={"Host": "10.1.2.3:8000"})
    assert response.status_code == 200, response.text
    refused(await default_app.get("/metrics", headers=EVIL))


async def test_a_listed_host_works_and_the_loopback_names_then_do_not(database_url: str) -> None:
    settings = Settings(
        database_url=database_url, allowed_hosts="parley.example.com, *.internal.example"
    )
    async with app_client(settings) as client:
        for host in ("parley.example.com", "parley.example.com:443", "a.b.internal.example"):
            origin = f"http://{host}"
            headers = {"Host": host, "Origin": origin}
            response = await client.post("/conversations", json={}, headers=headers)
            assert response.status_code == 201, (host, response.text)
        refused(await client.get("/conversations", headers=EVIL))
        response = await client.get("/conversations", headers={"Host": "internal.example"})
        assert response.status_code == 400
        assert (
            await client.get("/conversations", headers={"Host": "localhost"})
        ).status_code == 400


async def test_a_star_allows_any_host(database_url: str) -> None:
    async with app_client(Settings(database_url=database_url, allowed_hosts="*")) as client:
        response = await client.post("/conversations", json={}, headers=EVIL)
        assert response.status_code == 201, response.text


@pytest.mark.parametrize("value", ["http://parley.example.com", "parley.example.com:8000", "a b"])
def test_a_host_with_a_scheme_port_or_space_is_a_bad_setting(value: str) -> None:
    with pytest.raises(ValueError, match="is not a host name"):
        Settings(allowed_hosts=value)


def test_the_document_lists_the_400_on_every_route_but_the_probes(database_url: str) -> None:
    document = create_app(Settings(database_url=database_url)).openapi()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            has_400 = "400" in operation["responses"]
            assert has_400 == (path not in ("/healthz", "/readyz")), (method, path)


async def test_the_live_server_answers_on_127_0_0_1_and_localhost(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server()
    port = server.url.rsplit(":", 1)[1]
    for base in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            page = await http.get("/")
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            created = await http.post("/conversations", json={}, headers={"Origin": base})
            assert created.status_code == 201, created.text
            evil = await http.get("/conversations", headers=EVIL)
            refused(evil)
