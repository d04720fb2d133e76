"""Files in the AI SDK's protocol, on both databases: a user UIMessage's `file` parts (data URLs,
as `useChat` sends attachments; a file's content URL) become attachments, stored as files with
the same checks as a delta's (a refusal is a 422 naming the part, storing nothing); an image the
model draws streams as a `file` chunk whose url is the file's content route under the root
path; `?format=ai-sdk` shows attachments as `file` parts. The Node scenario (`files`) runs the
real `ai` package's `Chat` against a uvicorn under `--root-path`, validating every chunk."""

from __future__ import annotations

import base64
from collections.abc import Callable

import httpx
import pytest

from app.api.ai_sdk.chunks import Translator
from app.domain import Attachment, ContentBlockStart
from app.providers.png import draw_png
from app.runs.events import chunk_event, first_event, run_started
from tests.api.conftest import LiveServer
from tests.frontend.conftest import API_KEY, AUTH, NodeRunner, create
from tests.frontend.test_ai_sdk_api import chat, chunks, ui_messages

PNG = draw_png(40, 30, "cat")
DATA_URL = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
DRAWS = {"provider": "offline", "tools": ["image_generation"]}


def asking(conv_id: str, *files: dict[str, str], text: str = "What is this?") -> dict[str, object]:
    parts = [*files, {"type": "text", "text": text}]
    return {"id": conv_id, "messages": [{"id": "u1", "role": "user", "parts": parts}]}


def picked(url: str = DATA_URL, name: str = "cat.png") -> dict[str, str]:
    return {"type": "file", "mediaType": "image/png", "filename": name, "url": url}


async def test_file_parts_become_attachments_and_read_back_as_file_parts(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    sent = chunks(await chat(client, asking(conv_id, picked())))
    text = "".join(c["delta"] for c in sent if c["type"] == "text-delta")
    assert text == "[image: cat.png, image/png, 40×30]\nWhat is this?"  # the model read it
    stored = (await client.get(f"/conversations/{conv_id}/messages", headers=AUTH)).json()
    (attachment,) = stored["messages"][0]["attachments"]
    file_id = attachment["file_id"]
    assert (attachment["name"], attachment["size"]) == ("cat.png", len(PNG))
    url = f"/files/{file_id}/content"
    user = (await ui_messages(client, conv_id))[0]
    assert user["parts"] == [
        {"type": "file", "mediaType": "image/png", "filename": "cat.png", "url": url},
        {"type": "text", "text": "What is this?", "state": "done"},
    ]
    # the url as ?format=ai-sdk gives it refers to the same file (a client sending it back)
    again = chunks(await chat(client, asking(conv_id, picked(url), text="And this?")))
    assert again[-1] == {"type": "finish", "finishReason": "stop"}
    stored = (await client.get(f"/conversations/{conv_id}/messages", headers=AUTH)).json()
    assert stored["messages"][2]["attachments"] == [attachment]


async def test_refused_file_parts_are_422s_naming_the_part_and_store_nothing(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    svg = "data:image/svg+xml;base64," + base64.b64encode(b"<svg></svg>").decode()
    lying = "data:image/jpeg;base64," + base64.b64encode(PNG).decode()
    foreign = f"/files/{'0' * 32}/content"
    checked_first = ("https://example.com/cat.png", "data:image/png;base64,%%%", foreign)
    for bad in (*checked_first, svg, lying):
        body = asking(conv_id, picked(), picked(bad))
        response = await chat(client, body)
        assert response.status_code == 422, (bad, response.text)
        (error,) = response.json()["errors"]
        assert error["loc"] == ["body", "messages", 0, "parts", 1, "url"], bad
        if bad in checked_first:  # refused before any file is stored
            assert (await client.get("/files", headers=AUTH)).json()["items"] == []
    # (the store refuses svg and the lie after storing the part before: a file made from a
    # message, which no message refers to, so the sweep deletes it)
    assert await ui_messages(client, conv_id) == []


async def test_an_image_the_model_draws_is_a_file_chunk(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, config=DRAWS)
    sent = chunks(await chat(client, asking(conv_id, text="draw a cat")))
    (file,) = [c for c in sent if c["type"] == "file"]
    assert file["mediaType"] == "image/png" and file["url"].startswith("/files/")
    content = await client.get(file["url"], headers=AUTH)
    assert content.status_code == 200 and content.content.startswith(b"\x89PNG")
    reply = (await ui_messages(client, conv_id))[1]
    assert [p["type"] for p in reply["parts"]] == ["step-start", "file", "text"]
    assert reply["parts"][1]["url"] == file["url"]


def test_the_file_chunk_names_the_content_route_under_the_root_path() -> None:
    image = Attachment("f" * 32, "image/png", "drawn.png", 10, 4, 4)
    started = first_event(run_started("r" * 32, "c" * 32, 1, 1))
    block = chunk_event(started.seq, ContentBlockStart(0, "image", image))
    translator = Translator("m-1", lambda file_id: f"/parley/files/{file_id}/content")
    out = [c for e in (started, block) for c in translator.chunks(e)]
    url = f"/parley/files/{'f' * 32}/content"
    assert out[-1] == {"type": "file", "url": url, "mediaType": "image/png"}


@pytest.fixture
def served(live_server: Callable[..., LiveServer]) -> LiveServer:
    return live_server(prefix="/parley", api_keys=API_KEY)


async def test_use_chat_sends_a_file_and_shows_the_image_the_model_draws(
    served: LiveServer, node: type[NodeRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_PNG", base64.b64encode(PNG).decode())
    async with httpx.AsyncClient(base_url=served.url) as http:
        conv_id = await create(http, config=DRAWS)
        summary = await node(served.url)("files", conv_id)
        stored = (await http.get(f"/conversations/{conv_id}/messages", headers=AUTH)).json()
    user_file, drawn = summary["files"]
    ids = [m["attachments"][0]["file_id"] for m in stored["messages"] if m.get("attachments")]
    assert [user_file["url"], drawn["url"]] == [f"/parley/files/{i}/content" for i in ids]
    assert user_file["filename"] == "cat.png"


async def test_a_file_alone_is_a_message(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    body = {"id": conv_id, "messages": [{"id": "u1", "role": "user", "parts": [picked()]}]}
    sent = chunks(await chat(client, body))
    text = "".join(c["delta"] for c in sent if c["type"] == "text-delta")
    assert text.startswith("[image: cat.png, image/png, 40×30]")
    user = (await ui_messages(client, conv_id))[0]
    assert [p["type"] for p in user["parts"]] == ["file"]  # as useChat holds it
