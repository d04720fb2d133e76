"""Which files a conversation refers to follows its messages, on both databases: a rewind or a
clear that removes the messages naming a file frees it (an upload can be deleted; a file Parley
made from a message is swept), what they keep stays referred to, and a fork refers to the files
of the messages it copies."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import httpx

from app.settings import Settings
from app.storage import Database, utcnow
from app.storage.files import FileStore, sweep
from tests.api.test_attachments import ALICE, PNG, ask, create, stream, upload

INLINE = {"data": f"data:image/png;base64,{base64.b64encode(PNG).decode()}", "name": "pasted.png"}


async def _delete(client: httpx.AsyncClient, file_id: str) -> int:
    return (await client.delete(f"/files/{file_id}", headers=ALICE)).status_code


async def _post(client: httpx.AsyncClient, path: str, body: Any = None) -> httpx.Response:
    response = await client.post(path, json=body or {}, headers=ALICE)
    assert response.status_code in (200, 201), response.text
    return response


async def test_a_rewind_frees_the_files_of_the_messages_it_removes_and_a_fork_keeps_them(
    client: httpx.AsyncClient,
) -> None:
    kept, dropped = await upload(client, PNG, "kept.png"), await upload(client, PNG, "gone.png")
    conv = await create(client)
    await stream(client, conv, ask("first", {"file_id": kept}))
    await stream(client, conv, ask("second", {"file_id": dropped}))
    fork = (await _post(client, f"/conversations/{conv}/fork", {"keep": 2})).json()["id"]
    await _post(client, f"/conversations/{conv}/rewind", {"keep": 2})
    assert await _delete(client, dropped) == 204  # no message names it any longer
    assert await _delete(client, kept) == 409  # the kept message (and the fork's) still do
    await _post(client, f"/conversations/{conv}/rewind", {"keep": 0})
    assert await _delete(client, kept) == 409  # the fork copied the reference
    await _post(client, f"/conversations/{fork}/rewind", {"keep": 0})
    assert await _delete(client, kept) == 204


async def test_a_clear_frees_the_files_and_the_sweep_takes_those_made_from_messages(
    client: httpx.AsyncClient, database_url: str
) -> None:
    uploaded = await upload(client, PNG, "kept.png")
    conv = await create(client, messages=[{"role": "system", "text": "Be brief."}])
    await stream(client, conv, ask("look", {"file_id": uploaded}, INLINE))
    doc = (await client.get(f"/conversations/{conv}/messages", headers=ALICE)).json()
    pasted = doc["messages"][1]["attachments"][1]["file_id"]
    database = Database(database_url)
    store = FileStore(database, Settings(database_url=database_url))
    try:
        later = utcnow() + timedelta(seconds=1)
        assert await sweep(store, later) == 0  # both referred to
        assert await _delete(client, uploaded) == 409
        await _post(client, f"/conversations/{conv}/clear")
        assert await sweep(store, utcnow() + timedelta(seconds=1)) == 1
    finally:
        await database.dispose()
    assert (await client.get(f"/files/{pasted}", headers=ALICE)).status_code == 404
    assert await _delete(client, uploaded) == 204  # an upload is never swept: its owner deletes it
    doc = (await client.get(f"/conversations/{conv}/messages", headers=ALICE)).json()
    assert [m["type"] for m in doc["messages"]] == ["AgentMessage"]
