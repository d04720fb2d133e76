"""A process cut off from its database stops showing its clients what it can no longer store:
it sends stored events only, then says so (`lease_lost`, no id) once its lease ran out, while
another process ends the run from the stored log. Real processes on one PostgreSQL, the first
behind a proxy that stops passing bytes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.api.test_processes import messages, open_stream, read_deltas
from tests.processes import FreezableProxy, ServerProcess

WORDS = 400  # 20 ms each: 8 s of reply, still running when the database goes away


async def test_a_process_cut_off_from_its_database_shows_only_what_is_stored(
    database_url: str, tmp_path: Path
) -> None:
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        pytest.skip("a database server that stops answering: PostgreSQL")
    proxy = FreezableProxy(url.port or 5432)
    proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    settings = {"offline_delay_ms": 20, "run_lease_seconds": 1}
    a = ServerProcess(proxied, tmp_path / "a.log", **settings)
    b = ServerProcess(database_url, tmp_path / "b.log", **settings)
    try:
        a.wait_ready()
        b.wait_ready()
        async with httpx.AsyncClient(timeout=30) as http:
            text = " ".join(f"w{i}" for i in range(WORDS))
            conv_id, response, stream = await open_stream(http, a.url, text=text)
            seen = await read_deltas(stream, 5)
            await asyncio.sleep(0.3)  # past a flush: some of the reply is stored
            proxy.frozen.set()
            cut_at = time.monotonic()
            seen += [e async for e in stream]  # until a says it lost the run
            await response.aclose()
            told_after = time.monotonic() - cut_at
            assert seen[-1].name == "error" and seen[-1].id is None, seen[-3:]
            assert seen[-1].data["code"] == "lease_lost" and "done" not in [e.name for e in seen]
            assert told_after < 6, "the lease's term and its grace are 2 s"

            async def ended() -> list[dict[str, object]]:
                runs = (await http.get(f"{b.url}/conversations/{conv_id}/runs")).json()["items"]
                return runs if runs[0]["status"] != "running" else []

            deadline = time.monotonic() + 20
            while not (runs := await ended()):
                assert time.monotonic() < deadline, "b did not end the run"
                await asyncio.sleep(0.1)
            assert runs[0]["status"] == "interrupted"
            kept = await messages(http, b.url, conv_id)
            assert len(kept) == 2, kept
            stored = str(kept[1]["text"])
        shown = "".join(str(e.data["delta"]) for e in seen if e.name == "content_block_delta")
        # What a showed and b keeps differ by at most what a sent between its last flush and
        # noticing the database hung (a flush interval and the writer's patience: 1.1 s, some
        # 55 words), never by the rest of the reply (unguarded, a showed it all: 400 words).
        assert stored.startswith(shown[: len(stored)]) or shown.startswith(stored)
        assert len(shown.split()) - len(stored.split()) <= 70, (len(shown), len(stored))
        assert len(shown.split()) < WORDS // 2
    finally:
        proxy.frozen.clear()
        a.stop()
        b.stop()
        proxy.close()
