"""The AI SDK routes and formats through the API, in-process, on both databases: the chat
request's checks, regenerate and edit rewinds, `?format=ai-sdk` ids, `?protocol=ai-sdk` on the
stream routes, and resume that never starts a run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from tests.api.conftest import LiveServer
from tests.frontend.conftest import AUTH, create


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    """The chunks of a whole UI message stream; it must end with ``[DONE]``."""
    assert response.status_code == 200, response.text
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    frames = [f for f in response.text.split("\n\n") if f.strip()]
    assert frames[-1] == "data: [DONE]"
    assert all(f.startswith("data: ") for f in frames)
    return [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]


def user(text: str, message_id: str = "client-1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


async def chat(http: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    """POST the body as JSON, escaped (so a lone surrogate goes as the escape a client sends)."""
    headers = {**AUTH, "Content-Type": "application/json"}
    return await http.post("/ai-sdk/chat", content=json.dumps(body), headers=headers)


async def ui_messages(http: httpx.AsyncClient, conv_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/conversations/{conv_id}/messages?format=ai-sdk", headers=AUTH)
    assert response.status_code == 200
    messages: list[dict[str, Any]] = response.json()
    return messages


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
        for m in messages
    ]


async def test_an_unknown_conversation_is_a_404(client: httpx.AsyncClient) -> None:
    response = await chat(client, {"id": "nope", "messages": [user("hi")]})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert (await client.get("/ai-sdk/chat/nope/stream", headers=AUTH)).status_code == 404


async def test_bad_chat_requests_are_422_and_change_nothing(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    file_part = {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"}
    bodies = [
        {"id": conv_id, "messages": []},
        {"id": conv_id, "messages": [user("hi")], "trigger": "resume-stream"},
        {"id": conv_id, "messages": [{"id": "a", "role": "user", "parts": []}]},
        {"id": conv_id, "messages": [{"id": "a", "role": "user", "parts": [file_part]}]},
        {"id": conv_id, "messages": [{"id": "a", "role": "assistant", "parts": []}]},
        {"id": conv_id, "messages": [user("\ud800")]},
    ]
    for body in bodies:
        response = await chat(client, body)
        assert response.status_code == 422, (body, response.text)
    assert await ui_messages(client, conv_id) == []


async def test_a_reply_streams_and_reads_back_with_the_same_id(client: httpx.AsyncClient) -> None:
    conv_id = await create(client)
    sent = chunks(await chat(client, {"id": conv_id, "messages": [user("Hello there")]}))
    assert [c["type"] for c in sent] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert sent[-1]["finishReason"] == "stop"
    first = await ui_messages(client, conv_id)
    assert first == await ui_messages(client, conv_id)  # the same ids at every read
    assert [m["id"] for m in first] == [f"{conv_id}-0", f"{conv_id}-1"]
    assert sent[0]["messageId"] == first[1]["id"]
    assert texts(first) == [("user", "Hello there"), ("assistant", "Hello there")]


async def test_regenerate_and_edit_rewind_first(client: httpx.AsyncClient) -> None:
    history = [
        {"role": "user", "text": "one"},
        {"role": "assistant", "text": "old one"},
        {"role": "user", "text": "two"},
        {"role": "assistant", "text": "old two"},
    ]
    conv_id = await create(client, messages=history)
    loaded = await ui_messages(client, conv_id)
    # regenerate the first reply (by its id): what came after it goes too
    body = {"id": conv_id, "messages": loaded[:1], "trigger": "regenerate-message"}
    sent = chunks(await chat(client, {**body, "messageId": loaded[1]["id"]}))
    assert sent[0]["messageId"] == loaded[1]["id"]
    assert texts(await ui_messages(client, conv_id)) == [("user", "one"), ("assistant", "one")]
    # regenerate without an id: the last reply
    chunks(await chat(client, {**body, "messages": loaded[:2]}))
    assert texts(await ui_messages(client, conv_id)) == [("user", "one"), ("assistant", "one")]
    # an edit: a user message of ours named by messageId is replaced, and what followed it
    edit = {"id": conv_id, "messages": [user("uno")], "messageId": loaded[0]["id"]}
    chunks(await chat(client, edit))
    assert texts(await ui_messages(client, conv_id)) == [("user", "uno"), ("assistant", "uno")]


async def test_regenerate_with_no_user_message_is_a_422(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, messages=[{"role": "assistant", "text": "hello"}])
    body = {"id": conv_id, "messages": [user("x")], "trigger": "regenerate-message"}
    assert (await chat(client, body)).status_code == 422


async def test_tool_results_continue_the_same_assistant_message(
    client: httpx.AsyncClient,
) -> None:
    tool = {"name": "get_location", "parameters": {"type": "object", "properties": {}}}
    conv_id = await create(client, config={"client_tools": [tool]})
    sent = chunks(await chat(client, {"id": conv_id, "messages": [user("call get_location {}")]}))
    assert sent[-1] == {"type": "finish", "finishReason": "tool-calls"}
    call = next(c for c in sent if c["type"] == "tool-input-available")
    loaded = await ui_messages(client, conv_id)
    part = loaded[1]["parts"][-1]
    assert part["state"] == "input-available" and part["toolCallId"] == call["toolCallId"]
    # addToolResult: the part in state output-available, sent back on the last message
    answered = {**part, "state": "output-available", "output": {"city": "Paris"}}
    reply = {**loaded[1], "parts": [*loaded[1]["parts"][:-1], answered]}
    more = chunks(await chat(client, {"id": conv_id, "messages": [loaded[0], reply]}))
    assert more[0]["messageId"] == loaded[1]["id"]  # the same message, continued
    after = await ui_messages(client, conv_id)
    assert len(after) == 2 and after[1]["parts"][1]["output"] == {"city": "Paris"}
    assert texts(after)[1] == ("assistant", '{"city": "Paris"}')
    assert [p["type"] for p in after[1]["parts"]] == [
        "step-start",
        "tool-get_location",
        "step-start",
        "text",
    ]
    # results for no pending call: nothing to add
    assert (await chat(client, {"id": conv_id, "messages": [loaded[0], reply]})).status_code == 422


async def test_resume_when_idle_is_204_and_starts_no_run(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, messages=[{"role": "user", "text": "hi"}])
    response = await client.get(f"/ai-sdk/chat/{conv_id}/stream", headers=AUTH)
    assert response.status_code == 204
    runs = await client.get(f"/conversations/{conv_id}/runs", headers=AUTH)
    assert runs.json()["items"] == []


async def test_the_stream_routes_speak_the_protocol_on_request(
    client: httpx.AsyncClient,
) -> None:
    conv_id = await create(client)
    bundle = {"messages": [{"role": "user", "text": "Hi you"}]}
    url = f"/conversations/{conv_id}/stream?protocol=ai-sdk"
    sent = chunks(await client.post(url, json=bundle, headers=AUTH))
    assert "".join(c["delta"] for c in sent if c["type"] == "text-delta") == "Hi you"
    assert sent[0]["messageId"] == f"{conv_id}-1"
    # a resume in the protocol replays the run from its start, whichever id it names
    run_id = (await client.get(f"/conversations/{conv_id}/runs", headers=AUTH)).json()["items"]
    resumed = await client.get(url, headers={**AUTH, "Last-Event-ID": f"{run_id[0]['id']}:3"})
    assert chunks(resumed) == sent


async def test_a_failed_run_ends_with_an_error_chunk(client: httpx.AsyncClient) -> None:
    conv_id = await create(client, config={"context_max_tokens": 1})
    sent = chunks(await chat(client, {"id": conv_id, "messages": [user("too long for it")]}))
    assert [c["type"] for c in sent[-3:]] == ["error", "finish-step", "finish"]
    assert "context_max_tokens" in sent[-3]["errorText"]
    assert sent[-1]["finishReason"] == "error"


async def test_a_cancel_from_elsewhere_ends_the_stream_with_abort(
    live_server: Callable[..., LiveServer],
) -> None:
    served = live_server(offline_delay_ms=20)
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        conv_id = await create(http)
        words = " ".join(f"w{i}" for i in range(200))
        body = json.dumps({"id": conv_id, "messages": [user(words)]})
        headers = {**AUTH, "Content-Type": "application/json"}
        request = http.build_request("POST", "/ai-sdk/chat", content=body, headers=headers)
        response = await http.send(request, stream=True)
        lines = response.aiter_lines()
        seen = [line async for line in _until(lines, '"type":"text-delta"')]
        assert (
            await http.post(f"/conversations/{conv_id}/cancel", headers=AUTH)
        ).status_code == 202
        seen += [line async for line in lines]
        await response.aclose()
    frames = [json.loads(x.removeprefix("data: ")) for x in seen if x.startswith("data: {")]
    assert [f["type"] for f in frames[-4:]] == ["text-end", "finish-step", "abort", "finish"]
    assert frames[-1]["finishReason"] == "other"
    assert [x for x in seen if x][-1] == "data: [DONE]"


async def _until(lines: AsyncIterator[str], marker: str) -> AsyncIterator[str]:
    async for line in lines:
        yield line
        if marker in line:
            return
