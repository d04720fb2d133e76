"""What browsers need, through httpx: the Origin check, CORS, the playground, offline docs,
``GET /providers``. The real browser drives them in tests/browser/."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.api.middleware.browser import browser_origin, origin_key
from app.main import create_app
from app.settings import Settings

PROBLEM = "application/problem+json"
OWN = "http://localhost"


@pytest.fixture
async def cors_client(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app with one listed origin and an API key required."""
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        cors_origins="https://app.example.com/, http://localhost:5173",
        api_keys="k1",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url=OWN, headers={"Authorization": "Bearer k1"}
        ) as c:
            yield c


async def count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/conversations")).json()["items"])


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://localhost.evil", "https://localhost", "x"]
)
async def test_a_foreign_origin_gets_403_problem_and_changes_nothing(
    client: httpx.AsyncClient, origin: str
) -> None:
    response = await client.post("/conversations", json={}, headers={"Origin": origin})
    assert response.status_code == 403
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "/problems/origin_not_allowed"
    assert origin in response.json()["detail"]
    assert await count(client) == 0


async def test_a_foreign_origin_cannot_start_a_run(client: httpx.AsyncClient) -> None:
    conv = (await client.post("/conversations", json={})).json()
    await client.post(
        f"/conversations/{conv['id']}/deltas", json={"messages": [{"role": "user", "text": "hi"}]}
    )
    response = await client.get(
        f"/conversations/{conv['id']}/stream", headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    after = (await client.get(f"/conversations/{conv['id']}")).json()
    assert (after["message_count"], after["version"]) == (conv["message_count"] + 1, 2)


async def test_own_origin_and_no_origin_pass(client: httpx.AsyncClient) -> None:
    own = await client.post("/conversations", json={}, headers={"Origin": "http://localhost:80"})
    assert own.status_code == 201
    assert (await client.post("/conversations", json={})).status_code == 201
    assert await count(client) == 2


async def test_a_cross_site_request_without_origin_is_refused_unless_a_page_navigation(
    client: httpx.AsyncClient,
) -> None:
    conv = (await client.post("/conversations", json={"system_prompt": "s"})).json()
    stream = f"/conversations/{conv['id']}/stream"
    img = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    assert (await client.get(stream, headers=img)).status_code == 403
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    assert (await client.get(stream, headers=link)).status_code == 403
    assert (await client.get("/docs", headers=link)).status_code == 200
    same = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
    assert (await client.get(f"/conversations/{conv['id']}", headers=same)).status_code == 200
    assert (await client.get(f"/conversations/{conv['id']}")).json()["version"] == 1


async def test_without_listed_origins_there_is_no_cors(client: httpx.AsyncClient) -> None:
    response = await client.get("/conversations", headers={"Origin": OWN})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_a_listed_origin_gets_cors_headers_and_preflight(
    cors_client: httpx.AsyncClient,
) -> None:
    preflight = await cors_client.options(
        "/conversations/abc/stream",
        headers={
            "Origin": "https://app.example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, if-match, "
            "idempotency-key, last-event-id",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    allowed = preflight.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "if-match", "idempotency-key"):
        assert header in allowed
    created = await cors_client.post(
        "/conversations", json={}, headers={"Origin": "http://localhost:5173"}
    )
    assert created.status_code == 201
    assert created.headers["access-control-allow-origin"] == "http://localhost:5173"
    exposed = set(created.headers["access-control-expose-headers"].lower().split(", "))
    documented = {"allow", "etag", "idempotent-replayed", "location", "retry-after"}
    assert documented | {"x-request-id", "x-run-id"} <= exposed
    other = await cors_client.post(
        "/conversations", json={}, headers={"Origin": "https://other.example.com"}
    )
    assert other.status_code == 403
    assert await count(cors_client) == 1
    head = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "HEAD"}
    assert (await cors_client.options("/conversations", headers=head)).status_code == 200


async def test_a_listed_origin_works_however_it_is_spelled(database_url: str) -> None:
    """Browsers send ``http://app.example.com``; Starlette's CORS compares strings."""
    settings = Settings(
        database_url=database_url,
        cors_origins="http://App.Example.com:80, https://x.example:443, http://[::1]:8000",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=OWN) as c:
            for origin in ("http://app.example.com", "https://x.example", "http://[::1]:8000"):
                preflight = await c.options(
                    "/conversations",
                    headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
                )
                assert preflight.status_code == 200, origin
                assert preflight.headers["access-control-allow-origin"] == origin
                created = await c.post("/conversations", json={}, headers={"Origin": origin})
                assert created.status_code == 201, origin
                assert created.headers["access-control-allow-origin"] == origin


@pytest.mark.parametrize(
    ("origin", "method", "headers", "code"),
    [
        ("https://evil.example", "POST", None, "origin_not_allowed"),
        ("https://app.example.com", "PUT", None, "cors_not_allowed"),
        ("https://app.example.com", "POST", "content-type, x-foo", "cors_not_allowed"),
    ],
)
async def test_a_refused_preflight_is_a_403_problem(
    cors_client: httpx.AsyncClient, origin: str, method: str, headers: str | None, code: str
) -> None:
    request = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers is not None:
        request["Access-Control-Request-Headers"] = headers
    response = await cors_client.options("/conversations", headers=request)
    assert response.status_code == 403
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == f"/problems/{code}"
    allowed = response.headers.get("access-control-allow-origin")
    assert allowed == (None if code == "origin_not_allowed" else origin)
    assert await count(cors_client) == 0


def test_origin_key_normalizes_default_ports_and_rejects_non_origins() -> None:
    assert origin_key("HTTPS://App.Example.com:443") == ("https", "app.example.com", 443)
    assert origin_key("http://h:8000") == ("http", "h", 8000)
    for bad in ("null", "", "file:///x", "http://h:99999", "h.example"):
        assert origin_key(bad) is None
    assert browser_origin("HTTPS://App.Example.com:443/") == "https://app.example.com"
    assert browser_origin("http://[::1]:80") == "http://[::1]"
    assert browser_origin("null") is None


async def test_the_playground_and_its_modules_are_served(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert 'role="log"' in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert 'aria-label="Message"' in page.text
    assert "://" not in page.text, "the page must load nothing from elsewhere"
    for asset in ("app.js", "api.js", "sse.js", "style.css", "index.html"):
        response = await client.get(f"/playground/{asset}")
        assert response.status_code == 200, asset
        assert "://" not in response.text, asset
        # the page under its file name is not framed either; nothing is sniffed
        assert (
            response.headers["content-security-policy"] == page.headers["content-security-policy"]
        )
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_docs_and_redoc_load_their_assets_from_parley(client: httpx.AsyncClient) -> None:
    for path in ("/docs", "/redoc"):
        response = await client.get(path)
        assert "cdn." not in response.text and "fonts.googleapis" not in response.text, path
        # another site cannot frame them (Swagger UI's "Try it out" runs as Parley's page)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], path
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        response = await client.get(f"/static-offline-docs/{asset}")
        assert response.status_code == 200 and len(response.content) > 10_000, asset


async def test_providers_lists_the_configured_ones_with_default_models(
    database_url: str,
) -> None:
    settings = Settings(database_url=database_url, openai_api_key="sk-test", api_keys="k1")
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=OWN) as c:
            assert (await c.get("/providers")).status_code == 401
            response = await c.get("/providers", headers={"Authorization": "Bearer k1"})
    assert response.status_code == 200
    assert response.json() == {
        "default_provider": "openai",
        "providers": [
            {"name": "openai", "default_model": settings.openai_default_model},
            {"name": "offline", "default_model": "echo"},
        ],
    }
