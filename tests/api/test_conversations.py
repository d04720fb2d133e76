"""The conversation routes through httpx: create/load, list, read, deltas, export, clear."""

from __future__ import annotations

import json
from typing import Any

import httpx

PROBLEM = "application/problem+json"


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_create_with_system_prompt_returns_201_location_and_etag(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/conversations", json={"system_prompt": "Be brief.", "metadata": {"topic": "sky"}}
    )
    assert response.status_code == 201
    body = response.json()
    assert response.headers["location"] == f"/conversations/{body['id']}"
    assert response.headers["etag"] == f'"{body["version"]}"'
    assert body["status"] == "idle"
    assert body["message_count"] == 1
    assert body["metadata"] == {"topic": "sky"}
    messages = (await client.get(f"/conversations/{body['id']}/messages")).json()
    assert messages == {
        "messages": [{"type": "AgentMessage", "text": "Be brief.", "role": "system"}],
        "version": "1.0",
    }


async def test_get_reports_config_status_count_and_version(client: httpx.AsyncClient) -> None:
    conv = await create(client, config={"provider": "offline", "temperature": 0.5})
    response = await client.get(f"/conversations/{conv['id']}")
    assert response.status_code == 200
    body = response.json()
    assert body["config"] == {"provider": "offline", "temperature": 0.5}
    assert body["status"] == "idle"
    assert response.headers["etag"] == f'"{body["version"]}"'


async def test_delta_bundle_appends_in_order_including_injected_assistant(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client)
    bundle = {
        "messages": [
            {"role": "system", "text": "Answer in one sentence."},
            {"role": "assistant", "text": "  Sure, ask away. "},
            {"role": "user", "text": "Why is the sky blue?"},
        ],
        "config": {"model": "echo"},
    }
    response = await client.post(f"/conversations/{conv['id']}/deltas", json=bundle)
    assert response.status_code == 200, response.text
    assert response.json()["message_count"] == 3
    assert response.json()["config"] == {"model": "echo"}
    doc = (await client.get(f"/conversations/{conv['id']}/messages")).json()
    assert [(m["type"], m["role"], m["text"]) for m in doc["messages"]] == [
        ("AgentMessage", "system", "Answer in one sentence."),
        ("TextMessage", "assistant", "Sure, ask away."),
        ("TextMessage", "user", "Why is the sky blue?"),
    ]


async def test_config_patch_null_resets_a_key(client: httpx.AsyncClient) -> None:
    conv = await create(client, config={"temperature": 0.2, "model": "echo"})
    response = await client.post(
        f"/conversations/{conv['id']}/deltas", json={"config": {"temperature": None}}
    )
    assert response.json()["config"] == {"model": "echo"}


async def test_bad_item_is_named_by_index_and_field_and_nothing_is_applied(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client)
    bundle = {"messages": [{"role": "user", "text": "ok"}, {"role": "user"}]}
    response = await client.post(f"/conversations/{conv['id']}/deltas", json=bundle)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == 422
    assert problem["errors"][0]["loc"][:3] == ["body", "messages", 1]
    after = (await client.get(f"/conversations/{conv['id']}")).json()
    assert after["message_count"] == 0
    assert after["version"] == conv["version"]


