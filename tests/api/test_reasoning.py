"""Reasoning through the API with the offline model, on both databases: `config.reasoning`
(validation, merge patch), the reasoning block in the stream and its stored message, the
"1.1" document, provider formats, the context, resume, a client tool loop, and a cancel
mid-reasoning against a real uvicorn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import LiveServer, app_client, wait_for
from tests.api.sse import Event, events, parse

LOOKUP = {
    "name": "lookup",
    "description": "Look it up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
}


async def create(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def stream(client: httpx.AsyncClient, conv_id: str, body: Any) -> list[Event]:
    response = await client.post(f"/conversations/{conv_id}/stream", json=body)
    assert response.status_code == 200, response.text
    return parse(response.text)


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "text": text}]}


def deltas(events: list[Event], index: int) -> str:
    return "".join(
        e.data["delta"]
        for e in events
        if e.name == "content_block_delta" and e.data["index"] == index
    )


def stored(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data["message"] for e in events if e.name == "message"]


async def start_stream(
    http: httpx.AsyncClient, conv_id: str, body: Any
) -> tuple[httpx.Response, AsyncIterator[Event]]:
    request = http.build_request("POST", f"/conversations/{conv_id}/stream", json=body)
    response = await http.send(request, stream=True)
    assert response.status_code == 200
    return response, events(response.aiter_lines())


async def read_until(stream: AsyncIterator[Event], count: int) -> list[Event]:
    """The events up to the ``count``-th delta."""
    seen: list[Event] = []
    async for event in stream:
        seen.append(event)
        if sum(e.name == "content_block_delta" for e in seen) >= count:
            return seen
    raise AssertionError(f"the stream ended after {seen!r}")


async def config_of(client: httpx.AsyncClient, conv_id: str) -> dict[str, Any]:
    config: dict[str, Any] = (await client.get(f"/conversations/{conv_id}")).json()["config"]
    return config


async def test_a_reasoning_block_streams_before_the_reply_and_is_stored(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, config={"reasoning": {"effort": "low"}})
    events = await stream(client, conv_id, say("why is the sky blue"))
    names = [e.name for e in events]
    assert names[:3] == ["run_started", "content_block_start", "content_block_delta"]
    assert events[1].data == {"index": 0, "type": "reasoning"}
    first_stop = names.index("content_block_stop")
    assert events[first_stop].data == {"index": 0}
    thought = deltas(events, 0)
    assert thought == "The last message has 5 words, so I will echo it back."
    # the reasoning's message comes right after its block, before the reply's text begins
    reasoning = events[first_stop + 1]
    assert reasoning.name == "message"
    assert reasoning.data["index"] == 1
    message = reasoning.data["message"]
    assert message["type"] == "ReasoningMessage" and message["role"] == "assistant"
    assert message["text"] == thought and message["provider"] == "offline"
    assert message["payload"]["type"] == "offline" and message["payload"]["signature"]
    assert "incomplete" not in message
    assert events[first_stop + 2].data == {"index": 1, "type": "text"}
    assert deltas(events, 1) == "why is the sky blue"
    stop = next(e for e in events if e.name == "message_stop")
    assert stop.data["usage"] == {
        "input_tokens": stop.data["usage"]["input_tokens"],
        "output_tokens": 5 + 12 + 0,
        "reasoning_tokens": 12,
        "cache_read_tokens": None,
        "cache_write_tokens": None,
    }
    assert stored(events)[1] == {
        "type": "TextMessage",
        "text": "why is the sky blue",
        "role": "assistant",
    }
    assert events[-1].data["status"] == "completed" and events[-1].data["message_count"] == 3

    document = (await client.get(f"/conversations/{conv_id}/messages")).json()
    assert document["version"] == "1.1"
    assert document["messages"][1:] == stored(events)
    page = (await client.get(f"/conversations/{conv_id}/messages", params={"limit": 1})).json()
    assert page["version"] == "1.0" and page["next_after"] == 0  # the user's message alone
    page = (await client.get(f"/conversations/{conv_id}/messages", params={"after": 0})).json()
    assert page["version"] == "1.1" and page["messages"] == stored(events)

    [run] = (await client.get(f"/conversations/{conv_id}/runs")).json()["items"]
    assert run["usage"] == {
        "input_tokens": stop.data["usage"]["input_tokens"],
        "output_tokens": 17,
        "reasoning_tokens": 12,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }


@pytest.mark.parametrize("reasoning", [{"effort": "none"}, None])
async def test_without_reasoning_the_reply_is_one_text_block(
    client: httpx.AsyncClient, reasoning: dict[str, Any] | None
) -> None:
    """Effort `none`, or no reasoning set (the offline model's default: it does not think)."""
    config = {"reasoning": reasoning} if reasoning else {}
    conv_id = await create(client, config=config)
    events = await stream(client, conv_id, say("hello there"))
    starts = [e.data for e in events if e.name == "content_block_start"]
    assert starts == [{"index": 0, "type": "text"}]
    assert [m["type"] for m in stored(events)] == ["TextMessage"]
    stop = next(e for e in events if e.name == "message_stop")
    assert stop.data["usage"]["reasoning_tokens"] == 0
    document = (await client.get(f"/conversations/{conv_id}/messages")).json()
    assert document["version"] == "1.0"


@pytest.mark.parametrize(
    ("reasoning", "field"),
    [
        ({"effort": "max"}, "effort"),
        ({"effort": 1}, "effort"),
        ({"budget_tokens": "5"}, "budget_tokens"),
        ({"budget_tokens": 2048.0}, "budget_tokens"),
        ({"budget_tokens": True}, "budget_tokens"),
        ({"budget_tokens": 1023}, "budget_tokens"),
        ({"budget_tokens": 1_000_001}, "budget_tokens"),
        ({"summary": "detailed"}, "summary"),
        ({"depth": "deep"}, "depth"),
    ],
)
async def test_a_bad_reasoning_value_is_a_422_naming_the_field(
    client: httpx.AsyncClient, reasoning: dict[str, Any], field: str
) -> None:
    conv_id = await create(client, config={"reasoning": {"effort": "low"}})
    loc = ["body", "config", "reasoning", field]
    for response in (
        await client.post("/conversations", json={"config": {"reasoning": reasoning}}),
        await client.post(
            f"/conversations/{conv_id}/deltas", json={"config": {"reasoning": reasoning}}
        ),
        await client.post(
            f"/conversations/{conv_id}/stream", json={"config": {"reasoning": reasoning}}
        ),
    ):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert [e["loc"] for e in response.json()["errors"]] == [loc]
    assert await config_of(client, conv_id) == {"reasoning": {"effort": "low"}}


async def test_reasoning_that_is_no_object_is_a_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/conversations", json={"config": {"reasoning": "low"}})
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["errors"]] == [["body", "config", "reasoning"]]


