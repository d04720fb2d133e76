"""The /webhooks endpoints: register (the secret shown once), list, read, change, delete —
owner-scoped — and the SSRF guard (both databases)."""

from __future__ import annotations

import httpx
import pytest
from standardwebhooks import Webhook

from app.settings import Settings
from app.webhooks.guard import UrlRefused, check, is_public
from tests.api.conftest import app_client
from tests.webhooks.conftest import register

ALICE = {"Authorization": "Bearer alice"}
BOB = {"Authorization": "Bearer bob"}


async def test_register_shows_the_secret_once_and_lists_without_it(
    client: httpx.AsyncClient,
) -> None:
    created = await register(client, "http://127.0.0.1:9/hooks", ["run.completed"], **ALICE)
    assert created["secret"].startswith("whsec_")
    Webhook(created["secret"])  # a secret the Standard Webhooks library takes
    assert created["events"] == ["run.completed"] and created["enabled"] is True
    one = await client.get(f"/webhooks/{created['id']}", headers=ALICE)
    assert one.status_code == 200 and "secret" not in one.json()
    listed = (await client.get("/webhooks", headers=ALICE)).json()
    assert [w["id"] for w in listed["items"]] == [created["id"]]
    assert "secret" not in listed["items"][0]


async def test_endpoints_are_owner_scoped(client: httpx.AsyncClient) -> None:
    created = await register(client, "http://127.0.0.1:9/hooks", **ALICE)
    path = f"/webhooks/{created['id']}"
    assert (await client.get("/webhooks", headers=BOB)).json()["items"] == []
    for method in ("GET", "DELETE"):
        response = await client.request(method, path, headers=BOB)
        assert response.status_code == 404 and response.json()["code"] == "webhook_not_found"
    patched = await client.patch(path, json={"enabled": False}, headers=BOB)
    assert patched.status_code == 404
    deliveries = await client.get(f"{path}/deliveries", headers=BOB)
    assert deliveries.status_code == 404
    assert (await client.get(path, headers=ALICE)).json()["enabled"] is True


async def test_patch_changes_only_what_it_names_and_delete_forgets(
    client: httpx.AsyncClient,
) -> None:
    created = await register(client, "http://127.0.0.1:9/hooks", ["run.completed"])
    path = f"/webhooks/{created['id']}"
    patched = await client.patch(path, json={"events": ["run.failed", "run.failed"]})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["events"] == ["run.failed"] and body["url"] == created["url"]
    off = (await client.patch(path, json={"enabled": False, "url": "http://localhost:9/x"})).json()
    assert off["enabled"] is False and off["url"] == "http://localhost:9/x"
    assert (await client.delete(path)).status_code == 204
    assert (await client.get(path)).status_code == 404
    assert (await client.delete(path)).status_code == 404


@pytest.mark.parametrize("field", ["url", "events", "enabled"])
async def test_a_null_in_a_patch_is_a_422_and_changes_nothing(
    client: httpx.AsyncClient, field: str
) -> None:
    """No field of an endpoint can be null: a null was silently ignored (a 200 that left it
    as it was, and applied the rest of the patch)."""
    created = await register(client, "http://127.0.0.1:9/hooks", ["run.completed"])
    path = f"/webhooks/{created['id']}"
    before = (await client.get(path)).json()
    body: dict[str, object] = {"url": "http://localhost:9/x", "events": ["run.failed"]}
    body["enabled"] = False
    body[field] = None
    response = await client.patch(path, json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert [e["loc"] for e in problem["errors"]] == [["body", field]]
    assert f"body.{field}" in problem["detail"]
    assert (await client.get(path)).json() == before


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com/x", "events": ["run.completed"]},
        {"url": "http://127.0.0.1:9/x", "events": []},
        {"url": "http://127.0.0.1:9/x", "events": ["run.started"]},
        {"url": "http://127.0.0.1:9/x", "events": ["run.completed"], "secret": "mine"},
        {"events": ["run.completed"]},
    ],
)
async def test_bad_registrations_are_422(client: httpx.AsyncClient, body: object) -> None:
    response = await client.post("/webhooks", json=body)
    assert response.status_code == 422, response.text
    assert (await client.get("/webhooks")).json()["items"] == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hooks",
        "http://localhost/hooks",
        "http://10.1.2.3/hooks",
        "http://192.168.0.10/hooks",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hooks",
        "http://[::ffff:127.0.0.1]/hooks",
        "http://224.0.0.1/hooks",
        "http://0.0.0.0/hooks",
    ],
)
async def test_private_addresses_are_refused_unless_allowed(database_url: str, url: str) -> None:
    strict = Settings(database_url=database_url)
    async with app_client(strict) as client:
        response = await client.post("/webhooks", json={"url": url, "events": ["run.completed"]})
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "webhook_url_refused"
        assert response.json()["errors"][0]["loc"] == ["body", "url"]
        assert (await client.get("/webhooks")).json()["items"] == []
        # a PATCH to such a URL is refused too
        allowed = Settings(database_url=database_url, webhook_allow_private=True)
        async with app_client(allowed) as other:
            created = await register(other, url)
        patched = await client.patch(f"/webhooks/{created['id']}", json={"url": url})
        assert patched.status_code == 422


async def test_the_guard_reads_every_address_kind() -> None:
    assert is_public("93.184.216.34") and is_public("2606:2800:220:1:248:1893:25c8:1946")
    for address in ("127.0.0.1", "10.0.0.1", "172.16.0.1", "100.64.0.1", "fe80::1", "ff02::1"):
        assert not is_public(address), address
    with pytest.raises(UrlRefused):
        await check("http://user:pw@example.com/", allow_private=True)
    await check("http://127.0.0.1:1/", allow_private=True)