async def test_unknown_config_key_is_refused(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    response = await client.post(
        f"/conversations/{conv['id']}/deltas", json={"config": {"api_base": "http://evil"}}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "config", "api_base"]


async def test_unavailable_provider_is_422_listing_the_available(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/conversations", json={"config": {"provider": "nope"}})
    assert response.status_code == 422
    assert "offline" in response.json()["available"]


async def test_unknown_server_tool_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/conversations", json={"config": {"tools": ["rm_rf"]}})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "config", "tools"]


async def test_a_client_tool_with_empty_parameters_takes_none(client: httpx.AsyncClient) -> None:
    tool = {"name": "lookup_order", "description": "", "parameters": {}}
    conv = await create(client, config={"client_tools": [tool]})
    stored = (await client.get(f"/conversations/{conv['id']}")).json()["config"]
    parameters = stored["client_tools"][0]["parameters"]
    assert parameters == {"type": "object", "properties": {}}
    untyped = {"name": "t", "parameters": {"properties": {}}}
    response = await client.post("/conversations", json={"config": {"client_tools": [untyped]}})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "config", "client_tools", 0]


async def test_stale_if_match_is_412_and_changes_nothing(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    url = f"/conversations/{conv['id']}/deltas"
    ok = await client.post(
        url,
        json={"messages": [{"role": "user", "text": "a"}]},
        headers={"If-Match": f'"{conv["version"]}"'},
    )
    assert ok.status_code == 200
    stale = await client.post(
        url,
        json={"messages": [{"role": "user", "text": "b"}]},
        headers={"If-Match": f'"{conv["version"]}"'},
    )
    assert stale.status_code == 412
    assert stale.headers["content-type"] == PROBLEM
    assert (await client.get(f"/conversations/{conv['id']}")).json()["message_count"] == 1


async def test_malformed_json_is_400_problem(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    response = await client.post(
        f"/conversations/{conv['id']}/deltas",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "/problems/malformed_json"


async def test_unknown_id_is_404_problem(client: httpx.AsyncClient) -> None:
    for method, path in [
        ("GET", "/conversations/nope"),
        ("GET", "/conversations/nope/messages"),
        ("POST", "/conversations/nope/clear"),
        ("DELETE", "/conversations/nope"),
        ("GET", "/conversations/nope/stream"),
        ("POST", "/conversations/nope/cancel"),
    ]:
        response = await client.request(method, path)
        assert response.status_code == 404, (method, path, response.text)
        assert response.headers["content-type"] == PROBLEM


async def test_another_token_cannot_see_a_conversation(client: httpx.AsyncClient) -> None:
    alice = {"Authorization": "Bearer alice-token"}
    created = await client.post("/conversations", json={}, headers=alice)
    conv_id = created.json()["id"]
    assert (await client.get(f"/conversations/{conv_id}", headers=alice)).status_code == 200
    bob = {"Authorization": "Bearer bob-token"}
    assert (await client.get(f"/conversations/{conv_id}", headers=bob)).status_code == 404
    assert (await client.get(f"/conversations/{conv_id}")).status_code == 404
    listed = (await client.get("/conversations", headers=bob)).json()
    assert listed["items"] == []


async def test_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    # POST /conversations takes PARLEY_MAX_IMPORT_BYTES (test_body_limits.py); a delta, 1 MiB.
    conv = await create(client)
    huge = {"messages": [{"role": "user", "text": "x" * 2_000_000}]}
    response = await client.post(f"/conversations/{conv['id']}/deltas", json=huge)
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM


async def test_list_is_newest_first_and_paginates(client: httpx.AsyncClient) -> None:
    ids = [(await create(client, metadata={"n": n}))["id"] for n in range(5)]
    first = (await client.get("/conversations", params={"limit": 2})).json()
    assert [c["id"] for c in first["items"]] == ids[::-1][:2]
    second = (
        await client.get("/conversations", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [c["id"] for c in second["items"]] == ids[::-1][2:4]
    bad = await client.get("/conversations", params={"cursor": "garbage"})
    assert bad.status_code == 400


async def test_export_then_import_gives_the_identical_document(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client, system_prompt="Be brief.")
    await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={"messages": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "yo"}]},
    )
    exported = (await client.get(f"/conversations/{conv['id']}/messages")).json()
    imported = await create(client, messages=exported)
    again = (await client.get(f"/conversations/{imported['id']}/messages")).json()
    assert again == exported


# JSON text that PostgreSQL's jsonb would not give back as sent: floats it reads back as
# integers (1e16 as 10000000000000000), a negative zero, integers past 64 bits, keys out of the
# order jsonb keeps (shortest first).
AWKWARD_JSON = (
    '{"bbb":1,"a":2,"x":-0.0,"z":1e16,"w":12345678901234567.0,"max":1.7976931348623157e308,'
    '"big":18446744073709551617,"nested":{"zz":[0.5,-0.0,1e16],"a":null}}'
)


def as_sent(value: Any) -> str:
    """The JSON text of ``value``: unlike ``==``, tells 1e16 from 10**16, -0.0 from 0.0, and
    keys in another order."""
    return json.dumps(value)


async def test_metadata_and_config_read_back_as_sent(client: httpx.AsyncClient) -> None:
    tool = (
        '{"name":"lookup","description":"Look it up.","parameters":{"type":"object",'
        '"properties":{"n":{"type":"number","maximum":1e16,"minimum":-0.0}},"required":["n"]}}'
    )
    body = f'{{"metadata":{AWKWARD_JSON},"config":{{"client_tools":[{tool}]}}}}'
    response = await client.post(
        "/conversations", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert as_sent(created["metadata"]) == as_sent(json.loads(AWKWARD_JSON))
    assert as_sent(created["config"]["client_tools"]) == as_sent([json.loads(tool)])

    got = (await client.get(f"/conversations/{created['id']}")).json()
    listed = (await client.get("/conversations")).json()["items"][0]
    forked = (await client.post(f"/conversations/{created['id']}/fork")).json()
    for conv in (got, listed):
        assert as_sent(conv["metadata"]) == as_sent(created["metadata"])
        assert as_sent(conv["config"]) == as_sent(created["config"])
    assert as_sent(forked["config"]) == as_sent(created["config"])
    del forked["metadata"]["forked_from"]
    assert as_sent(forked["metadata"]) == as_sent(created["metadata"])


async def test_tool_arguments_and_results_read_back_as_sent(client: httpx.AsyncClient) -> None:
    def call(call_id: str, **outcome: Any) -> dict[str, Any]:
        return {
            "type": "ToolCallMessage",
            "message": "",
            "tool_name": "lookup",
            "tool_call_id": call_id,
            "arguments": json.loads(AWKWARD_JSON),
            "result": None,
            "error": None,
            "role": "assistant",
            **outcome,
        }

    reordered = dict(reversed(json.loads(AWKWARD_JSON).items()))
    document: dict[str, Any] = {
        "messages": [
            {"type": "TextMessage", "text": "look it up", "role": "user"},
            call("call_1", result=reordered),
            call("call_2", pending=True),
        ],
        "version": "1.0",
    }
    conv = await create(client, messages=document)
    response = await client.post(
        f"/conversations/{conv['id']}/deltas",
        content=f'{{"messages":[{{"role":"tool","tool_call_id":"call_2","result":{AWKWARD_JSON}}}]}}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200, response.text

    exported = (await client.get(f"/conversations/{conv['id']}/messages")).json()
    del document["messages"][2]["pending"]
    document["messages"][2]["result"] = json.loads(AWKWARD_JSON)
    assert as_sent(exported) == as_sent(document)


async def test_import_of_bad_message_names_it(client: httpx.AsyncClient) -> None:
    doc = {
        "version": "1.0",
        "messages": [
            {"type": "TextMessage", "text": "hi", "role": "user"},
            {"type": "TextMessage", "text": "hi", "role": "wizard"},
        ],
    }
    response = await client.post("/conversations", json={"messages": doc})
    assert response.status_code == 422
    assert "messages[1].role" in response.json()["detail"]


async def test_provider_formats(client: httpx.AsyncClient) -> None:
    conv = await create(client, system_prompt="Be brief.")
    await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={"messages": [{"role": "user", "text": "hi"}]},
    )
    url = f"/conversations/{conv['id']}/messages"
    openai = (await client.get(url, params={"format": "openai"})).json()
    assert openai == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ]
    }
    anthropic = (await client.get(url, params={"format": "anthropic"})).json()
    assert anthropic["system"] == "Be brief."
    assert anthropic["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert (await client.get(url, params={"format": "xml"})).status_code == 422


async def test_context_keeps_system_prompt_and_recent_messages(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client, system_prompt="Be brief.")
    texts = [f"message number {i} " + "word " * 20 for i in range(6)]
    await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={
            "messages": [
                {"role": ("user", "assistant")[i % 2], "text": t} for i, t in enumerate(texts)
            ]
        },
    )
    full = (await client.get(f"/conversations/{conv['id']}/context")).json()
    assert full["dropped"] == 0 and len(full["messages"]) == 7
    budget = full["messages"][0]["tokens"] + 2 * full["messages"][-1]["tokens"]
    small = (
        await client.get(f"/conversations/{conv['id']}/context", params={"max_tokens": budget})
    ).json()
    assert [m["index"] for m in small["messages"]] == [0, 5, 6]
    assert small["total_tokens"] <= budget
    assert small["exact"] is False


async def test_clear_keeps_the_system_prompt(client: httpx.AsyncClient) -> None:
    conv = await create(client, system_prompt="Be brief.")
    await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={"messages": [{"role": "user", "text": "hi"}]},
    )
    response = await client.post(f"/conversations/{conv['id']}/clear")
    assert response.status_code == 200
    assert response.json()["message_count"] == 1


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    assert (await client.delete(f"/conversations/{conv['id']}")).status_code == 204
    assert (await client.get(f"/conversations/{conv['id']}")).status_code == 404


async def test_tool_result_for_a_call_that_is_not_pending_is_409(
    client: httpx.AsyncClient,
) -> None:
    conv = await create(client)
    response = await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={"messages": [{"role": "tool", "tool_call_id": "call_9", "result": 1}]},
    )
    assert response.status_code == 409
    assert response.json()["tool_call_id"] == "call_9"


