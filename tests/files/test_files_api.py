"""The files API on both databases: upload, read, content, list, delete, owner scope, dedupe,
and hostile uploads — each a clear 4xx that stores nothing."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.storage import Database
from app.storage.files import FILE_BLOBS, FILE_CHUNKS, FILES, add_refs
from tests.api.conftest import LiveServer
from tests.files import samples

ALICE = {"Authorization": "Bearer alice"}
BOB = {"Authorization": "Bearer bob"}


async def stored(database_url: str) -> tuple[int, int, int]:
    """Rows of files, blobs and chunks in the test database."""
    database = Database(database_url)
    try:
        async with database.session(readonly=True) as session:
            counts = [
                (await session.execute(select(func.count()).select_from(t))).scalar_one()
                for t in (FILES, FILE_BLOBS, FILE_CHUNKS)
            ]
    finally:
        await database.dispose()
    return counts[0], counts[1], counts[2]


async def upload(
    client: httpx.AsyncClient,
    data: bytes,
    name: str,
    media_type: str | None = None,
    headers: dict[str, str] = ALICE,
    **form: str,
) -> httpx.Response:
    part = (name, data, media_type) if media_type else (name, data)
    return await client.post("/files", files={"file": part}, data=form, headers=headers)


async def test_an_image_is_uploaded_read_and_deleted(client: httpx.AsyncClient) -> None:
    data = samples.png(4, 3)
    response = await upload(client, data, "cat.png", "image/png", purpose="vision")
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["location"] == f"/files/{body['id']}"
    assert {k: body[k] for k in ("name", "media_type", "size", "width", "height", "purpose")} == {
        "name": "cat.png",
        "media_type": "image/png",
        "size": len(data),
        "width": 4,
        "height": 3,
        "purpose": "vision",
    }
    assert (await client.get(f"/files/{body['id']}", headers=ALICE)).json() == body
    content = await client.get(f"/files/{body['id']}/content", headers=ALICE)
    assert content.status_code == 200 and content.content == data
    assert content.headers["content-type"] == "image/png"
    assert content.headers["content-disposition"].startswith("inline;")
    assert content.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in content.headers["content-security-policy"]
    page = (await client.get("/files", headers=ALICE)).json()
    assert [f["id"] for f in page["items"]] == [body["id"]] and page["next_cursor"] is None
    assert (await client.delete(f"/files/{body['id']}", headers=ALICE)).status_code == 204
    gone = await client.get(f"/files/{body['id']}", headers=ALICE)
    assert gone.status_code == 404 and gone.json()["code"] == "file_not_found"


async def test_documents_are_served_as_attachments(client: httpx.AsyncClient) -> None:
    pdf = (await upload(client, samples.pdf(), "Résumé 2026.pdf")).json()
    content = await client.get(f"/files/{pdf['id']}/content", headers=ALICE)
    assert content.headers["content-type"] == "application/pdf"
    disposition = content.headers["content-disposition"]
    assert disposition.startswith("attachment;") and "R%C3%A9sum%C3%A9%202026.pdf" in disposition
    notes = (await upload(client, b"# Notes\n", "notes.md")).json()
    assert notes["media_type"] == "text/markdown"
    text = await client.get(f"/files/{notes['id']}/content", headers=ALICE)
    assert text.headers["content-type"] == "text/markdown; charset=utf-8"


async def test_another_token_sees_none_of_them(client: httpx.AsyncClient) -> None:
    file_id = (await upload(client, samples.gif(), "a.gif")).json()["id"]
    for method, path in [
        ("GET", f"/files/{file_id}"),
        ("GET", f"/files/{file_id}/content"),
        ("DELETE", f"/files/{file_id}"),
    ]:
        response = await client.request(method, path, headers=BOB)
        assert response.status_code == 404, (method, path)
    assert (await client.get("/files", headers=BOB)).json()["items"] == []
    assert (await client.get(f"/files/{file_id}", headers=ALICE)).status_code == 200


async def test_the_same_bytes_twice_are_stored_once(
    client: httpx.AsyncClient, database_url: str
) -> None:
    first = (await upload(client, samples.jpeg(), "a.jpg")).json()
    second = (await upload(client, samples.jpeg(), "b.jpeg")).json()
    assert first["id"] != second["id"] and first["sha256"] == second["sha256"]
    assert await stored(database_url) == (2, 1, 1)


async def test_a_file_past_the_spool_threshold_streams_through(
    client: httpx.AsyncClient, database_url: str
) -> None:
    data = samples.pdf(5 * (1 << 20) + 17)  # Starlette spools a part to disk past 1 MiB
    body = (await upload(client, data, "big.pdf")).json()
    assert body["size"] == len(data)
    assert await stored(database_url) == (1, 1, 6)  # six 1 MiB chunks
    content = await client.get(f"/files/{body['id']}/content", headers=ALICE)
    assert content.content == data and content.headers["content-length"] == str(len(data))


HOSTILE: list[Any] = [
    pytest.param(samples.png(), "report.pdf", None, 415, "unsupported_file", id="png-named-pdf"),
    pytest.param(
        samples.png(),
        "cat.png",
        "application/pdf",
        415,
        "unsupported_file",
        id="declared-otherwise",
    ),
    pytest.param(
        samples.png() + samples.ZIP_END,
        "cat.png",
        None,
        415,
        "unsupported_file",
        id="polyglot-png-zip",
    ),
    pytest.param(
        samples.SVG, "logo.svg", "image/svg+xml", 415, "unsupported_file", id="svg-script"
    ),
    pytest.param(samples.SVG, "logo.png", "image/png", 415, "unsupported_file", id="svg-named-png"),
    pytest.param(samples.HTML, "page.html", "text/html", 415, "unsupported_file", id="html"),
    pytest.param(
        samples.HTML, "page.txt", "text/plain", 415, "unsupported_file", id="html-named-txt"
    ),
    pytest.param(
        b"%PDF-1.7\n" + bytes(range(256)) * 4000,
        "a.pdf",
        None,
        415,
        "unsupported_file",
        id="pdf-header-junk",
    ),
    pytest.param(
        b"%PDF-1.7\n" + b"\x00" * 100_000 + samples.ZIP_END,
        "a.pdf",
        None,
        415,
        "unsupported_file",
        id="pdf-zip-bomb",
    ),
    pytest.param(b"PK\x03\x04" + b"\x00" * 100, "a.zip", None, 415, "unsupported_file", id="zip"),
    pytest.param(b"", "empty.txt", None, 422, "empty_file", id="zero-bytes"),
]


@pytest.mark.parametrize(("data", "name", "declared", "status", "code"), HOSTILE)
async def test_a_hostile_upload_is_refused_and_stores_nothing(
    client: httpx.AsyncClient,
    database_url: str,
    data: bytes,
    name: str,
    declared: str | None,
    status: int,
    code: str,
) -> None:
    response = await upload(client, data, name, declared)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    assert await stored(database_url) == (0, 0, 0)


async def test_two_files_or_none_are_refused(client: httpx.AsyncClient, database_url: str) -> None:
    two = await client.post(
        "/files",
        files=[("file", ("a.png", samples.png())), ("file", ("b.gif", samples.gif()))],
        headers=ALICE,
    )
    assert two.status_code == 422 and two.json()["errors"][0]["type"] == "too_many_files"
    other = await client.post(
        "/files",
        files=[("file", ("a.png", samples.png())), ("extra", ("b.gif", samples.gif()))],
        headers=ALICE,
    )
    assert other.status_code == 422
    form = b'--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nvision\r\n--x--\r\n'
    multipart = {**ALICE, "Content-Type": "multipart/form-data; boundary=x"}
    none = await client.post("/files", content=form, headers=multipart)
    assert none.status_code == 422 and none.json()["errors"][0]["loc"] == ["body", "file"]
    assert await stored(database_url) == (0, 0, 0)


async def test_a_file_over_its_kinds_limit_is_a_413(
    live_server: Callable[..., LiveServer], database_url: str
) -> None:
    server = live_server(file_max_image_bytes=2048)
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await upload(client, samples.jpeg(padding=4096), "big.jpg")
        assert response.status_code == 413
        assert response.json()["code"] == "file_too_large" and response.json()["limit"] == 2048
        small = await upload(client, samples.pdf(4096), "fine.pdf")  # documents: 32 MiB
        assert small.status_code == 201
    assert await stored(database_url) == (1, 1, 1)


def test_a_huge_content_length_is_refused_before_the_body(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server()
    boundary = "b0undary"
    head = (
        f"POST /files HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        "Content-Length: 2147483648\r\nAuthorization: Bearer alice\r\n\r\n"
    )
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n'
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(head.encode() + body.encode() + samples.png())
        answer = read_response(conn)
    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert "payload_too_large" in answer


def read_response(conn: socket.socket) -> str:
    """A response's head, then its body to its ``Content-Length``: they may come in separate
    segments (a single ``recv`` got the head alone on a loaded machine)."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    while length and len(body) < int(length[1]) and (chunk := conn.recv(65536)):
        body += chunk
    return (head + b"\r\n\r\n" + body).decode("latin-1")