async def test_reasoning_is_merged_key_by_key_and_null_resets_it(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, config={"provider": "offline"})

    async def patch(reasoning: Any) -> dict[str, Any]:
        response = await client.post(
            f"/conversations/{conv_id}/deltas", json={"config": {"reasoning": reasoning}}
        )
        assert response.status_code == 200, response.text
        config: dict[str, Any] = response.json()["config"]
        assert await config_of(client, conv_id) == config
        return config

    assert await patch({"effort": "medium"}) == {
        "provider": "offline",
        "reasoning": {"effort": "medium"},
    }
    assert (await patch({"summary": "auto"}))["reasoning"] == {
        "effort": "medium",
        "summary": "auto",
    }
    assert (await patch({"budget_tokens": 4096, "effort": "high"}))["reasoning"] == {
        "effort": "high",
        "summary": "auto",
        "budget_tokens": 4096,
    }
    assert (await patch({"effort": None, "budget_tokens": None}))["reasoning"] == {
        "summary": "auto"
    }
    assert await patch({"summary": None}) == {"provider": "offline"}  # left empty: removed
    await patch({"effort": "low", "summary": "none"})
    assert await patch(None) == {"provider": "offline"}
    await patch({"effort": "low"})
    assert await patch({}) == {"provider": "offline", "reasoning": {"effort": "low"}}


