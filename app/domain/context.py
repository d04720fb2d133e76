"""Token counts and the context a run sends within a token budget (seed 002).

Imports only the standard library. The count here is an approximation (about four characters a
token plus a few tokens of framing per message); a provider may pass an exact ``TokenCounter``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from app.domain.attachments import attachment_tokens
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    TextMessage,
    ToolCallMessage,
)

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens of framing (role, separators) counted once per message."""


def approximate_tokens(text: str) -> int:
    """About four characters a token, never less than one token for a non-empty text."""
    return math.ceil(len(text) / 4)


def message_text(message: Message) -> str:
    """All the text of a message that a model reads."""
    if isinstance(message, TextMessage | AgentMessage | ReasoningMessage):
        return message.text
    if isinstance(message, ToolCallMessage):
        parts = [message.message, message.tool_name, json.dumps(message.arguments)]
        if not message.pending:
            parts.append(message.result_text())
        return " ".join(parts)
    return ""  # pragma: no cover - every message type is handled above


def count_message_tokens(message: Message, counter: TokenCounter = approximate_tokens) -> int:
    """The tokens one message costs, framing and attachments included.

    Attachments count by ``attachments.attachment_tokens``: images by the rule the counter
    names in its ``image_rule`` attribute (``openai``'s tiles, else Anthropic's w×h/750), PDFs
    by an approximation per page. They belong to their message, so they are kept with it.
    """
    rule = getattr(counter, "image_rule", "anthropic")
    files = sum(attachment_tokens(a, rule) for a in getattr(message, "attachments", ()))
    return counter(message_text(message)) + MESSAGE_OVERHEAD_TOKENS + files


@dataclass(frozen=True)
class ContextWindow:
    """The messages a run sends, with where they came from and what they cost.

    It reads as the sequence of its messages (seed 002: the context *is* the messages that fit):
    ``len(window)``, ``window[0]``, ``list(window)``.
    """

    messages: tuple[Message, ...]
    indices: tuple[int, ...]
    token_counts: tuple[int, ...]
    dropped: int

    @property
    def total_tokens(self) -> int:
        return sum(self.token_counts)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.messages[index]


def context_within(
    messages: Sequence[Message],
    max_tokens: int | None,
    counter: TokenCounter = approximate_tokens,
    trim_to: float | None = None,
) -> ContextWindow:
    """The messages that fit in ``max_tokens``.

    System prompts are always kept; then the most recent other messages, as many as fit (the
    kept history is one unbroken tail). A tool call and its result are one message, so they are
    never separated; the tool calls of one reply (see ``formats.tool_call_turns``), and
    reasoning with the message that follows it in its turn, are kept or dropped together.

    ``trim_to`` (a fraction of ``max_tokens``, 0 < f < 1) drops history in steps: the history
    is replayed from its start, and each time it outgrows the budget the oldest messages are
    dropped until it is within ``trim_to × max_tokens``. The first kept message then stays the
    same for many turns, so a provider's prefix cache keeps hitting. None: the window slides,
    the newest messages that fit are kept (the first kept one changes almost every turn).
    """
    counts = [count_message_tokens(m, counter) for m in messages]
    system = {i for i, m in enumerate(messages) if isinstance(m, AgentMessage)}
    units = _units(messages)
    if max_tokens is None:
        first = 0
    else:
        fixed = sum(counts[i] for i in system)
        costs = [sum(counts[i] for i in unit) for unit in units]
        if trim_to is None:
            first = _sliding_start(costs, max_tokens - fixed)
        else:
            low = math.floor(max_tokens * trim_to) - fixed
            first = _stepped_start(costs, max_tokens - fixed, low)
    kept = set(system).union(*units[first:])
    order = sorted(kept)
    return ContextWindow(
        messages=tuple(messages[i] for i in order),
        indices=tuple(order),
        token_counts=tuple(counts[i] for i in order),
        dropped=len(messages) - len(order),
    )


def _sliding_start(costs: Sequence[int], budget: int) -> int:
    """The first unit of the longest tail of ``costs`` within ``budget``."""
    first = len(costs)
    while first > 0 and costs[first - 1] <= budget:
        budget -= costs[first - 1]
        first -= 1
    return first


def _stepped_start(costs: Sequence[int], budget: int, low: int) -> int:
    """The first unit kept when the units are added one by one and, each time their total
    passes ``budget``, the oldest are dropped until it is within ``low`` (the newest unit is
    kept if it fits the budget alone). Adding units never moves the start back."""
    first, total = 0, 0
    for newest, cost in enumerate(costs):
        total += cost
        if total <= budget:
            continue
        while first < newest and total > low:
            total -= costs[first]
            first += 1
        if total > budget:  # the newest alone does not fit: nothing up to it is kept
            first, total = newest + 1, 0
    return first


def _units(messages: Sequence[Message]) -> list[list[int]]:
    """The indices of the non-system messages, grouped: one reply's tool calls are one group.

    Consecutive ToolCallMessages belong to one reply unless one carries its own text, which
    starts a new reply (the rule of docs/format.md, shared with ``formats.tool_call_turns``);
    a message right after a ReasoningMessage belongs to the reasoning's reply.
    """
    units: list[list[int]] = []
    previous: Message | None = None
    for i, message in enumerate(messages):
        if isinstance(message, AgentMessage):
            previous = message
            continue
        joins = isinstance(previous, ReasoningMessage) or (
            isinstance(message, ToolCallMessage)
            and isinstance(previous, ToolCallMessage)
            and not message.message
        )
        if joins:
            units[-1].append(i)
        else:
            units.append([i])
        previous = message
    return units
