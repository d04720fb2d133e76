"""A conversation is created with its first messages as a delta takes them, or with the
serialized document as before, told apart by JSON type (issue 31).

Through httpx on both databases: ``POST /conversations``, then ``GET …/messages`` and
``POST …/stream`` with the offline model.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import parse

QUESTION = "Why is the sky blue?"


async def _stored(client: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    page = await client.get(f"/conversations/{conversation_id}/messages")
    assert page.status_code == 200, page.text
    messages: list[dict[str, Any]] = page.json()["messages"]
    return messages


async def test_a_newcomers_body_creates_a_conversation_that_runs(
    client: httpx.AsyncClient,
) -> None:
    body = {"messages": [{"role": "user", "text": f"  {QUESTION} "}]}
    created = await client.post("/conversations", json={**body, "config": {"provider": "offline"}})
    assert created.status_code == 201, created.text
    conversation = created.json()
    assert conversation["message_count"] == 1 and conversation["status"] == "idle"
    stored = await _stored(client, conversation["id"])
    assert [(m["type"], m["role"], m["text"]) for m in stored] == [
        ("TextMessage", "user", QUESTION)
    ]

    stream = await client.post(f"/conversations/{conversation['id']}/stream", json={})
    assert stream.status_code == 200, stream.text
    events = parse(stream.text)
    assert events[-1].name == "done" and events[-1].data["status"] == "completed"
    after = await _stored(client, conversation["id"])
    assert len(after) == 2 and after[1]["role"] == "assistant" and after[1]["text"]


async def test_the_system_prompt_goes_before_the_delta_messages(
    client: httpx.AsyncClient,
) -> None:
    messages = [
        {"role": "system", "text": "Answer in one sentence."},
        {"role": "assistant", "text": "Sure, ask away."},
        {"role": "user", "text": QUESTION},
    ]
    created = await client.post(
        "/conversations", json={"system_prompt": "Be brief.", "messages": messages}
    )
    assert created.status_code == 201, created.text
    stored = await _stored(client, created.json()["id"])
    assert [(m["type"], m["role"], m["text"]) for m in stored] == [
        ("AgentMessage", "system", "Be brief."),
        ("AgentMessage", "system", "Answer in one sentence."),
        ("TextMessage", "assistant", "Sure, ask away."),
        ("TextMessage", "user", QUESTION),
    ]


async def test_the_serialized_document_still_loads(client: httpx.AsyncClient) -> None:
    document = {
        "version": "1.0",
        "messages": [
            {"type": "AgentMessage", "text": "Be brief.", "role": "system"},
            {"type": "TextMessage", "text": "Hi!", "role": "user"},
        ],
    }
    created = await client.post("/conversations", json={"messages": document})
    assert created.status_code == 201, created.text
    stored = await _stored(client, created.json()["id"])
    assert [(m["type"], m["text"]) for m in stored] == [
        ("AgentMessage", "Be brief."),
        ("TextMessage", "Hi!"),
    ]
    # what GET …/messages gives back is what can be posted again
    again = await client.post(
        "/conversations", json={"messages": {"version": "1.0", "messages": stored}}
    )
    assert again.status_code == 201, again.text
    assert await _stored(client, again.json()["id"]) == stored


BAD_ITEMS = [
    ({"role": "user", "text": 5}, ["body", "messages", 1, "user", "text"]),
    ({"role": "user"}, ["body", "messages", 1, "user", "text"]),
    ({"role": "critic", "text": "hm"}, ["body", "messages", 1]),
    ({"role": "user", "text": "hi", "extra": 1}, ["body", "messages", 1, "user", "extra"]),
    ({"role": "tool", "tool_call_id": "c1", "result": 1}, ["body", "messages", 1, "role"]),
]


@pytest.mark.parametrize(("item", "loc"), BAD_ITEMS)
async def test_a_bad_item_is_a_422_naming_its_index(
    client: httpx.AsyncClient, item: dict[str, Any], loc: list[Any]
) -> None:
    body = {"messages": [{"role": "user", "text": "fine"}, item]}
    refused = await client.post("/conversations", json=body)
    assert refused.status_code == 422, refused.text
    assert loc in [e["loc"] for e in refused.json()["errors"]]
    assert (await client.get("/conversations")).json()["items"] == []


async def test_a_tool_result_at_creation_says_where_it_belongs(client: httpx.AsyncClient) -> None:
    body = {"messages": [{"role": "tool", "tool_call_id": "c1", "error": "boom"}]}
    refused = await client.post("/conversations", json=body)
    assert refused.status_code == 422
    assert "deltas" in refused.json()["errors"][0]["msg"]


async def test_delta_messages_take_the_deltas_limits_which_the_document_states(
    settings: Settings,
) -> None:
    """`max_bundle_messages` and `max_text_chars` bound a new conversation's delta messages
    as a bundle's, and the served document says so (the serialized document is not bound)."""
    small = settings.model_copy(update={"max_text_chars": 10, "max_bundle_messages": 2})
    async with app_client(small) as client:
        document = (await client.get("/openapi.json")).json()
        field = document["components"]["schemas"]["ConversationCreate"]["properties"]["messages"]
        (array,) = [branch for branch in field["anyOf"] if branch.get("type") == "array"]
        assert array["maxItems"] == 2

        user = {"role": "user", "text": "u" * 10}
        made = await client.post("/conversations", json={"messages": [user, user]})
        assert made.status_code == 201, made.text
        many = await client.post("/conversations", json={"messages": [user] * 3})
        assert many.status_code == 422
        assert many.json()["errors"][0]["loc"] == ["body", "messages"]
        longer = await client.post(
            "/conversations", json={"messages": [user, {**user, "text": "u" * 11}]}
        )
        assert longer.status_code == 422
        assert longer.json()["errors"][0]["loc"] == ["body", "messages", 1, "text"]


@pytest.mark.parametrize("value", ["hello", 5, True])
async def test_messages_of_another_json_type_is_a_422(
    client: httpx.AsyncClient, value: object
) -> None:
    refused = await client.post("/conversations", json={"messages": value})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["loc"] == ["body", "messages"]
