"""Anthropic's prompt cache, simulated, and a fake model behind it that reports cache usage.

Standard library only. ``PrefixCache`` reads a messages request the way the prompt cache does:
its blocks in order (tools, system, messages), with a hash of the canonical JSON of every
prefix that ends at a ``cache_control`` breakpoint. A request reads from the cache the longest
prefix, up to one of its breakpoints, that an earlier request wrote; it writes the rest up to
its last breakpoint. Prefixes shorter than ``min_tokens`` are not cached (as the API's minimum
cacheable length). The real API also looks back a few blocks before a breakpoint for an
earlier one; this fake does not, so only breakpoints placed where the previous request ended
hit. ``CachingModel`` puts it behind ``FakeServer``: it refuses what the API refuses
(``anthropic_rules.anthropic_violations``: breakpoints included), answers with text (or a call
of its tool when the user asks for a lookup), and reports ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` as the API does (``input_tokens`` is the uncached rest).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .anthropic_rules import (
    Registry,
    _blocks,
    anthropic_violations,
    refusal,
    request_blocks,
    thinking_on,
)
from .fake_server import FakeServer, Received, Reply


@dataclass(frozen=True)
class CacheUsage:
    """One request's input tokens, split as the API reports them."""

    uncached: int
    read: int
    written: int

    @property
    def total(self) -> int:
        return self.uncached + self.read + self.written


def canonical(block: dict[str, Any]) -> str:
    """The block as the cache compares it: its JSON without ``cache_control``, keys sorted."""
    plain = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(plain, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def block_tokens(block: dict[str, Any]) -> int:
    """What a block costs, about four characters a token."""
    return math.ceil(len(canonical(block)) / 4)


@dataclass
class PrefixCache:
    """The prefixes written so far (hashes), and each request's usage in order."""

    min_tokens: int = 1024
    entries: set[str] = field(default_factory=set)
    usage: list[CacheUsage] = field(default_factory=list)

    def account(self, body: dict[str, Any]) -> CacheUsage:
        """Read what an earlier request wrote, write this one's prefixes; the split."""
        digest = hashlib.sha256(str(body.get("model")).encode())
        hashes: list[str] = []
        ends: list[int] = []  # tokens of the prefix ending with each block
        marks: list[int] = []
        total = 0
        for k, (where, block) in enumerate(request_blocks(body)):
            position = where.rsplit(".", 1)[0] if where.startswith("messages.") else where
            digest.update(f"{position}|{canonical(block)}\n".encode())
            hashes.append(digest.hexdigest())
            total += block_tokens(block)
            ends.append(total)
            if "cache_control" in block:
                marks.append(k)
        read_at = next((k for k in reversed(marks) if hashes[k] in self.entries), None)
        read = ends[read_at] if read_at is not None else 0
        written = 0
        if marks and ends[marks[-1]] >= self.min_tokens and ends[marks[-1]] > read:
            written = ends[marks[-1]] - read
        self.entries.update(hashes[k] for k in marks if ends[k] >= self.min_tokens)
        usage = CacheUsage(total - read - written, read, written)
        self.usage.append(usage)
        return usage

    def cached_share(self, skip: int = 0) -> float:
        """The share of input tokens read from the cache, over the requests after ``skip``."""
        counted = self.usage[skip:]
        return sum(u.read for u in counted) / max(1, sum(u.total for u in counted))


@dataclass
class CachingModel:
    """A model behind ``FakeServer`` that keeps a ``PrefixCache`` of what it is sent.

    A request whose last user text asks for a ``lookup`` (and declares ``tool``) gets a call
    of it; one carrying tool results gets an answer quoting them; anything else a text reply
    of ``reply_words`` words. It thinks (signed, as ``ThinkingModel``) when asked to.
    """

    cache: PrefixCache = field(default_factory=PrefixCache)
    tool: str = "lookup"
    reply_words: int = 40
    issued: Registry = field(default_factory=Registry)
    calls: int = 0

    def serve(self, server: FakeServer) -> CachingModel:
        server.check, server.responder = self.check, self.respond
        return self

    def check(self, received: Received) -> Reply | None:
        if received.path != "/v1/messages" or not isinstance(received.body, dict):
            return None
        found = anthropic_violations(received.body, self.issued)
        return refusal(found[0]) if found else None

    def respond(self, received: Received) -> Reply:
        body = received.body
        usage = self.cache.account(body)
        frames = [
            wire.an_start(
                usage.uncached,
                cache_read_input_tokens=usage.read,
                cache_creation_input_tokens=usage.written,
            )
        ]
        thinking = [self.issued.sign(f"Request {len(self.cache.usage)}.")]
        if not thinking_on(body):
            thinking = []
        for index, block in enumerate(thinking):
            frames += wire.an_thinking_block(index, block["thinking"], signature=block["signature"])
        frames += self._answer(body, len(thinking), thinking)
        return Reply(events=frames)

    def _answer(
        self, body: dict[str, Any], index: int, thinking: list[dict[str, Any]]
    ) -> list[str]:
        last = _blocks(body["messages"][-1])
        results = [b for b in last if b.get("type") == "tool_result"]
        asked = " ".join(str(b.get("text", "")) for b in last if b.get("type") == "text")
        tools = [t.get("name") for t in body.get("tools") or []]
        if not results and "lookup" in asked and self.tool in tools:
            self.calls += 1
            call_id = f"toolu_cache_{self.calls}"
            self.issued.issued_with([call_id], thinking)
            arguments = json.dumps({"query": asked[:40]})
            return wire.an_tool_block(index, call_id, self.tool, arguments) + wire.an_stop(
                "tool_use", 12
            )
        if results:
            text = "Found: " + "; ".join(str(r.get("content")) for r in results)
        else:
            n = len(self.cache.usage)
            text = " ".join(f"word{n}.{i}" for i in range(self.reply_words))
        return wire.an_text_block(index, text) + wire.an_stop("end_turn", self.reply_words)
