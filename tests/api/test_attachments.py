"""Attachments through the API on both databases: a message carries uploaded files by reference
(the offline model reads their bytes), inline files are stored on arrival, bad references are a
422 naming the item that stores nothing, a referenced file is kept, exports inline the bytes and
imports store them (export → import → export is identity), and an image the model draws is
stored, announced and referenced."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from app.providers.png import draw_png
from tests.api.sse import Event, parse

ALICE = {"Authorization": "Bearer alice"}
BOB = {"Authorization": "Bearer bob"}
PNG = draw_png(640, 480, "cat")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


async def upload(client: httpx.AsyncClient, data: bytes, name: str, who: Any = ALICE) -> str:
    response = await client.post("/files", files={"file": (name, data)}, headers=who)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def create(client: httpx.AsyncClient, who: Any = ALICE, **body: Any) -> str:
    body.setdefault("config", {"provider": "offline"})
    response = await client.post("/conversations", json=body, headers=who)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def stream(client: httpx.AsyncClient, conv_id: str, body: Any) -> list[Event]:
    response = await client.post(f"/conversations/{conv_id}/stream", json=body, headers=ALICE)
    assert response.status_code == 200, response.text
    return parse(response.text)


async def messages(client: httpx.AsyncClient, conv_id: str, **query: str) -> Any:
    response = await client.get(f"/conversations/{conv_id}/messages", params=query, headers=ALICE)
    assert response.status_code == 200, response.text
    return response.json()


def ask(text: str, *attachments: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "text": text, "attachments": list(attachments)}]}


async def test_a_message_carries_files_by_reference_and_the_model_reads_them(
    client: httpx.AsyncClient,
) -> None:
    image, pdf = await upload(client, PNG, "cat.png"), await upload(client, PDF, "report.pdf")
    conv = await create(client)
    events = await stream(
        client, conv, ask("What is in these?", {"file_id": image}, {"file_id": pdf})
    )
    reply = [e.data["message"] for e in events if e.name == "message"][-1]
    assert reply["text"] == (
        f"[image: cat.png, image/png, 640×480] [file: report.pdf, application/pdf, {len(PDF)} B]"
        "\nWhat is in these?"
    )
    doc = await messages(client, conv)
    assert doc["version"] == "1.2"
    assert doc["messages"][0]["attachments"] == [
        {
            "file_id": image,
            "media_type": "image/png",
            "name": "cat.png",
            "size": len(PNG),
            "width": 640,
            "height": 480,
        },
        {"file_id": pdf, "media_type": "application/pdf", "name": "report.pdf", "size": len(PDF)},
    ]
    refused = await client.delete(f"/files/{image}", headers=ALICE)
    assert refused.status_code == 409 and refused.json()["code"] == "file_in_use"
    assert (await client.delete(f"/conversations/{conv}", headers=ALICE)).status_code == 204
    assert (await client.delete(f"/files/{image}", headers=ALICE)).status_code == 204


async def test_an_inline_file_is_stored_on_arrival(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    data = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
    response = await client.post(
        f"/conversations/{conv}/deltas",
        json=ask("see", {"data": data, "name": "cat.png"}),
        headers=ALICE,
    )
    assert response.status_code == 200, response.text
    (attachment,) = (await messages(client, conv))["messages"][0]["attachments"]
    content = await client.get(f"/files/{attachment['file_id']}/content", headers=ALICE)
    assert content.content == PNG and attachment["name"] == "cat.png"


async def test_an_unknown_or_foreign_file_is_a_422_naming_it_and_nothing_is_stored(
    client: httpx.AsyncClient,
) -> None:
    bobs = await upload(client, PNG, "bob.png", BOB)
    conv = await create(client)
    inline = {"data": f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"}
    for bad in ("0" * 32, bobs, "not-an-id"):
        response = await client.post(
            f"/conversations/{conv}/deltas", json=ask("?", inline, {"file_id": bad}), headers=ALICE
        )
        assert response.status_code == 422, response.text
        (error,) = response.json()["errors"]
        assert error["loc"] == ["body", "messages", 0, "attachments", 1, "file_id"]
    lying = {"data": f"data:image/jpeg;base64,{base64.b64encode(PNG).decode()}"}
    response = await client.post(
        f"/conversations/{conv}/stream", json=ask("?", lying), headers=ALICE
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "messages", 0, "attachments", 0, "data"]
    assert (await messages(client, conv))["messages"] == []
    assert (await client.get("/files", headers=ALICE)).json()["items"] == []


async def test_exports_inline_the_files_and_imports_store_them(client: httpx.AsyncClient) -> None:
    image, pdf = await upload(client, PNG, "cat.png"), await upload(client, PDF, "report.pdf")
    conv = await create(client)
    await stream(client, conv, ask("look", {"file_id": image}, {"file_id": pdf}))
    for format in ("anthropic", "openai"):
        first = await messages(client, conv, format=format)
        assert base64.b64encode(PNG).decode() in str(first)
        response = await client.post(
            f"/conversations/import?format={format}", json=first, headers=ALICE
        )
        assert response.status_code == 201, response.text
        again = await messages(client, response.json()["id"], format=format)
        assert again == first

    portable = await messages(client, conv, attachments="inline")
    assert portable["messages"][0]["attachments"][0]["data"] == base64.b64encode(PNG).decode()
    assert "data" not in str((await messages(client, conv))["messages"][0]["attachments"])
    refused = await client.post(
        "/conversations", json={"messages": await messages(client, conv)}, headers=BOB
    )
    assert refused.status_code == 422  # Alice's file ids are not Bob's
    assert refused.json()["errors"][0]["loc"][-1] == "file_id"
    moved = await client.post("/conversations", json={"messages": portable}, headers=BOB)
    assert moved.status_code == 201, moved.text
    bobs = await client.get(f"/conversations/{moved.json()['id']}/messages", headers=BOB)
    (new_image, _) = bobs.json()["messages"][0]["attachments"]
    assert new_image["file_id"] != image and "data" not in new_image
    content = await client.get(f"/files/{new_image['file_id']}/content", headers=BOB)
    assert content.content == PNG


async def test_an_image_the_model_draws_is_stored_announced_and_referenced(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client, config={"provider": "offline", "tools": ["image_generation"]})
    events = await stream(client, conv, {"messages": [{"role": "user", "text": "draw a cat"}]})
    (block,) = [
        e.data for e in events if e.name == "content_block_start" and e.data["type"] == "image"
    ]
    assert (block["media_type"], block["width"], block["height"]) == ("image/png", 64, 64)
    content = await client.get(f"/files/{block['file_id']}/content", headers=ALICE)
    assert content.status_code == 200 and content.content.startswith(b"\x89PNG")
    reply = (await messages(client, conv))["messages"][-1]
    assert reply["role"] == "assistant" and reply["attachments"][0]["file_id"] == block["file_id"]
    kept = await client.delete(f"/files/{block['file_id']}", headers=ALICE)
    assert kept.status_code == 409  # the run's stored reply refers to it
    plain = await stream(client, conv, {"messages": [{"role": "user", "text": "thanks"}]})
    assert not [e for e in plain if e.name == "content_block_start" and e.data["type"] == "image"]
