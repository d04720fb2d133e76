"""The Responses API's rules for ``POST /v1/responses``, as a fake server enforces them, and a
fake reasoning model that answers with reasoning items and function calls.

The domain's messages, the standard library and the test wire helpers only.
``responses_violations(body, issued)`` is pure: the refusals (OpenAI's wording) the real API
would answer ``body`` with, given the reasoning items and calls the model issued before
(``Issued``, which ``issued_from_history`` rebuilds from a stored history); a property test can
call it without a server. ``ReasoningModel`` is the fake: ``check`` refuses with the API's 400
body, ``respond`` answers a first request with a reasoning item and a function call, and a
request that carries the call's output with a reasoning item and a text.

The rules (each one the real API's):
- every ``function_call_output`` answers a ``function_call`` earlier in the input;
- a ``function_call`` the model issued right after a reasoning item comes back with that item
  before it (same id), and a reasoning item is followed by the item it preceded;
- a reasoning item's ``encrypted_content`` is one the model issued for that id, byte for byte;
  without it, with ``store: false``, the item cannot be found;
- a model that does not reason refuses ``include: ["reasoning.encrypted_content"]`` and
  ``reasoning``; a reasoning model refuses ``temperature`` unless its effort is ``none``;
- assistant content is ``output_text`` or ``refusal``; function call arguments are JSON text;
- an ``input_image``/``input_file`` is a data URL whose bytes decode and are of its media type
  (``attachment_rules``).
And Parley's own, so it stays stateless: ``store`` is false, and ``include`` asks for the
encrypted reasoning whenever reasoning items are sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from app.domain import Message, ReasoningMessage, ToolCallMessage

from . import wire
from .attachment_rules import responses_part_violation
from .fake_server import Received, Reply

NOT_REASONING_PREFIXES = ("gpt-4", "gpt-3.5", "chatgpt-")


@dataclass
class Issued:
    """What the fake model issued: reasoning items by id, and for each call id the id of its
    function_call item and of the reasoning item right before it (None if there was none)."""

    reasoning: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, tuple[str, str | None]] = field(default_factory=dict)


def issued_from_history(messages: list[Message]) -> Issued:
    """What a model must have issued for ``messages`` to be its history: each OpenAI reasoning
    item stored (by id), and each call of the reply that a reasoning item began (which then
    must come back with it)."""
    issued = Issued()
    reasoning_id: str | None = None
    previous: Message | None = None
    for message in messages:
        if isinstance(message, ReasoningMessage):
            payload = message.payload
            reasoning_id = None  # another provider's reasoning begins another reply
            if message.provider == "openai" and payload and payload.get("type") == "reasoning":
                issued.reasoning[str(payload["id"])] = payload
                reasoning_id = str(payload["id"])
        elif isinstance(message, ToolCallMessage):
            if message.message and isinstance(previous, ToolCallMessage):
                reasoning_id = None  # a call with its own text begins a reply of its own
            if reasoning_id is not None:
                call_id = message.tool_call_id
                issued.calls[call_id] = (f"fc_{call_id}", reasoning_id)
        else:
            reasoning_id = None  # the reply that the reasoning began has ended
        previous = message
    return issued


@dataclass(frozen=True)
class Violation:
    message: str
    param: str | None = None
    code: str | None = None


def error_body(violation: Violation) -> dict[str, Any]:
    """OpenAI's 400 body for a refused request."""
    return {
        "error": {
            "message": violation.message,
            "type": "invalid_request_error",
            "param": violation.param,
            "code": violation.code,
        }
    }


def responses_violations(body: dict[str, Any], issued: Issued) -> list[str]:
    """The messages of every refusal the real API would answer ``body`` with (none: accepted)."""
    return [v.message for v in _violations(body, issued)]


def _violations(body: dict[str, Any], issued: Issued) -> list[Violation]:
    found = _options(body)
    items = body.get("input")
    if not isinstance(items, list):
        return [*found, Violation("Invalid type for 'input': expected an array.", "input")]
    calls: set[str] = set()
    for i, item in enumerate(items):
        found += _item(items, i, item, issued, calls)
    return found