async def test_a_patch_in_the_stream_request_turns_reasoning_on_for_that_run(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    events = await stream(
        client, conv_id, {**say("one two"), "config": {"reasoning": {"effort": "high"}}}
    )
    assert [m["type"] for m in stored(events)] == ["ReasoningMessage", "TextMessage"]
    events = await stream(client, conv_id, {**say("three"), "config": {"reasoning": None}})
    assert [m["type"] for m in stored(events)] == ["TextMessage"]
    assert await config_of(client, conv_id) == {}


async def test_the_1_1_document_loads_back_and_the_provider_formats_treat_reasoning_apart(
    client: httpx.AsyncClient,
) -> None:
    thinking = {"type": "thinking", "signature": "c2lnbmVkIGJ5IGNsYXVkZQ=="}
    document = {
        "version": "1.1",
        "messages": [
            {"type": "AgentMessage", "text": "Be brief.", "role": "system"},
            {"type": "TextMessage", "text": "What time is it?", "role": "user"},
            {
                "type": "ReasoningMessage",
                "text": "I should ask the clock.",
                "provider": "anthropic",
                "payload": thinking,
                "role": "assistant",
            },
            {
                "type": "ToolCallMessage",
                "tool_call_id": "toolu_1",
                "tool_name": "clock",
                "arguments": {},
                "result": "12:00",
                "error": None,
            },
            {
                "type": "ReasoningMessage",
                "text": "The offline model's.",
                "provider": "offline",
                "payload": {"type": "offline", "signature": "abc"},
                "role": "assistant",
            },
            {"type": "TextMessage", "text": "Noon.", "role": "assistant"},
        ],
    }
    conv_id = await create(client, messages=document)
    served = (await client.get(f"/conversations/{conv_id}/messages")).json()
    assert served["version"] == "1.1"
    assert [m["type"] for m in served["messages"]] == [m["type"] for m in document["messages"]]
    assert served["messages"][2] == document["messages"][2]
    assert served["messages"][4] == document["messages"][4]

    anthropic = (await client.get(f"/conversations/{conv_id}/messages?format=anthropic")).json()
    turn = anthropic["messages"][1]
    assert turn["role"] == "assistant"
    assert turn["content"][0] == {
        "type": "thinking",
        "thinking": "I should ask the clock.",
        "signature": thinking["signature"],
    }
    assert turn["content"][1]["type"] == "tool_use"
    assert "The offline model's." not in json.dumps(anthropic)
    openai = (await client.get(f"/conversations/{conv_id}/messages?format=openai")).json()
    assert "clock." not in json.dumps(openai) and "offline model" not in json.dumps(openai)
    # a run on the offline model would send only the offline model's reasoning
    context = (await client.get(f"/conversations/{conv_id}/context")).json()
    assert [m["index"] for m in context["messages"]] == [0, 1, 3, 4, 5]
    assert context["messages"][3]["message"] == document["messages"][4]

    # imported back from Anthropic's shape, the thinking block is the same reasoning
    imported = await client.post("/conversations/import?format=anthropic", json=anthropic)
    assert imported.status_code == 201, imported.text
    again = f"/conversations/{imported.json()['id']}/messages"
    assert (await client.get(again, params={"format": "anthropic"})).json() == anthropic
    assert (await client.get(again)).json()["messages"][2] == document["messages"][2]


async def test_a_document_of_an_unknown_version_or_bad_reasoning_is_refused(
    client: httpx.AsyncClient,
) -> None:
    reasoning = {"type": "ReasoningMessage", "text": "hm", "role": "assistant"}
    for document, loc in (
        ({"version": "1.3", "messages": []}, ["body", "messages", "version"]),
        ({"version": "1.1", "messages": [reasoning]}, ["body", "messages"]),
    ):
        response = await client.post("/conversations", json={"messages": document})
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["loc"] == loc


async def test_a_reasoning_text_past_the_limit_is_refused_on_import(database_url: str) -> None:
    settings = Settings(database_url=database_url, sse_ping_seconds=0, max_text_chars=10)
    reasoning = {
        "type": "ReasoningMessage",
        "text": "x" * 11,
        "provider": "offline",
        "payload": None,
        "role": "assistant",
    }
    document = {
        "version": "1.1",
        "messages": [{"type": "TextMessage", "text": "hi", "role": "user"}, reasoning],
    }
    async with app_client(settings) as client:
        response = await client.post("/conversations", json={"messages": document})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "messages", "messages", 1, "text"]


