"""A long conversation through Parley's HTTP API on the prefix-cache fake, measured three ways:
by the fake (``PrefixCache``), by the ``message_stop`` usage of the streams, and by the usage
stored on the runs. Shared by tests/providers/test_prompt_cache_api.py and bench/cache.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.api.sse import Event, parse

LOOKUP = {
    "name": "lookup",
    "description": "Look figures up.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}

SYSTEM = "You are a careful analyst: answer from the figures you are given. " * 25
"""A long system prompt (about 1,700 characters): it and the tools are cached every turn."""


def user_turn(i: int) -> str:
    """The ``i``th user message: a few hundred characters, asking for a lookup now and then."""
    ask = "Please lookup the figures." if i % 7 == 3 else "Tell me more."
    return f"Turn {i}. {ask} " + " ".join(f"detail{i}.{j}" for j in range(30 + i % 5 * 10))


@dataclass
class Counted:
    """Input tokens by kind, summed over the model calls counted."""

    input: int = 0
    read: int = 0
    written: int = 0

    def add(self, usage: dict[str, Any]) -> None:
        self.input += usage.get("input_tokens") or 0
        self.read += usage.get("cache_read_tokens") or 0
        self.written += usage.get("cache_write_tokens") or 0

    @property
    def share(self) -> float:
        """The share of input tokens read from the cache."""
        return self.read / max(1, self.input)


@dataclass
class Conversation:
    """What a measured conversation saw: each model call's usage on the stream, in order,
    and each run's stored usage."""

    id: str = ""
    streamed: list[dict[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)

    def streamed_after(self, skip: int) -> Counted:
        counted = Counted()
        for usage in self.streamed[skip:]:
            counted.add(usage)
        return counted

    def stored_total(self) -> Counted:
        counted = Counted()
        for usage in self.stored:
            counted.add(usage)
        return counted


async def _stream(client: httpx.AsyncClient, conv_id: str, body: dict[str, Any]) -> list[Event]:
    response = await client.post(f"/conversations/{conv_id}/stream", json=body)
    assert response.status_code == 200, response.text
    return parse(response.text)


async def converse(
    client: httpx.AsyncClient,
    turns: int,
    context_max_tokens: int,
    reasoning: dict[str, Any] | None = None,
) -> Conversation:
    """``turns`` user turns on a new ``anthropic`` conversation with a client tool (and
    ``reasoning``, if given); each lookup the model asks for is answered. Returns the usage
    streamed and stored."""
    config: dict[str, Any] = {
        "provider": "anthropic",
        "context_max_tokens": context_max_tokens,
        "client_tools": [LOOKUP],
    }
    if reasoning is not None:
        config["reasoning"] = reasoning
    messages = [{"role": "system", "text": SYSTEM}]
    created = await client.post("/conversations", json={"config": config, "messages": messages})
    assert created.status_code == 201, created.text
    seen = Conversation(created.json()["id"])
    for i in range(turns):
        body: dict[str, Any] = {"messages": [{"role": "user", "text": user_turn(i)}]}
        while True:
            events = await _stream(client, seen.id, body)
            seen.streamed += [e.data["usage"] for e in events if e.name == "message_stop"]
            status = events[-1].data["status"]
            if status != "requires_action":
                assert status == "completed", [e.data for e in events]
                break
            calls = next(e for e in events if e.name == "requires_action").data["tool_calls"]
            body = {
                "messages": [
                    {"role": "tool", "tool_call_id": c["tool_call_id"], "result": {"n": i}}
                    for c in calls
                ]
            }
    cursor: str | None = None
    while True:
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/conversations/{seen.id}/runs", params=params)).json()
        seen.stored += [run["usage"] for run in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
