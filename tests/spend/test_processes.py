"""A key's limits, revocation and the ledger across real uvicorn processes on one PostgreSQL:
30 clients racing one key's last requests, runs, tokens and dollars get no more than the key
allows (to within one run), however many processes serve them; a revocation made through one
process is refused by another within a second; the ledger of a run killed with -9 and recovered
equals its stored `message_stop` usage."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.sse import Event, events
from tests.api.test_processes import Start, start_server
from tests.conftest import PostgresServer
from tests.processes import ServerProcess
from tests.spend.conftest import ADMIN, ADMIN_HEADERS, PRICES, bearer

__all__ = ["start_server"]  # the fixture, from the processes tests

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)
CLIENTS = 30
ASK = {"messages": [{"role": "user", "text": "one two three four five"}]}


def servers(start: Start, prices_file: str, count: int = 3, **settings: Any) -> list[ServerProcess]:
    started = [start(admin_token=ADMIN, prices_file=prices_file, **settings) for _ in range(count)]
    return [s.wait_ready() for s in started]


@pytest.fixture(scope="module")
def shared(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServerProcess]]:
    """Three processes on the session's PostgreSQL database, the offline model at 30 ms a word,
    for the tests that neither stop them nor need other settings (a process takes a second of
    CPU to start). Each test still starts on emptied tables: it asks for ``database_url``."""
    root = tmp_path_factory.mktemp("spend-processes")
    (root / "prices.json").write_text(json.dumps(PRICES))
    url = postgres_server.url_for(postgres_server.migrated)
    settings = {"admin_token": ADMIN, "prices_file": root / "prices.json", "offline_delay_ms": 30}
    started = [ServerProcess(url, root / f"server{n}.log", **settings) for n in range(3)]
    try:
        yield [server.wait_ready() for server in started]
    finally:
        for server in started:
            server.stop()


async def new_key(http: httpx.AsyncClient, url: str, **limits: Any) -> dict[str, Any]:
    made = await http.post(
        f"{url}/admin/keys", json={"name": "race", **limits}, headers=ADMIN_HEADERS
    )
    assert made.status_code == 201, made.text
    key: dict[str, Any] = made.json()
    return key


async def run_once(http: httpx.AsyncClient, url: str, token: str) -> httpx.Response:
    made = await http.post(f"{url}/conversations", json={}, headers=bearer(token))
    if made.status_code != 201:
        return made
    return await http.post(
        f"{url}/conversations/{made.json()['id']}/stream", json=ASK, headers=bearer(token)
    )


async def spent(http: httpx.AsyncClient, url: str, key_id: str) -> dict[str, Any]:
    report = (await http.get(f"{url}/usage?group_by=key", headers=ADMIN_HEADERS)).json()
    found = [i for i in report["items"] if i["group"] == key_id]
    return found[0] if found else {"calls": 0, "output_tokens": 0, "cost_usd": 0.0}


async def test_thirty_clients_race_one_keys_last_requests(
    database_url: str, shared: list[ServerProcess]
) -> None:
    procs = shared
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(3):  # a race that straddles a minute's end is run again
            key = await new_key(http, procs[0].url, requests_per_minute=20)
            minute = int(time.time() // 60)
            urls = itertools.cycle(p.url for p in procs)
            answers = await asyncio.gather(
                *(
                    http.get(f"{next(urls)}/conversations", headers=bearer(key["token"]))
                    for _ in range(CLIENTS)
                )
            )
            if int(time.time() // 60) == minute:
                break
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200] * 20 + [429] * 10
        assert all(a.json()["code"] == "rate_limited" for a in answers if a.status_code == 429)


async def test_thirty_clients_race_one_keys_runs(start_server: Start, prices_file: str) -> None:
    # Each run takes 5 s (5 words): the 30 requests all come while the first two still run,
    # even on a loaded machine (at 1 s a run, under coverage, two more started after them).
    procs = servers(start_server, prices_file, offline_delay_ms=1000)
    async with httpx.AsyncClient(timeout=30) as http:
        key = await new_key(http, procs[0].url, max_concurrent_runs=2)
        urls = itertools.cycle(p.url for p in procs)
        answers = await asyncio.gather(
            *(run_once(http, next(urls), key["token"]) for _ in range(CLIENTS))
        )
        ran = [a for a in answers if a.status_code == 200]
        refused = [a for a in answers if a.status_code == 429]
        assert 1 <= len(ran) <= 2 and len(ran) + len(refused) == CLIENTS
        assert all(a.json()["code"] == "too_many_runs" for a in refused)


@pytest.mark.parametrize("kind", ["budget_usd_per_month", "output_tokens_per_day"])
async def test_thirty_clients_race_one_keys_last_tokens_and_dollars(
    database_url: str, shared: list[ServerProcess], kind: str
) -> None:
    """The key spends one run, then its budget is set to 2.5 runs' worth: of 30 runs started
    at once on 3 processes, what is charged stays within one run of the budget."""
    procs = shared
    async with httpx.AsyncClient(timeout=30) as http:
        key = await new_key(http, procs[0].url)
        assert (await run_once(http, procs[0].url, key["token"])).status_code == 200
        one = await spent(http, procs[0].url, key["id"])
        per_run = one["cost_usd"] if kind.startswith("budget") else one["output_tokens"]
        budget = per_run * 2.5
        limit = budget if kind.startswith("budget") else int(budget)
        changed = await http.patch(
            f"{procs[0].url}/admin/keys/{key['id']}", json={kind: limit}, headers=ADMIN_HEADERS
        )
        assert changed.status_code == 200
        await asyncio.sleep(0.6)  # every process's cache of the key
        urls = itertools.cycle(p.url for p in procs)
        answers = await asyncio.gather(
            *(run_once(http, next(urls), key["token"]) for _ in range(CLIENTS))
        )
        ran = [a for a in answers if a.status_code == 200]
        refused = [a for a in answers if a.status_code == 429]
        assert len(ran) >= 1 and len(ran) + len(refused) == CLIENTS
        assert all(a.json()["code"] in ("budget_exceeded", "too_many_runs") for a in refused)
        total = await spent(http, procs[0].url, key["id"])
        charged = total["cost_usd"] if kind.startswith("budget") else total["output_tokens"]
        print(f"{kind}: limit {limit}, one run {per_run}, charged {charged}, {len(ran)} of 30 ran")
        assert charged <= limit + per_run * 1.0001, (charged, limit, per_run, len(ran))
        late = await run_once(http, procs[1].url, key["token"])
        assert late.status_code == 429 and late.json()["code"] == "budget_exceeded"


async def test_a_revocation_is_refused_on_another_process_within_a_second(
    database_url: str, shared: list[ServerProcess]
) -> None:
    a, b = shared[:2]
    async with httpx.AsyncClient(timeout=30) as http:
        key = await new_key(http, a.url)
        assert (
            await http.get(f"{b.url}/conversations", headers=bearer(key["token"]))
        ).status_code == 200
        revoked = await http.delete(f"{a.url}/admin/keys/{key['id']}", headers=ADMIN_HEADERS)
        assert revoked.status_code == 204
        since = time.monotonic()
        for _ in range(100):
            seen = await http.get(f"{b.url}/conversations", headers=bearer(key["token"]))
            if seen.status_code == 401:
                break
            await asyncio.sleep(0.02)
        assert seen.status_code == 401 and time.monotonic() - since < 1.0


def stop_usage(logged: list[Event]) -> dict[str, int]:
    total: dict[str, int] = {}
    for event in logged:
        if event.name == "message_stop":
            for kind, n in event.data["usage"].items():
                total[kind] = total.get(kind, 0) + (n or 0)
    return total


async def test_a_run_killed_with_9_is_charged_once_for_the_calls_its_log_kept(
    start_server: Start, prices_file: str, tmp_path: Path
) -> None:
    """A tool round's first model call ends (its `message_stop` stored with the tool call);
    the process is killed during the second. The run's recovery on another process charges the
    first call: the ledger equals the stored log's `message_stop` usage; a resume
    and another recovery sweep charge nothing more."""
    a, b = servers(start_server, prices_file, count=2, offline_delay_ms=40, run_lease_seconds=1)
    async with httpx.AsyncClient(timeout=30) as http:
        made = await http.post(
            f"{a.url}/conversations", json={"config": {"tools": ["add_numbers"]}}
        )
        cid = made.json()["id"]
        ask = {"messages": [{"role": "user", "text": 'call add_numbers {"numbers": [1, 2]}'}]}
        request = http.build_request("POST", f"{a.url}/conversations/{cid}/stream", json=ask)
        response = await http.send(request, stream=True)
        seen: list[Event] = []
        async for event in events(response.aiter_lines()):
            seen.append(event)
            stops = [e for e in seen if e.name == "message_stop"]
            if stops and seen[-1].name == "content_block_delta":
                break  # the second model call is streaming
        a.kill()
        await response.aclose()
        run_id = (seen[0].id or "").split(":")[0]
        async with http.stream(
            "GET", f"{b.url}/conversations/{cid}/stream", headers={"Last-Event-ID": f"{run_id}:0"}
        ) as replay:  # b ends the run once its lease has expired
            logged = [e async for e in events(replay.aiter_lines())]
        assert logged[-1].name == "done" and logged[-1].data["status"] == "interrupted"
        await asyncio.sleep(1.5)  # b's sweep looks again: nothing more is charged
        report = (
            await http.get(f"{b.url}/usage?group_by=conversation", headers=ADMIN_HEADERS)
        ).json()
        (row,) = report["items"]
        expected = stop_usage(logged)
        assert row["calls"] == sum(e.name == "message_stop" for e in logged) == 1
        assert {k: row[k] for k in expected} == expected
        async with http.stream(  # a resume reads the log again: it charges nothing
            "GET", f"{b.url}/conversations/{cid}/stream", headers={"Last-Event-ID": f"{run_id}:1"}
        ) as resumed:
            assert [e async for e in events(resumed.aiter_lines())][-1].name == "done"
        totals = (await http.get(f"{b.url}/conversations/{cid}")).json()["usage"]
        assert totals["calls"] == 1
