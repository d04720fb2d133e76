"""The ``anthropic`` adapter's request: our messages as a messages-API body, and
``config.reasoning`` as its ``thinking`` (docs/providers.md, "anthropic").

May import the domain only; the body is plain JSON, no SDK type. Thinking and redacted
thinking blocks go back exactly as they were received (``formats.thinking_block``): never
trimmed, never dropped as blank, first in their assistant turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.domain import (
    Message,
    Reasoning,
    RequestOptions,
    ToolSpec,
    to_anthropic_format,
)
from app.domain.attachment_blocks import Files
from app.domain.formats import THINKING_BLOCKS

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")

EFFORT_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
"""The tokens an effort (without ``budget_tokens``) adds to ``max_tokens`` for thinking."""

DISPLAY = {"auto": "summarized", "none": "omitted"}
"""``reasoning.summary`` as the ``display`` of Anthropic's ``thinking``."""


@dataclass(frozen=True)
class ThinkingRequest:
    """What ``config.reasoning`` adds to a request: the ``thinking`` value (None: not sent,
    the model's default), ``output_config.effort`` (None: not sent), and the tokens added to
    ``max_tokens`` so thinking cannot starve the answer."""

    thinking: dict[str, Any] | None = None
    effort: str | None = None
    reserve: int = 0

    @property
    def on(self) -> bool:
        """The request asks the model to think."""
        return self.thinking is not None and self.thinking["type"] != "disabled"


def thinking_request(reasoning: Reasoning | None) -> ThinkingRequest:
    """The mapping of docs/providers.md: unset → nothing; ``effort: none`` → ``disabled``;
    a ``budget_tokens`` → ``enabled`` with it; an effort alone → ``adaptive`` plus
    ``output_config.effort``; ``summary`` → ``display``."""
    if reasoning is None or not (reasoning.on or reasoning.off):
        return ThinkingRequest()
    if reasoning.off:
        return ThinkingRequest({"type": "disabled"})
    thinking: dict[str, Any]
    if reasoning.budget_tokens is not None:
        thinking = {"type": "enabled", "budget_tokens": reasoning.budget_tokens}
        effort, reserve = None, reasoning.budget_tokens
    else:
        assert reasoning.effort is not None and reasoning.effort != "none"  # reasoning.on
        thinking = {"type": "adaptive"}
        effort, reserve = reasoning.effort, EFFORT_BUDGETS[reasoning.effort]
    if reasoning.summary is not None:
        thinking["display"] = DISPLAY[reasoning.summary]
    return ThinkingRequest(thinking, effort, reserve)


def messages_request(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    options: RequestOptions,
    *,
    model: str,
    max_tokens: int,
    files: Files | None = None,
    cache: bool = True,
) -> dict[str, Any]:
    """The request's JSON body; ``max_tokens`` is the answer's when the options set none;
    ``cache``: with prompt-cache breakpoints (``cache_breakpoints``).

    ``options.temperature`` is not sent: the API version this SDK speaks has no sampling
    temperature (docs/providers.md). Two requests are sent with thinking off, as Anthropic
    refuses thinking in them: one that ends with an assistant message (a prefill: the reply
    cut short by an abort, continued; or an injected one), and one that continues a tool loop
    whose assistant turn has no thinking (begun on another provider, or with thinking off).
    """
    system, turns = anthropic_turns(messages, files)
    thinking = thinking_request(options.reasoning)
    prefill = bool(turns) and turns[-1]["role"] == "assistant"
    if thinking.on and (prefill or _loop_without_thinking(turns)):
        thinking = ThinkingRequest({"type": "disabled"})
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": (options.max_output_tokens or max_tokens) + thinking.reserve,
        "messages": turns,
        "stream": True,
    }
    if system:
        request["system"] = system
    if tools:
        request["tools"] = [anthropic_tool(t) for t in tools]
    if thinking.thinking is not None:
        request["thinking"] = thinking.thinking
    if thinking.effort is not None:
        request["output_config"] = {"effort": thinking.effort}
    if cache:
        cache_breakpoints(request)
    return request


def _loop_without_thinking(turns: list[dict[str, Any]]) -> bool:
    """The request continues a tool loop (tool results last) whose assistant turn does not
    start with thinking."""
    if len(turns) < 2 or turns[-1]["role"] != "user":
        return False
    if not any(b.get("type") == "tool_result" for b in turns[-1]["content"]):
        return False
    return turns[-2]["content"][0].get("type") not in THINKING_BLOCKS


def anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the messages API declares it."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def anthropic_turns(
    messages: Sequence[Message], files: Files | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` as the API takes them, from the domain's Anthropic shape.

    Pending calls are left out; blank text blocks are dropped (the API refuses them) and turns
    left empty with them; same-role turns are merged, and the thinking blocks of a merged
    assistant turn lead it, in their order; tool ids are made safe; a final assistant turn is
    a prefill, so its trailing whitespace is cut (the API refuses that too). Thinking blocks
    are passed on as they are.
    """
    shaped = to_anthropic_format(messages, include_pending=False, files=files)
    turns: list[dict[str, Any]] = []
    for turn in shaped["messages"]:
        blocks = [_safe_block(b) for b in turn["content"] if not _blank(b)]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn["role"]:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn["role"], "content": blocks})
    for turn in turns:
        if turn["role"] == "assistant":
            turn["content"] = _thinking_first(turn["content"])
    _trim_prefill(turns)
    return shaped["system"], turns


def _thinking_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks with the thinking ones first, each group in its order."""
    thinking = [b for b in blocks if b.get("type") in THINKING_BLOCKS]
    return thinking + [b for b in blocks if b.get("type") not in THINKING_BLOCKS]


def _blank(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _safe_block(block: dict[str, Any]) -> dict[str, Any]:
    """The block with a tool id the API accepts (``[A-Za-z0-9_-]``), kept consistent per id."""
    for key in ("id", "tool_use_id"):
        if key in block and block.get("type") in ("tool_use", "tool_result"):
            return {**block, key: _UNSAFE_ID.sub("_", str(block[key]))}
    return block


def _trim_prefill(turns: list[dict[str, Any]]) -> None:
    """Cut trailing whitespace off a final assistant turn's text, dropping what becomes
    empty; thinking left last (it led a text that was only whitespace) goes with it."""
    while turns and turns[-1]["role"] == "assistant":
        blocks = turns[-1]["content"]
        last = blocks[-1]
        if last.get("type") == "text":
            text = str(last["text"]).rstrip()
            if text:
                blocks[-1] = {**last, "text": text}
                return
        elif last.get("type") not in THINKING_BLOCKS:
            return
        blocks.pop()
        if not blocks:
            turns.pop()


# --- prompt caching ---------------------------------------------------------------------------

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
"""The most ``cache_control`` blocks one request may carry (the API refuses a fifth)."""

UNCACHEABLE = (*THINKING_BLOCKS,)
"""Block types that cannot carry ``cache_control`` (the API refuses it on them)."""


def cache_breakpoints(request: dict[str, Any]) -> None:
    """Mark the stable prefix of ``request`` with ``cache_control`` breakpoints, in place.

    A request's prefix is cached in the order tools, system, messages. The breakpoints, at
    most four: the last tool; the system prompt (sent as one text block to carry it); the end
    of the previous request of this conversation (the last turn before the latest assistant
    turn: what the last request cached, read back now); and the end of this request (written
    for the next one). Thinking blocks carry none: the last block of a turn that can is used.
    """
    marks: list[dict[str, Any]] = []
    if request.get("tools"):
        marks.append(request["tools"][-1])
    if request.get("system"):
        request["system"] = [{"type": "text", "text": request["system"]}]
        marks.append(request["system"][-1])
    turns: list[dict[str, Any]] = request["messages"]
    for end in (_previous_end(turns), len(turns) - 1):
        block = _cacheable_block(turns[end]) if 0 <= end < len(turns) else None
        if block is not None and all(block is not m for m in marks):
            marks.append(block)
    for block in marks[-MAX_BREAKPOINTS:]:
        index = _position(block, request)
        if index is not None:
            index[0][index[1]] = {**block, "cache_control": dict(EPHEMERAL)}


def _previous_end(turns: list[dict[str, Any]]) -> int:
    """The index of the last turn the previous request of the conversation sent: the turn
    before the latest assistant turn (-1: there is none)."""
    for i in range(len(turns) - 1, -1, -1):
        if turns[i]["role"] == "assistant" and i < len(turns) - 1:
            return i - 1
    return -1


def _cacheable_block(turn: dict[str, Any]) -> dict[str, Any] | None:
    """The last block of the turn that may carry ``cache_control``."""
    blocks: list[dict[str, Any]] = turn["content"]
    return next((b for b in reversed(blocks) if b.get("type") not in UNCACHEABLE), None)


def _position(block: dict[str, Any], request: dict[str, Any]) -> tuple[list[Any], int] | None:
    """The list holding ``block`` (by identity) and its index there."""
    lists = [request.get("tools") or [], request.get("system") or []]
    lists += [turn["content"] for turn in request["messages"]]
    for blocks in lists:
        for i, candidate in enumerate(blocks):
            if candidate is block:
                return blocks, i
    return None