async def test_the_context_counts_reasoning_and_shows_it_at_its_index(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(
        client, system_prompt="Be brief.", config={"reasoning": {"effort": "low"}}
    )
    await stream(client, conv_id, say("one two three"))
    context = (await client.get(f"/conversations/{conv_id}/context")).json()
    assert [m["index"] for m in context["messages"]] == [0, 1, 2, 3]
    reasoning = context["messages"][2]
    assert reasoning["message"]["type"] == "ReasoningMessage"
    assert reasoning["indices"] == [2] and reasoning["repaired"] is False
    assert reasoning["tokens"] > 0
    assert context["total_tokens"] == sum(m["tokens"] for m in context["messages"])
    without = (await client.get(f"/conversations/{conv_id}/context?max_tokens=1000")).json()
    assert without["total_tokens"] == context["total_tokens"]


async def test_resume_replays_the_reasoning_block_and_its_message(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client, config={"reasoning": {"effort": "low"}})
    events = await stream(client, conv_id, say("a b c"))
    url = f"/conversations/{conv_id}/stream"

    async def resumed(after: int) -> list[Event]:
        response = await client.get(url, headers={"Last-Event-ID": events[after].id or ""})
        assert response.status_code == 200
        replayed = parse(response.text)
        assert [(e.id, e.name, e.data) for e in replayed] == [
            (e.id, e.name, e.data) for e in events[after + 1 :]
        ]
        return replayed

    whole = await resumed(0)  # from run_started: the reasoning block from its start
    assert whole[0].data == {"index": 0, "type": "reasoning"}
    assert deltas(whole, 0) == deltas(events, 0) and deltas(whole, 0)
    inside = await resumed(3)  # from inside the reasoning block: the rest of its deltas
    assert inside[0].name == "content_block_delta" and inside[0].data["index"] == 0
    for replayed in (whole, inside):
        [reasoning, _] = stored(replayed)
        assert reasoning["type"] == "ReasoningMessage" and reasoning["payload"] is not None


async def test_a_client_tool_loop_with_reasoning_keeps_it_before_its_call(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(
        client, config={"client_tools": [LOOKUP], "reasoning": {"effort": "medium"}}
    )
    events = await stream(client, conv_id, say('call lookup {"q": "x"}'))
    assert events[-1].data["status"] == "requires_action"
    first = stored(events)
    assert [m["type"] for m in first] == ["ReasoningMessage", "ToolCallMessage"]
    assert first[0]["text"] == "I am asked to call the tool lookup, so I will call it."
    call_id = first[1]["tool_call_id"]

    events = await stream(
        client,
        conv_id,
        {"messages": [{"role": "tool", "tool_call_id": call_id, "result": {"answer": 42}}]},
    )
    assert events[-1].data["status"] == "completed"
    second = stored(events)
    assert [m["type"] for m in second] == ["ReasoningMessage", "TextMessage"]
    assert second[0]["text"] == "The tool answered with 2 words, so I will pass them on."
    assert second[1]["text"] == '{"answer": 42}'

    document = (await client.get(f"/conversations/{conv_id}/messages")).json()
    assert document["version"] == "1.1"
    assert [m["type"] for m in document["messages"]] == [
        "TextMessage",
        "ReasoningMessage",
        "ToolCallMessage",
        "ReasoningMessage",
        "TextMessage",
    ]
    assert document["messages"][1] == first[0]
    assert document["messages"][2]["result"] == {"answer": 42}
    # what the next run would send: each reasoning still just before what followed it
    context = (await client.get(f"/conversations/{conv_id}/context")).json()
    assert [m["message"]["type"] for m in context["messages"]] == [
        m["type"] for m in document["messages"]
    ]


async def test_cancel_mid_reasoning_keeps_the_partial_reasoning_as_incomplete(
    live_server: Callable[..., LiveServer],
) -> None:
    server = live_server(offline_delay_ms=200)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as first,
        httpx.AsyncClient(base_url=server.url, timeout=10) as other,
    ):
        conv_id = (
            await first.post("/conversations", json={"config": {"reasoning": {"effort": "low"}}})
        ).json()["id"]
        response, events = await start_stream(first, conv_id, say("one two three four"))
        seen = await read_until(events, 3)
        assert seen[1].data == {"index": 0, "type": "reasoning"}
        thought = deltas(seen, 0)
        cancel = await other.post(f"/conversations/{conv_id}/cancel")
        assert cancel.status_code == 202
        rest = [e async for e in events]
        await response.aclose()
        assert rest[-1].name == "done" and rest[-1].data["status"] == "aborted"
        assert not [e for e in rest if e.name == "content_block_start"]  # no text began

        async def idle() -> bool:
            state = (await other.get(f"/conversations/{conv_id}")).json()
            return bool(state["status"] == "idle")

        assert await wait_for(idle, within=10)
        document = (await other.get(f"/conversations/{conv_id}/messages")).json()
        assert document["version"] == "1.1"
        user, reasoning = document["messages"]
        assert user["role"] == "user"
        assert reasoning["type"] == "ReasoningMessage" and reasoning["incomplete"] is True
        assert reasoning["provider"] == "offline" and reasoning["payload"] is None
        assert reasoning["text"].startswith(thought)
        full = "The last message has 4 words, so I will echo it back."
        assert full.startswith(reasoning["text"]) and reasoning["text"] != full
        announced = [e.data["message"] for e in rest if e.name == "message"]
        assert announced == [reasoning]

        # the next run goes on: the cut reasoning is shown, never sent, and a new one is made
        follow = await other.post(f"/conversations/{conv_id}/stream", json=say("again"))
        assert follow.status_code == 200
        after = stored(parse(follow.text))
        assert [m["type"] for m in after] == ["ReasoningMessage", "TextMessage"]
        assert "incomplete" not in after[0]
