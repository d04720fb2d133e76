"""API keys in the database, on both databases: the admin API, the CLI, who sees what,
revocation and expiry, static keys beside them, and the service left open without any key."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import httpx

from app.settings import Settings
from tests.api.conftest import app_client
from tests.spend.conftest import ADMIN_HEADERS, bearer, make_key

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def test_without_any_key_the_service_stays_open(client: httpx.AsyncClient) -> None:
    assert (await client.post("/conversations", json={})).status_code == 201
    assert (await client.get("/conversations", headers=bearer("anything"))).status_code == 200


async def test_the_admin_api_is_404_without_an_admin_token_and_401_with_a_wrong_one(
    database_url: str, client: httpx.AsyncClient
) -> None:
    async with app_client(Settings(database_url=database_url)) as closed:
        assert (await closed.get("/admin/keys", headers=ADMIN_HEADERS)).status_code == 404
        assert (await closed.post("/admin/keys", json={"name": "x"})).status_code == 404
    wrong = await client.get("/admin/keys", headers=bearer("not-the-admin"))
    assert wrong.status_code == 401 and wrong.json()["code"] == "unauthorized"
    assert (await client.get("/admin/keys")).status_code == 401


async def test_a_key_is_shown_once_and_sees_only_its_own(client: httpx.AsyncClient) -> None:
    made = await make_key(client, budget_usd_per_month=5)
    token = made["token"]
    assert token.startswith(made["prefix"]) and made["status"] == "active"
    assert made["budget_usd_per_month"] == 5
    listed = (await client.get("/admin/keys", headers=ADMIN_HEADERS)).json()["items"]
    assert [k["id"] for k in listed] == [made["id"]]
    assert "token" not in listed[0] and token not in json.dumps(listed)
    # A key now exists: no key, or an unknown one, is refused.
    assert (await client.post("/conversations", json={})).status_code == 401
    assert (await client.get("/conversations", headers=bearer("guess"))).status_code == 401
    mine = await client.post("/conversations", json={}, headers=bearer(token))
    assert mine.status_code == 201
    other = (await make_key(client))["token"]
    cid = mine.json()["id"]
    assert (await client.get(f"/conversations/{cid}", headers=bearer(other))).status_code == 404
    assert (await client.get(f"/conversations/{cid}", headers=bearer(token))).status_code == 200
    assert (await client.get("/conversations", headers=bearer(other))).json()["items"] == []


async def test_an_expiry_that_has_no_time_in_utc_is_a_422(client: httpx.AsyncClient) -> None:
    """A time that exists with its offset but not in UTC was a 500 (OverflowError)."""
    made = await make_key(client)
    for bad in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        body = {"name": "x", "expires_at": bad}
        refused = await client.post("/admin/keys", json=body, headers=ADMIN_HEADERS)
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["loc"] == ["body", "expires_at"]
        patched = await client.patch(
            f"/admin/keys/{made['id']}", json={"expires_at": bad}, headers=ADMIN_HEADERS
        )
        assert patched.status_code == 422, patched.text
    far = await client.post(
        "/admin/keys",
        json={"name": "x", "expires_at": "9999-12-31T10:00:00+02:00"},
        headers=ADMIN_HEADERS,
    )
    assert far.status_code == 201 and far.json()["expires_at"].startswith("9999-12-31T08:00:00")


async def test_a_revoked_or_expired_key_is_refused(client: httpx.AsyncClient) -> None:
    made = await make_key(client)
    token = made["token"]
    assert (await client.get("/conversations", headers=bearer(token))).status_code == 200
    gone = await client.delete(f"/admin/keys/{made['id']}", headers=ADMIN_HEADERS)
    assert gone.status_code == 204
    refused = await client.get("/conversations", headers=bearer(token))
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    view = (await client.get(f"/admin/keys/{made['id']}", headers=ADMIN_HEADERS)).json()
    assert view["status"] == "revoked" and view["revoked_at"]

    later = await make_key(client)
    assert (await client.get("/conversations", headers=bearer(later["token"]))).status_code == 200
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    patched = await client.patch(
        f"/admin/keys/{later['id']}", json={"expires_at": past}, headers=ADMIN_HEADERS
    )
    assert patched.status_code == 200 and patched.json()["status"] == "expired"
    assert (await client.get("/conversations", headers=bearer(later["token"]))).status_code == 401


async def test_a_change_on_one_replica_reaches_another_within_a_second(
    settings: Settings, client: httpx.AsyncClient
) -> None:
    """Two apps on one database (two replicas): a revocation made through one is refused by
    the other within PARLEY_KEY_CACHE_SECONDS."""
    made = await make_key(client)
    async with app_client(settings) as replica:
        ok = await replica.get("/conversations", headers=bearer(made["token"]))
        assert ok.status_code == 200
        await client.delete(f"/admin/keys/{made['id']}", headers=ADMIN_HEADERS)
        started = asyncio.get_running_loop().time()
        for _ in range(40):
            seen = await replica.get("/conversations", headers=bearer(made["token"]))
            if seen.status_code == 401:
                break
            await asyncio.sleep(0.05)
        assert seen.status_code == 401
        assert asyncio.get_running_loop().time() - started < 1.0


async def test_static_keys_keep_working_beside_database_keys(
    database_url: str, settings: Settings
) -> None:
    static = settings.model_copy(update={"api_keys": settings.api_keys.__class__("static-one")})
    async with app_client(static) as client:
        assert (await client.get("/conversations", headers=bearer("static-one"))).status_code == 200
        made = await make_key(client)
        assert (
            await client.get("/conversations", headers=bearer(made["token"]))
        ).status_code == 200
        assert (await client.get("/conversations", headers=bearer("static-one"))).status_code == 200
        assert (await client.get("/conversations", headers=bearer("other"))).status_code == 401


async def test_patch_changes_limits_and_null_clears_one(client: httpx.AsyncClient) -> None:
    made = await make_key(client, requests_per_minute=10, max_concurrent_runs=2)
    url = f"/admin/keys/{made['id']}"
    changed = await client.patch(
        url, json={"requests_per_minute": None, "name": "renamed"}, headers=ADMIN_HEADERS
    )
    body = changed.json()
    assert body["requests_per_minute"] is None and body["max_concurrent_runs"] == 2
    assert body["name"] == "renamed"
    bad = await client.patch(url, json={"requests_per_minute": 0}, headers=ADMIN_HEADERS)
    assert bad.status_code == 422
    missing = await client.patch(
        "/admin/keys/" + "0" * 32, json={"name": "x"}, headers=ADMIN_HEADERS
    )
    assert missing.status_code == 404 and missing.json()["code"] == "key_not_found"


async def test_a_null_name_is_a_422_and_changes_nothing(client: httpx.AsyncClient) -> None:
    """A key always has a name: a null one was silently ignored (a 200 that kept the name and
    applied the rest). The expiry and the limits are still cleared by a null."""
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    made = await make_key(client, budget_usd_per_month=5, expires_at=later)
    url = f"/admin/keys/{made['id']}"
    before = (await client.get(url, headers=ADMIN_HEADERS)).json()
    body = {"name": None, "budget_usd_per_month": 7, "expires_at": None}
    refused = await client.patch(url, json=body, headers=ADMIN_HEADERS)
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert [e["loc"] for e in refused.json()["errors"]] == [["body", "name"]]
    assert "body.name" in refused.json()["detail"]
    assert (await client.get(url, headers=ADMIN_HEADERS)).json() == before
    cleared = await client.patch(
        url, json={"budget_usd_per_month": None, "expires_at": None}, headers=ADMIN_HEADERS
    )
    assert cleared.status_code == 200, cleared.text
    view = cleared.json()
    assert view["budget_usd_per_month"] is None and view["expires_at"] is None
    assert view["name"] == "test"


async def test_last_used_is_written(client: httpx.AsyncClient) -> None:
    made = await make_key(client)
    assert made["last_used_at"] is None
    await client.get("/conversations", headers=bearer(made["token"]))
    view = (await client.get(f"/admin/keys/{made['id']}", headers=ADMIN_HEADERS)).json()
    assert view["last_used_at"] is not None


async def test_the_cli_creates_lists_and_revokes_keys(
    database_url: str, client: httpx.AsyncClient
) -> None:
    env = {**os.environ, "PARLEY_DATABASE_URL": database_url}

    def cli(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "keys", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.splitlines()

    view, token = await asyncio.to_thread(cli, "create", "--name", "ci", "--budget-usd", "5")
    key = json.loads(view)
    assert key["budget_usd_per_month"] == 5 and token.startswith(key["prefix"])
    assert (await client.get("/conversations", headers=bearer(token))).status_code == 200
    listed = [json.loads(line) for line in await asyncio.to_thread(cli, "list")]
    assert [k["id"] for k in listed] == [key["id"]] and token not in json.dumps(listed)
    await asyncio.to_thread(cli, "revoke", key["id"])
    await asyncio.sleep(0.6)  # this process's cache of the key
    assert (await client.get("/conversations", headers=bearer(token))).status_code == 401
