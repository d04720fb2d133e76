"""The history routes through httpx on both databases: fork, rewind, import, pages, context."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.domain import AgentMessage, MessageList, Role, TextMessage, ToolCallMessage
from app.settings import Settings
from app.storage import ConversationRepository, Database
from tests.api.conftest import app_client

PROBLEM = "application/problem+json"

HISTORY = MessageList(
    [
        AgentMessage("Be brief."),
        TextMessage("time?"),
        ToolCallMessage("clock", "c1", {"tz": "UTC"}, result={"h": 12}, message="Checking."),
        ToolCallMessage("tz", "c2", {}, error="no tz"),
        TextMessage("It is noon.", Role.ASSISTANT),
        TextMessage("and now?"),
        ToolCallMessage("ask", "c3", {"q": "where?"}, pending=True),
    ]
)


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    body.setdefault("messages", HISTORY.to_dict())
    body.setdefault("config", {"provider": "offline", "temperature": 0.5})
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def stored(client: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/conversations/{conversation_id}/messages")
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def assert_problem(response: httpx.Response, status: int, loc: list[Any] | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    if loc is not None:
        assert [e["loc"] for e in response.json()["errors"]] == [loc]


# --- fork ------------------------------------------------------------------------------------


async def test_fork_copies_everything_by_default(client: httpx.AsyncClient) -> None:
    source = await create(client, metadata={"topic": "time"})
    response = await client.post(f"/conversations/{source['id']}/fork")
    assert response.status_code == 201, response.text
    fork = response.json()
    assert response.headers["location"] == f"/conversations/{fork['id']}"
    assert fork["id"] != source["id"]
    assert fork["config"] == source["config"]
    assert fork["metadata"] == {"topic": "time", "forked_from": {"id": source["id"], "keep": 7}}
    assert fork["status"] == "requires_action" and fork["pending_tool_call_ids"] == ["c3"]
    assert await stored(client, fork["id"]) == await stored(client, source["id"])


async def test_fork_keeps_the_first_n_and_always_the_system_prompt(
    client: httpx.AsyncClient,
) -> None:
    source = await create(client)
    everything = await stored(client, source["id"])
    for keep, expected in [(3, everything[:3]), (0, everything[:1]), (7, everything)]:
        response = await client.post(f"/conversations/{source['id']}/fork", json={"keep": keep})
        assert response.status_code == 201, response.text
        fork = response.json()
        assert fork["metadata"]["forked_from"] == {"id": source["id"], "keep": keep}
        assert fork["message_count"] == len(expected)
        assert await stored(client, fork["id"]) == expected
    assert await stored(client, source["id"]) == everything  # the source is untouched


async def test_fork_refuses_out_of_range_and_foreign_conversations(
    client: httpx.AsyncClient,
) -> None:
    source = await create(client)
    url = f"/conversations/{source['id']}/fork"
    assert_problem(await client.post(url, json={"keep": 8}), 422, ["body", "keep"])
    assert_problem(await client.post(url, json={"keep": -1}), 422, ["body", "keep"])
    assert_problem(await client.post(url, json={"keep": "all"}), 422, ["body", "keep"])
    foreign = await client.post(url, headers={"Authorization": "Bearer someone-else"})
    assert_problem(foreign, 404)


# --- rewind ----------------------------------------------------------------------------------


async def test_rewind_drops_later_messages_and_bumps_the_version(
    client: httpx.AsyncClient,
) -> None:
    source = await create(client)
    everything = await stored(client, source["id"])
    response = await client.post(
        f"/conversations/{source['id']}/rewind",
        json={"keep": 5},
        headers={"If-Match": f'"{source["version"]}"'},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["version"] == source["version"] + 1
    assert response.headers["etag"] == f'"{body["version"]}"'
    assert (body["message_count"], body["status"], body["pending_tool_call_ids"]) == (5, "idle", [])
    assert await stored(client, source["id"]) == everything[:5]
    # the conversation continues from there
    delta = await client.post(
        f"/conversations/{source['id']}/deltas",
        json={"messages": [{"role": "user", "text": "thanks"}]},
    )
    assert delta.json()["message_count"] == 6


async def test_rewind_refusals(client: httpx.AsyncClient, settings: Settings) -> None:
    source = await create(client)
    url = f"/conversations/{source['id']}/rewind"
    assert_problem(await client.post(url, json={"keep": 8}), 422, ["body", "keep"])
    assert_problem(await client.post(url, json={}), 422, ["body", "keep"])
    stale = await client.post(url, json={"keep": 1}, headers={"If-Match": '"99"'})
    assert_problem(stale, 412)
    database = Database.from_settings(settings)
    try:
        async with database.transaction() as session:
            await ConversationRepository(session, owner=None).acquire_lease(
                source["id"], "run-elsewhere", 60
            )
    finally:
        await database.dispose()
    held = await client.post(url, json={"keep": 1})
    assert_problem(held, 409)
    assert held.json()["run_id"] == "run-elsewhere"
    assert len(await stored(client, source["id"])) == 7


# --- import ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_export_import_export_gives_the_same_document(
    client: httpx.AsyncClient, fmt: str
) -> None:
    source = await create(client)
    exported = (await client.get(f"/conversations/{source['id']}/messages?format={fmt}")).json()
    response = await client.post(
        f"/conversations/import?format={fmt}",
        json={**exported, "config": {"provider": "offline"}, "metadata": {"from": fmt}},
    )
    assert response.status_code == 201, response.text
    imported = response.json()
    assert response.headers["location"] == f"/conversations/{imported['id']}"
    assert imported["metadata"] == {"from": fmt} and imported["config"] == {"provider": "offline"}
    assert imported["pending_tool_call_ids"] == ["c3"]
    again = (await client.get(f"/conversations/{imported['id']}/messages?format={fmt}")).json()
    assert again == exported


async def test_import_ignores_other_request_keys(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/conversations/import?format=anthropic",
        json={"model": "claude", "max_tokens": 10, "system": "Be brief.", "messages": []},
    )
    assert response.status_code == 201, response.text
    assert await stored(client, response.json()["id"]) == [
        {"type": "AgentMessage", "text": "Be brief.", "role": "system"}
    ]


async def test_import_names_a_text_too_long_by_its_place_in_the_request(
    database_url: str,
) -> None:
    """It was named by the index of the message it would have become (the system prompt and
    calls shift it), with `loc` ["body", "messages"] only: "message 1" for `messages[0]`."""
    settings = Settings(database_url=database_url, sse_ping_seconds=0, max_text_chars=10)
    long = "x" * 11
    call = {"id": "c", "function": {"name": "f", "arguments": "{}"}}
    cases: list[tuple[str, dict[str, Any], list[Any]]] = [
        (
            "anthropic",
            {"system": "s", "messages": [{"role": "user", "content": long}]},
            ["body", "messages", 0, "content"],
        ),
        (
            "anthropic",
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "text", "text": "a"}, long_text()]},
                ]
            },
            ["body", "messages", 1, "content", 1, "text"],
        ),
        ("anthropic", {"system": [long_text(), long_text()], "messages": []}, ["body", "system"]),
        (
            "openai",
            {
                "messages": [
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c", "content": "1"},
                    {"role": "user", "content": long},
                ]
            },
            ["body", "messages", 2, "content"],
        ),
        (
            "openai",
            {"messages": [{"role": "system", "content": long}]},
            ["body", "messages", 0, "content"],
        ),
        (  # a reply's text before its calls, as the Anthropic shape's text block is checked
            "openai",
            {"messages": [{"role": "assistant", "content": long, "tool_calls": [call]}]},
            ["body", "messages", 0, "content"],
        ),
    ]
    async with app_client(settings) as client:
        for fmt, body, loc in cases:
            response = await client.post(f"/conversations/import?format={fmt}", json=body)
            assert_problem(response, 422, loc)
            assert "characters of text; at most 10" in response.json()["detail"]
        assert (await client.get("/conversations")).json()["items"] == []  # nothing stored


def long_text() -> dict[str, str]:
    return {"type": "text", "text": "y" * 11}


async def test_import_names_a_bad_item_by_index_and_field(client: httpx.AsyncClient) -> None:
    bad_call = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}
    cases: list[tuple[str, dict[str, Any], list[Any]]] = [
        (
            "openai",
            {"messages": [{"role": "user", "content": "hi"}, {"role": "x"}]},
            ["body", "messages", 1, "role"],
        ),
        (
            "openai",
            {"messages": [bad_call, {"role": "tool", "tool_call_id": "d"}]},
            ["body", "messages", 1, "tool_call_id"],
        ),
        ("openai", {"system": "x", "messages": []}, ["body", "system"]),
        (
            "anthropic",
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            ["body", "messages", 0, "content", 0, "type"],
        ),
        ("anthropic", {"messages": "nope"}, ["body", "messages"]),
    ]
    for fmt, body, loc in cases:
        response = await client.post(f"/conversations/import?format={fmt}", json=body)
        assert_problem(response, 422, loc)
    assert_problem(
        await client.post("/conversations/import?format=xml", json={"messages": []}), 422
    )
    assert_problem(await client.post("/conversations/import", json={"messages": []}), 422)
    assert (await client.get("/conversations")).json()["items"] == []


# --- pages -----------------------------------------------------------------------------------


async def test_pages_walk_the_whole_document(client: httpx.AsyncClient) -> None:
    source = await create(client)
    url = f"/conversations/{source['id']}/messages"
    everything = await stored(client, source["id"])
    seen: list[dict[str, Any]] = []
    after: int | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3} if after is None else {"limit": 3, "after": after}
        page = (await client.get(url, params=params)).json()
        assert page["version"] == "1.0" and page["total"] == 7
        assert page["start"] == len(seen)
        seen.extend(page["messages"])
        pages += 1
        after = page["next_after"]
        if after is None:
            break
    assert (seen, pages) == (everything, 3)
    tail = (await client.get(url, params={"after": 5})).json()
    assert tail["messages"] == everything[6:] and tail["next_after"] is None
    beyond = (await client.get(url, params={"after": 50})).json()
    assert beyond["messages"] == [] and beyond["next_after"] is None


async def test_pages_validate_their_parameters(client: httpx.AsyncClient) -> None:
    source = await create(client)
    url = f"/conversations/{source['id']}/messages"
    for params, loc in [
        ({"after": -1}, ["query", "after"]),
        ({"after": "x"}, ["query", "after"]),
        ({"limit": 0}, ["query", "limit"]),
        ({"limit": 1001}, ["query", "limit"]),
        ({"limit": 2, "format": "openai"}, ["query", "format"]),
    ]:
        assert_problem(await client.get(url, params=params), 422, loc)
    missing = await client.get("/conversations/" + "0" * 32 + "/messages", params={"limit": 2})
    assert_problem(missing, 404)


# --- context ---------------------------------------------------------------------------------


async def test_context_shows_the_repaired_history(client: httpx.AsyncClient) -> None:
    history = MessageList(
        [
            TextMessage("hello"),
            TextMessage("", Role.ASSISTANT, incomplete=True),
            TextMessage("anyone?"),
            ToolCallMessage("ask", "c9", {}, pending=True),
        ]
    )
    conv = await create(client, messages=history.to_dict())
    context = (await client.get(f"/conversations/{conv['id']}/context")).json()
    assert [(m["indices"], m["repaired"]) for m in context["messages"]] == [
        ([0, 2], True),  # the empty incomplete reply 1 is not sent
        ([3], True),
    ]
    assert context["messages"][0]["message"]["text"] == "hello\n\nanyone?"
    assert context["messages"][1]["message"]["error"].startswith("interrupted")
    assert context["total_tokens"] == sum(m["tokens"] for m in context["messages"])
    assert len(await stored(client, conv["id"])) == 4  # nothing stored changed
