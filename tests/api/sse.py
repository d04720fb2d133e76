"""A small Server-Sent Events reader for the API tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    name: str
    id: str | None
    data: dict[str, Any]


def _event(lines: list[str]) -> Event | None:
    fields: dict[str, list[str]] = {}
    for line in lines:
        if not line or line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key, []).append(value.removeprefix(" "))
    if "data" not in fields:
        return None
    name = fields.get("event", ["message"])[0]
    return Event(name, fields.get("id", [None])[0], json.loads("\n".join(fields["data"])))


def parse(text: str) -> list[Event]:
    """Every event of a complete stream body."""
    return [e for e in (_event(b) for b in _blocks(text.splitlines())) if e]


def _blocks(lines: Iterable[str]) -> Iterable[list[str]]:
    block: list[str] = []
    for line in lines:
        if line == "":
            if block:
                yield block
            block = []
        else:
            block.append(line)
    if block:
        yield block


async def events(lines: AsyncIterator[str]) -> AsyncIterator[Event]:
    """Events as they arrive from ``httpx.Response.aiter_lines()``."""
    block: list[str] = []
    async for line in lines:
        if line == "":
            event = _event(block)
            block = []
            if event is not None:
                yield event
        else:
            block.append(line)