def _options(body: dict[str, Any]) -> list[Violation]:
    found: list[Violation] = []
    model = str(body.get("model", ""))
    include = body.get("include") or []
    reasoning = body.get("reasoning")
    if body.get("store") is not False:
        found.append(Violation("Parley's requests must set store: false.", "store"))
    if model.startswith(NOT_REASONING_PREFIXES):
        if "reasoning.encrypted_content" in include:
            found.append(
                Violation("Encrypted content is not supported with this model.", "include")
            )
        if reasoning:
            found.append(
                Violation(
                    "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
                    "reasoning.effort",
                    "unsupported_parameter",
                )
            )
    elif "temperature" in body and (reasoning or {}).get("effort") != "none":
        found.append(
            Violation(
                "Unsupported parameter: 'temperature' is not supported with this model.",
                "temperature",
                "unsupported_parameter",
            )
        )
    items = body.get("input") if isinstance(body.get("input"), list) else []
    sends_reasoning = any(isinstance(i, dict) and i.get("type") == "reasoning" for i in items)
    if sends_reasoning and "reasoning.encrypted_content" not in include:
        found.append(
            Violation("Parley's requests must include reasoning.encrypted_content.", "include")
        )
    return found


def _item(items: list[Any], i: int, item: Any, issued: Issued, calls: set[str]) -> list[Violation]:
    where = f"input[{i}]"
    if not isinstance(item, dict):
        return [Violation(f"Invalid type for '{where}': expected an object.", where)]
    kind = item.get("type", "message")
    if kind == "message":
        return _message(item, where)
    if kind == "reasoning":
        return _reasoning(items, i, item, issued)
    if kind == "function_call":
        calls.add(str(item.get("call_id")))
        return _function_call(items, i, item, issued)
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if call_id not in calls:
            return [
                Violation(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
            ]
        output = item.get("output")
        if not isinstance(output, str | list):
            return [Violation(f"Invalid type for '{where}.output'.", f"{where}.output")]
        for j, part in enumerate(output if isinstance(output, list) else []):
            problem = responses_part_violation(f"{where}.output[{j}]", part)
            if problem:
                return [Violation(problem, f"{where}.output[{j}]", "invalid_value")]
        return []
    return [Violation(f"Invalid value: '{kind}'.", f"{where}.type", "invalid_value")]


def _message(item: dict[str, Any], where: str) -> list[Violation]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        return [Violation(f"Invalid value: '{role}'.", f"{where}.role", "invalid_value")]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [Violation(f"Invalid type for '{where}.content'.", f"{where}.content")]
    allowed = (
        ("output_text", "refusal")
        if role == "assistant"
        else ("input_text", "input_image", "input_file")
    )
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            supported = " and ".join(f"'{a}'" for a in allowed)
            return [
                Violation(
                    f"Invalid value: '{kind}'. Supported values are: {supported}.",
                    f"{where}.content[{j}]",
                    "invalid_value",
                )
            ]
        problem = responses_part_violation(f"{where}.content[{j}]", part)
        if problem:
            return [Violation(problem, f"{where}.content[{j}]", "invalid_value")]
    return []


def _reasoning(items: list[Any], i: int, item: dict[str, Any], issued: Issued) -> list[Violation]:
    item_id = item.get("id")
    encrypted = item.get("encrypted_content")
    if encrypted is None:
        return [
            Violation(
                f"Item with id '{item_id}' not found. Items are not persisted when `store` is "
                "set to false. Try again with `store` set to true, or remove this item from "
                "your input.",
                "input",
            )
        ]
    known = issued.reasoning.get(str(item_id))
    if known is None or known.get("encrypted_content") != encrypted:
        return [
            Violation(
                f"The encrypted content for item {item_id} could not be verified. Reason: "
                "Encrypted content could not be decrypted or parsed.",
                None,
                "invalid_encrypted_content",
            )
        ]
    following = items[i + 1] if i + 1 < len(items) else None
    if (
        not isinstance(following, dict)
        or following.get("type", "message") == "reasoning"
        or (following.get("type") == "function_call_output" or following.get("role") == "user")
    ):
        return [
            Violation(
                f"Item '{item_id}' of type 'reasoning' was provided without its required "
                "following item.",
                "input",
            )
        ]
    return []


def _function_call(
    items: list[Any], i: int, item: dict[str, Any], issued: Issued
) -> list[Violation]:
    where = f"input[{i}]"
    if not isinstance(item.get("arguments"), str):
        return [Violation(f"Invalid type for '{where}.arguments'.", f"{where}.arguments")]
    if not item.get("call_id") or not item.get("name"):
        return [Violation(f"Missing required parameter: '{where}.call_id'.", where)]
    fc_id, reasoning_id = issued.calls.get(item["call_id"], (item.get("id"), None))
    if reasoning_id is None:
        return []
    before = [
        x.get("id") for x in items[:i] if isinstance(x, dict) and x.get("type") == "reasoning"
    ]
    if reasoning_id not in before:
        return [
            Violation(
                f"Item '{item.get('id') or fc_id}' of type 'function_call' was provided without "
                f"its required 'reasoning' item: '{reasoning_id}'.",
                "input",
            )
        ]
    return []


def encrypted_for(item_id: str) -> str:
    """An opaque encrypted_content for a reasoning item: base64 with ``+``, ``/`` and ``=``."""
    digest = hashlib.sha256(item_id.encode()).digest() * 3
    return "gAAAAA" + base64.b64encode(digest + b"\xfb\xff").decode()


@dataclass
class ReasoningModel:
    """A fake reasoning model behind ``/v1/responses`` that enforces the rules above.

    A request whose last input item is not a ``function_call_output`` is answered with a
    reasoning item and a call to the first tool it declares (``arguments``); with as many calls
    as ``parallel`` says. A request that ends with the calls' outputs is answered with a
    reasoning item and ``The tool said: <output>`` as text. Without tools, it reasons and
    answers ``Done thinking.``
    """

    arguments: dict[str, Any] = field(default_factory=lambda: {"city": "Paris"})
    parallel: int = 1
    issued: Issued = field(default_factory=Issued)
    refused: list[list[str]] = field(default_factory=list)
    _count: int = 0

    def check(self, received: Received) -> Reply | None:
        """The API's 400 for a request that breaks a rule; None for a good one."""
        if received.method != "POST" or not received.path.endswith("/responses"):
            return None
        found = _violations(received.body, self.issued)
        if not found:
            return None
        self.refused.append([v.message for v in found])
        return Reply(400, error_body(found[0]))

    def respond(self, received: Received) -> Reply:
        body = received.body
        items = body.get("input") or []
        last = items[-1] if items else {}
        tools = body.get("tools") or []
        self._count += 1
        n = self._count
        reasoning = self._reasoning(f"rs_{n:04d}", ["Thinking it over.", "Checking the tool."])
        frames = [*wire.rs_created(), *wire.rs_reasoning(0, reasoning)]
        if last.get("type") != "function_call_output" and tools:
            for k in range(self.parallel):
                call = wire.rs_call_item(
                    f"fc_{n:04d}_{k}",
                    f"call_{n:04d}_{k}",
                    tools[0]["name"],
                    json.dumps(self.arguments),
                )
                self.issued.calls[call["call_id"]] = (
                    call["id"],
                    reasoning["id"] if k == 0 else None,
                )
                frames += wire.rs_call(1 + k, call)
        else:
            outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
            text = f"The tool said: {outputs[-1]}" if outputs else "Done thinking."
            frames += wire.rs_message(1, f"msg_{n:04d}", text[:8], text[8:])
        usage = wire.rs_usage(40, 25, reasoning=12, cached=8)
        frames.append(wire.rs_completed(usage))
        return Reply(events=frames)

    def _reasoning(self, item_id: str, summary: list[str]) -> dict[str, Any]:
        item = wire.rs_reasoning_item(item_id, summary, encrypted_for(item_id))
        self.issued.reasoning[item_id] = item
        return item
