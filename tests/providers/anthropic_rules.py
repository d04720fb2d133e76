"""Anthropic's rules on thinking, enforced on a messages request, and a fake thinking model.

Standard library only. ``anthropic_violations(body, issued)`` lists what the real API would
refuse in a ``/v1/messages`` body, in its wording: a budget out of range, a thinking block that
is not first in its assistant turn, a thinking block whose text or signature differs by a byte
from what was issued, redacted data never issued, an image or document the API would refuse
(``attachment_rules``), and — with thinking on — a final assistant
turn (the current tool loop, or a prefill) that does not start with the thinking blocks issued
with it. ``Registry`` is what a fake issued: it signs the thinking it hands out (an HMAC of the
text), so only what it issued passes. A property test can call ``anthropic_violations`` on a
request dict without a server; ``ThinkingModel`` wires it into ``FakeServer`` (``check``) and
answers as a thinking model would (``respond``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .attachment_rules import anthropic_attachment_violations
from .fake_server import FakeServer, Received, Reply

THINKING_TYPES = ("thinking", "redacted_thinking")
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
FINAL_TURN = (
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
    "include thinking blocks from previous turns. To avoid this requirement, disable "
    f"`thinking`. Please consult our documentation at {DOCS}"
)  # sic: the API's own wording, typo included


@dataclass
class Registry:
    """The thinking a fake issued: text by signature, redacted data, and for each tool call
    the thinking blocks of the reply that made it (what must lead its turn when it returns)."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    thinking: dict[str, str] = field(default_factory=dict)
    redacted: set[str] = field(default_factory=set)
    by_call: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def sign(self, text: str) -> dict[str, Any]:
        """A thinking block for ``text``, signed, and remembered as issued."""
        digest = hmac.new(self.key, text.encode(), hashlib.sha256).digest()
        signature = base64.b64encode(b"sig:" + digest).decode()
        self.thinking[signature] = text
        return {"type": "thinking", "thinking": text, "signature": signature}

    def redact(self, secret: str) -> dict[str, Any]:
        """A redacted_thinking block hiding ``secret``, remembered as issued."""
        digest = hmac.new(self.key, secret.encode(), hashlib.sha256).digest()
        data = base64.b64encode(b"redacted:" + digest + secret.encode()).decode()
        self.redacted.add(data)
        return {"type": "redacted_thinking", "data": data}

    def issued_with(self, call_ids: list[str], blocks: list[dict[str, Any]]) -> None:
        """Remember that the tool calls ``call_ids`` came in a reply led by ``blocks``."""
        for call_id in call_ids:
            self.by_call[call_id] = [dict(b) for b in blocks]


def thinking_on(body: dict[str, Any]) -> bool:
    """The request asks the model to think (``enabled`` or ``adaptive``)."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def anthropic_violations(body: dict[str, Any], issued: Registry) -> list[str]:
    """What the messages API would refuse in ``body``, in its words (empty: nothing)."""
    found = _config_violations(body) + cache_violations(body)
    for i, turn in enumerate(body.get("messages", [])):
        if turn.get("role") == "assistant" and isinstance(turn.get("content"), list):
            found += _block_violations(i, turn["content"], issued)
    if thinking_on(body):
        found += _final_turn_violations(body["messages"], issued)
    return found + anthropic_attachment_violations(body)


MAX_BREAKPOINTS = 4


def cache_violations(body: dict[str, Any]) -> list[str]:
    """What the API refuses of ``cache_control``: more than four blocks carrying it, a value
    other than ``{"type": "ephemeral"}`` (with a ``ttl`` of 5m or 1h), one on an empty text
    block, and one on a thinking block (which takes no such field)."""
    found: list[str] = []
    marked = 0
    for where, block in request_blocks(body):
        if "cache_control" not in block:
            continue
        marked += 1
        control = block["cache_control"]
        kind = block.get("type")
        if kind in THINKING_TYPES:
            found.append(f"{where}.{kind}.cache_control: Extra inputs are not permitted")
        elif not isinstance(control, dict) or control.get("type") != "ephemeral":
            found.append(f"{where}.cache_control.type: Input should be 'ephemeral'")
        elif set(control) - {"type", "ttl"} or control.get("ttl", "5m") not in ("5m", "1h"):
            found.append(f"{where}.cache_control: Extra inputs are not permitted")
        elif kind == "text" and not str(block.get("text", "")):
            found.append(f"{where}: cache_control cannot be set for empty text blocks")
    if marked > MAX_BREAKPOINTS:
        found.insert(
            0,
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marked}.",
        )
    return found


def request_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block of a request in the order the prompt cache reads them (tools, system,
    messages), with where it is (``tools.0``, ``system.0``, ``messages.1.content.2``); a
    string system prompt or content is one text block."""
    found: list[tuple[str, dict[str, Any]]] = []
    for i, tool in enumerate(body.get("tools") or []):
        found.append((f"tools.{i}", tool))
    system = body.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    found += [(f"system.{i}", b) for i, b in enumerate(blocks)]
    for i, turn in enumerate(body.get("messages") or []):
        found += [(f"messages.{i}.content.{j}", b) for j, b in enumerate(_blocks(turn))]
    return found


def _config_violations(body: dict[str, Any]) -> list[str]:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return []
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return ["thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"]
    if budget >= body.get("max_tokens", 0):
        return [
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {DOCS}#max-tokens-and-context-window-size"
        ]
    return []


def _block_violations(i: int, blocks: list[dict[str, Any]], issued: Registry) -> list[str]:
    """Thinking blocks first, each one issued exactly as it is sent."""
    found: list[str] = []
    seen_other = False
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        kind = block.get("type")
        if kind not in THINKING_TYPES:
            seen_other = True
            continue
        if seen_other:
            found.append(
                f"{where}: `thinking` and `redacted_thinking` blocks must come before any "
                "other content in an `assistant` message"
            )
        found += _issued_violations(where, block, issued)
    return found