async def test_a_file_a_conversation_refers_to_is_kept_until_the_conversation_goes(
    client: httpx.AsyncClient, database_url: str
) -> None:
    file_id = (await upload(client, samples.pdf(), "spec.pdf")).json()["id"]
    created = await client.post("/conversations", json={}, headers=ALICE)
    conversation_id = created.json()["id"]
    database = Database(database_url)  # as the messages' layer records it (docs/files.md)
    try:
        async with database.transaction() as session:
            await add_refs(session, conversation_id, [file_id])
    finally:
        await database.dispose()
    refused = await client.delete(f"/files/{file_id}", headers=ALICE)
    assert refused.status_code == 409
    assert refused.json()["code"] == "file_in_use"
    assert refused.json()["conversation_ids"] == [conversation_id]
    gone = await client.delete(f"/conversations/{conversation_id}", headers=ALICE)
    assert gone.status_code == 204
    assert (await client.delete(f"/files/{file_id}", headers=ALICE)).status_code == 204
    assert await stored(database_url) == (0, 0, 0)


async def test_a_body_past_the_route_limit_without_a_length_is_a_413(
    live_server: Callable[..., LiveServer], database_url: str
) -> None:
    server = live_server(file_max_image_bytes=1024, file_max_document_bytes=2048)
    boundary = "x"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n"
    ).encode()

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: sent as it comes
        yield head + samples.pdf(4096)[:4000]
        for _ in range(40):
            yield b"\0" * 65536
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {**ALICE, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await client.post("/files", content=chunked(), headers=headers)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert await stored(database_url) == (0, 0, 0)
