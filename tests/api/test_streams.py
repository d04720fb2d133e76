"""The SSE stream in-process: event protocol, persistence, tools, errors before the first byte."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema_rs

from app.settings import Settings
from tests.api.conftest import app_client
from tests.api.sse import Event, parse


async def create(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    conv_id: str = response.json()["id"]
    return conv_id


async def stream(client: httpx.AsyncClient, conv_id: str, body: Any = None) -> list[Event]:
    url = f"/conversations/{conv_id}/stream"
    # No body at all (not even a Content-Type) runs the conversation as it stands.
    response = await (client.post(url, json=body) if body is not None else client.post(url))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.startswith("retry: 1000\n\n")  # PARLEY_SSE_RETRY_MS, once, first
    assert response.text.count("retry:") == 1
    return parse(response.text)


async def test_post_stream_applies_delta_then_streams_words_and_persists(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, system_prompt="Be brief.")
    events = await stream(
        client, conv_id, {"messages": [{"role": "user", "text": "why is the sky blue"}]}
    )
    names = [e.name for e in events]
    assert names[0] == "run_started" and names[-1] == "done"
    assert names.count("content_block_delta") == 5
    run_id = events[0].data["run_id"]
    assert all(e.id and e.id.startswith(f"{run_id}:") for e in events)
    ids = [int(e.id.split(":")[1]) for e in events if e.id]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    deltas = "".join(e.data["delta"] for e in events if e.name == "content_block_delta")
    assert deltas == "why is the sky blue"
    message = next(e for e in events if e.name == "message")
    assert message.data["index"] == 2
    assert message.data["message"] == {
        "type": "TextMessage",
        "text": "why is the sky blue",
        "role": "assistant",
    }
    assert names.index("message") < names.index("done")
    done = events[-1].data
    assert done["status"] == "completed" and done["message_count"] == 3
    doc = (await client.get(f"/conversations/{conv_id}/messages")).json()
    assert doc["messages"][-1] == message.data["message"]
    state = (await client.get(f"/conversations/{conv_id}")).json()
    assert state["status"] == "idle" and state["version"] == done["version"]


async def test_post_stream_without_a_body_runs_the_conversation_as_it_stands_and_get_does_not(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    await client.post(
        f"/conversations/{conv_id}/deltas", json={"messages": [{"role": "user", "text": "hi"}]}
    )
    idle = await client.get(f"/conversations/{conv_id}/stream")
    assert idle.status_code == 204 and idle.content == b""
    assert (await client.get(f"/conversations/{conv_id}/runs")).json()["items"] == []
    events = await stream(client, conv_id)
    assert [e.data["delta"] for e in events if e.name == "content_block_delta"] == ["hi"]
    stop = next(e for e in events if e.name == "message_stop")
    assert stop.data["stop_reason"] == "end_turn"


async def test_server_tool_round(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, config={"tools": ["add_numbers"]})
    events = await stream(
        client,
        conv_id,
        {"messages": [{"role": "user", "text": 'call add_numbers {"numbers": [1, 2, 3.5]}'}]},
    )
    names = [e.name for e in events]
    assert "tool_use" in names
    messages = [e.data["message"] for e in events if e.name == "message"]
    assert messages[0]["type"] == "ToolCallMessage" and messages[0]["result"] == 6.5
    assert messages[1] == {"type": "TextMessage", "text": "6.5", "role": "assistant"}
    assert events[-1].data["status"] == "completed"


async def test_client_tool_requires_action_then_continues(client: httpx.AsyncClient) -> None:
    tool = {
        "name": "lookup",
        "description": "Look it up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    conv_id = await create(client, config={"client_tools": [tool]})
    events = await stream(
        client, conv_id, {"messages": [{"role": "user", "text": 'call lookup {"q": "x"}'}]}
    )
    assert events[-1].data["status"] == "requires_action"
    action = next(e for e in events if e.name == "requires_action")
    call_id = action.data["tool_calls"][0]["tool_call_id"]
    state = (await client.get(f"/conversations/{conv_id}")).json()
    assert state["status"] == "requires_action"
    assert state["pending_tool_call_ids"] == [call_id]

    blocked = await client.post(f"/conversations/{conv_id}/stream")
    assert blocked.status_code == 409
    assert blocked.json()["pending_tool_call_ids"] == [call_id]

    events = await stream(
        client,
        conv_id,
        {"messages": [{"role": "tool", "tool_call_id": call_id, "result": {"answer": 42}}]},
    )
    final = [e.data["message"] for e in events if e.name == "message"][-1]
    assert final["text"] == '{"answer": 42}'
    twice = await client.post(
        f"/conversations/{conv_id}/deltas",
        json={"messages": [{"role": "tool", "tool_call_id": call_id, "result": 1}]},
    )
    assert twice.status_code == 409


async def test_a_runs_tool_arguments_and_the_clients_result_are_stored_as_sent(
    client: httpx.AsyncClient,
) -> None:
    """Numbers jsonb would rewrite (1e16, -0.0, past 64 bits) and keys out of its order."""
    awkward = '{"bbb":1,"a":2,"x":-0.0,"z":1e16,"w":12345678901234567.0,"big":18446744073709551617}'
    tool = {"name": "lookup", "description": "Look it up.", "parameters": {"type": "object"}}
    conv_id = await create(client, config={"client_tools": [tool]})
    events = await stream(
        client, conv_id, {"messages": [{"role": "user", "text": f"call lookup {awkward}"}]}
    )
    action = next(e for e in events if e.name == "requires_action")
    call = action.data["tool_calls"][0]
    assert json.dumps(call["arguments"]) == json.dumps(json.loads(awkward))
    response = await client.post(
        f"/conversations/{conv_id}/stream",
        content=f'{{"messages":[{{"role":"tool","tool_call_id":"{call["tool_call_id"]}",'
        f'"result":{awkward}}}]}}',
        headers={"content-type": "application/json"},
    )
    assert parse(response.text)[-1].data["status"] == "completed"

    stored = (await client.get(f"/conversations/{conv_id}/messages")).json()["messages"][1]
    assert json.dumps(stored["arguments"]) == json.dumps(json.loads(awkward))
    assert json.dumps(stored["result"]) == json.dumps(json.loads(awkward))


async def test_unavailable_provider_at_stream_time_is_422_before_any_event(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    response = await client.post(
        f"/conversations/{conv_id}/stream",
        json={"config": {"provider": "nope"}, "messages": [{"role": "user", "text": "hi"}]},
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert (await client.get(f"/conversations/{conv_id}")).json()["message_count"] == 0


async def test_tool_round_limit_ends_with_error_then_done(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, config={"tools": ["add_numbers"], "max_tool_rounds": 0})
    events = await stream(
        client,
        conv_id,
        {"messages": [{"role": "user", "text": 'call add_numbers {"numbers": [1]}'}]},
    )
    error = next(e for e in events if e.name == "error")
    assert error.data["code"] == "max_tool_rounds"
    assert events[-1].name == "done" and events[-1].data["status"] == "failed"
    state = (await client.get(f"/conversations/{conv_id}")).json()
    assert state["status"] == "idle"


async def test_nothing_to_answer_is_409_and_leaves_the_conversation_idle(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, system_prompt="Be brief.")
    response = await client.post(f"/conversations/{conv_id}/stream")
    assert response.status_code == 409
    assert response.json()["type"] == "/problems/nothing_to_answer"
    state = (await client.get(f"/conversations/{conv_id}")).json()
    assert state["status"] == "idle" and state["message_count"] == 1


async def test_an_eventsource_reconnect_after_done_gets_204_and_runs_nothing(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    events = await stream(client, conv_id, {"messages": [{"role": "user", "text": "hi"}]})
    headers = {"Last-Event-ID": str(events[-1].id)}
    again = await client.get(f"/conversations/{conv_id}/stream", headers=headers)
    assert again.status_code == 204
    assert (await client.get(f"/conversations/{conv_id}")).json()["message_count"] == 2


async def test_a_budget_without_room_for_the_latest_message_is_context_too_long(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, config={"context_max_tokens": 1})
    events = await stream(client, conv_id, {"messages": [{"role": "user", "text": "hello"}]})
    error = next(e for e in events if e.name == "error")
    assert error.data["code"] == "context_too_long"
    assert events[-1].data["status"] == "failed"


async def test_keep_alive_pings_end_their_lines_as_the_events_do(database_url: str) -> None:
    settings = Settings(database_url=database_url, sse_ping_seconds=0.05, offline_delay_ms=40)
    async with app_client(settings) as client:
        conv_id = await create(client)
        url = f"/conversations/{conv_id}/stream"
        response = await client.post(
            url, json={"messages": [{"role": "user", "text": "a b c d e"}]}
        )
    body = response.content
    assert b": ping" in body
    assert b"\r" not in body and body.endswith(b"\n\n")
    assert [e.name for e in parse(body.decode())][-1] == "done"


async def test_every_events_body_matches_the_schema_the_document_gives_its_name(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    route = document["paths"]["/conversations/{conversation_id}/stream"]["post"]
    variants = route["responses"]["200"]["content"]["text/event-stream"]["x-itemSchema"]["oneOf"]
    by_name = {v["properties"]["event"]["const"]: v["properties"]["data"] for v in variants}
    weather = {"name": "weather", "description": "The weather.", "parameters": {}}
    conv_id = await create(client, config={"tools": ["add_numbers"], "client_tools": [weather]})
    say = {"messages": [{"role": "user", "text": "hi there"}]}
    add = {"messages": [{"role": "user", "text": 'call add_numbers {"numbers": [1, 2]}'}]}
    ask = {"messages": [{"role": "user", "text": 'call weather {"city": "Oslo"}'}]}
    think = {**say, "config": {"reasoning": {"effort": "low"}}}
    events = await stream(client, conv_id, say) + await stream(client, conv_id, add)
    events += await stream(client, conv_id, think) + await stream(client, conv_id, ask)
    call_id = next(e for e in events if e.name == "requires_action").data["tool_calls"][0]
    answer = {"tool_call_id": call_id["tool_call_id"], "result": {"temp_c": 21}}
    events += await stream(client, conv_id, {"messages": [{"role": "tool", **answer}]})
    tight = await create(client, config={"context_max_tokens": 5})
    events += await stream(client, tight, {"messages": [{"role": "user", "text": "a b " * 50}]})
    assert {e.name for e in events} == set(by_name)
    starts = {e.data["type"] for e in events if e.name == "content_block_start"}
    assert starts == {"text", "reasoning"}
    for event in events:
        schema = {**by_name[event.name]["contentSchema"], "components": document["components"]}
        jsonschema_rs.validate(schema, event.data)
        assert set(event.data) <= set(
            document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]["properties"]
        )