def _issued_violations(where: str, block: dict[str, Any], issued: Registry) -> list[str]:
    kind = block["type"]
    fields = ("type", "thinking", "signature") if kind == "thinking" else ("type", "data")
    found = [
        f"{where}.{kind}.{k}: Extra inputs are not permitted" for k in block if k not in fields
    ]
    found += [f"{where}.{kind}.{k}: Field required" for k in fields if k not in block]
    if found:
        return found
    if kind == "thinking":
        text = issued.thinking.get(block["signature"])
        if text is None or text != block["thinking"]:
            return [f"{where}: Invalid `signature` in `thinking` block"]
    elif block["data"] not in issued.redacted:
        return [f"{where}: Invalid `data` in `redacted_thinking` block"]
    return []


def _final_turn_violations(turns: list[dict[str, Any]], issued: Registry) -> list[str]:
    """With thinking on, the assistant turn of the current tool loop (or a final prefill)
    starts with the thinking blocks issued with its calls, all of them, in order."""
    final = _final_assistant(turns)
    if final is None:
        return []
    i, blocks = final
    if not blocks or blocks[0].get("type") not in THINKING_TYPES:
        found = blocks[0].get("type") if blocks else "nothing"
        return [
            f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{found}`. {FINAL_TURN}"
        ]
    leading = []
    for block in blocks:
        if block.get("type") not in THINKING_TYPES:
            break
        leading.append(block)
    calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    expected = issued.by_call.get(calls[0]) if calls else None
    if expected is not None and leading != expected:
        return [
            f"messages.{i}.content: the thinking blocks of the final `assistant` message must "
            "be passed back unmodified and in their original order. " + FINAL_TURN
        ]
    return []


def _final_assistant(turns: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]] | None:
    """The index and blocks of the assistant turn the rule is about, if there is one."""
    if not turns:
        return None
    last = turns[-1]
    if last.get("role") == "assistant":
        return len(turns) - 1, _blocks(last)
    results = [b for b in _blocks(last) if b.get("type") == "tool_result"]
    if not results or len(turns) < 2 or turns[-2].get("role") != "assistant":
        return None
    return len(turns) - 2, _blocks(turns[-2])


def _blocks(turn: dict[str, Any]) -> list[dict[str, Any]]:
    content = turn.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def refusal(message: str) -> Reply:
    """The messages API's 400 for ``message``."""
    return Reply(400, wire.an_error_body("invalid_request_error", message))


# --- a fake thinking model -------------------------------------------------------------------


@dataclass
class ThinkingModel:
    """A thinking model behind ``FakeServer(check=model.check, responder=model.respond)``.

    It refuses what the real API refuses (``anthropic_violations``). A request whose last user
    turn has no tool result gets thinking and a call of ``tool`` with ``arguments``; one that
    carries the results gets thinking and an answer quoting them. With ``redact`` a
    ``redacted_thinking`` block follows each thinking block. It thinks only when the request
    asks it to (``enabled`` or ``adaptive``).
    """

    tool: str = "get_weather"
    arguments: dict[str, Any] = field(default_factory=lambda: {"city": "Paris"})
    redact: bool = False
    issued: Registry = field(default_factory=Registry)
    calls: int = 0

    def serve(self, server: FakeServer) -> ThinkingModel:
        """Put this model behind ``server``: its check first, its replies when unscripted."""
        server.check, server.responder = self.check, self.respond
        return self

    def check(self, received: Received) -> Reply | None:
        if received.path != "/v1/messages" or not isinstance(received.body, dict):
            return None
        found = anthropic_violations(received.body, self.issued)
        return refusal(found[0]) if found else None

    def respond(self, received: Received) -> Reply:
        body = received.body
        results = [b for b in _blocks(body["messages"][-1]) if b.get("type") == "tool_result"]
        thinking = self._thinking(body, "the result is in" if results else "I need a tool")
        frames = [wire.an_start(40, cache_read_input_tokens=30, cache_creation_input_tokens=5)]
        for index, block in enumerate(thinking):
            frames += _thinking_frames(index, block)
        if results:
            answer = "Done: " + "; ".join(str(r.get("content")) for r in results)
            frames += wire.an_text_block(len(thinking), "Done: ", answer[len("Done: ") :])
            stop = "end_turn"
        else:
            self.calls += 1
            call_id = f"toolu_think_{self.calls}"
            self.issued.issued_with([call_id], thinking)
            arguments = json.dumps(self.arguments)
            frames += wire.an_tool_block(len(thinking), call_id, self.tool, arguments)
            stop = "tool_use"
        details = {"thinking_tokens": 7 if thinking else 0}
        frames += wire.an_stop(stop, 20, output_tokens_details=details)
        return Reply(events=frames)

    def _thinking(self, body: dict[str, Any], about: str) -> list[dict[str, Any]]:
        """The reply's thinking blocks: text with whitespace at both ends and non-ASCII, so a
        byte lost or changed on the way back shows."""
        if not thinking_on(body):
            return []
        text = f"  Thinking #{len(self.issued.thinking) + 1}: {about} — «{self.tool}»…\n\n "
        blocks = [self.issued.sign(text)]
        if self.redact:
            blocks.append(self.issued.redact(f"hidden {len(self.issued.redacted)}"))
        return blocks


def _thinking_frames(index: int, block: dict[str, Any]) -> list[str]:
    if block["type"] == "redacted_thinking":
        return wire.an_redacted_block(index, block["data"])
    text = block["thinking"]
    half = len(text) // 2
    return wire.an_thinking_block(
        index, text[:half], text[half:], signature=block["signature"], signature_parts=2
    )