async def test_cancel_without_a_run_is_409(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    response = await client.post(f"/conversations/{conv['id']}/cancel")
    assert response.status_code == 409
    assert response.json()["type"] == "/problems/no_active_run"


async def test_chunked_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> Any:
        for _ in range(40):
            yield b"x" * 65536

    conv = await create(client)
    response = await client.post(
        f"/conversations/{conv['id']}/deltas",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM


async def test_lone_surrogates_are_refused_not_stored(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/conversations",
        content=b'{"metadata": {"a": "\\ud800"}}',
        headers={"content-type": "application/json"},
    )
    assert created.status_code == 422
    assert created.json()["errors"][0]["loc"] == ["body", "metadata", "a"]
    conv = await create(client)
    for path, text in (("deltas", b"x\\udfff"), ("stream", b"x\\ud800")):
        refused = await client.post(
            f"/conversations/{conv['id']}/{path}",
            content=b'{"messages": [{"role": "user", "text": "' + text + b'"}]}',
            headers={"content-type": "application/json"},
        )
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["loc"] == ["body", "messages", 0, "text"]
    assert (await client.get(f"/conversations/{conv['id']}")).json()["message_count"] == 0


async def test_odd_if_match_and_cursor_are_400(client: httpx.AsyncClient) -> None:
    conv = await create(client)
    odd = await client.post(
        f"/conversations/{conv['id']}/deltas",
        json={"messages": []},
        headers={"If-Match": '"\u00b2"'.encode("latin-1")},
    )
    assert odd.status_code == 400
    import base64

    nested = base64.urlsafe_b64encode(b"[" * 3000).decode()
    assert (await client.get("/conversations", params={"cursor": nested})).status_code == 400


async def test_imported_text_over_the_limit_is_refused(
    database_url: str,
) -> None:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url=database_url, max_text_chars=10))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c,
    ):
        doc = {
            "version": "1.0",
            "messages": [{"type": "TextMessage", "text": "x" * 11, "role": "user"}],
        }
        response = await c.post("/conversations", json={"messages": doc})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "messages", "messages", 0, "text"]
