"""Stepped context truncation (``context_within(..., trim_to=f)``): over budget, the history
is dropped down to a fraction of it, so the first kept message stays the same for many turns
(the provider's prefix cache keeps hitting); the grouping rules of the sliding window hold."""

from __future__ import annotations

import itertools
import random

import pytest

from app.domain import (
    AgentMessage,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
    context_within,
)
from app.domain.context import _units
from app.domain.messages import Message

BUDGET = 2000


def history(turns: int, chars: int = 400) -> list[Message]:
    """A system prompt, then ``turns`` user/assistant pairs of about ``chars`` characters."""
    messages: list[Message] = [AgentMessage("Be brief.")]
    for i in range(turns):
        messages.append(TextMessage(f"q{i} " + "x" * chars))
        messages.append(TextMessage(f"a{i} " + "y" * chars, Role.ASSISTANT))
    return messages


def first_kept(messages: list[Message], trim_to: float | None) -> int:
    window = context_within(messages, BUDGET, trim_to=trim_to)
    return window.indices[1]  # [0] is the system prompt


def test_the_first_kept_message_stays_for_many_turns_then_steps() -> None:
    messages = history(60)
    firsts = [first_kept(messages[: 1 + 2 * t], 0.5) for t in range(1, 61)]
    assert firsts == sorted(firsts), "the start never moves back"
    steps = sum(1 for a, b in itertools.pairwise(firsts) if a != b)
    sliding = [first_kept(messages[: 1 + 2 * t], None) for t in range(1, 61)]
    slides = sum(1 for a, b in itertools.pairwise(sliding) if a != b)
    # about 400 characters (100 tokens) a message, 2000 tokens: 18 messages fit; a step drops
    # down to 1000 tokens, leaving room for 4-5 turns before the next one
    assert slides >= 45 and steps <= 12, (slides, steps)


@pytest.mark.parametrize("trim_to", [0.3, 0.5, 0.8, 0.95])
def test_a_stepped_window_fits_the_budget_and_is_one_unbroken_tail(trim_to: float) -> None:
    messages = history(40)
    for end in range(2, len(messages) + 1):
        window = context_within(messages[:end], BUDGET, trim_to=trim_to)
        assert window.total_tokens <= BUDGET
        kept = window.indices[1:]
        assert kept == tuple(range(kept[0], end)), "the newest messages, without a gap"
        sliding = context_within(messages[:end], BUDGET)
        assert sliding.indices[1] <= kept[0], "never more than the sliding window keeps"


def test_without_trim_to_the_window_slides_as_before() -> None:
    messages = history(30)
    window = context_within(messages, BUDGET)
    stepped = context_within(messages, BUDGET, trim_to=0.5)
    assert window.total_tokens > stepped.total_tokens
    assert window.indices[1] < stepped.indices[1]


def test_tool_calls_of_one_reply_and_reasoning_are_kept_or_dropped_together() -> None:
    rng = random.Random(29)
    messages: list[Message] = [AgentMessage("sys")]
    for i in range(120):
        kind = rng.choice(["text", "reasoning", "calls"])
        if kind == "reasoning":
            messages.append(ReasoningMessage("thinking " * rng.randint(5, 60), "anthropic", {}))
            messages.append(TextMessage(f"r{i} " + "z" * rng.randint(10, 300), Role.ASSISTANT))
        elif kind == "calls":
            for j in range(rng.randint(1, 3)):
                text = "look" if j == 0 else ""
                messages.append(
                    ToolCallMessage("lookup", f"c{i}_{j}", {"q": i}, "r" * 99, message=text)
                )
        else:
            messages.append(TextMessage(f"u{i} " + "w" * rng.randint(10, 600)))
    for end in range(2, len(messages) + 1):
        window = context_within(messages[:end], 1500, trim_to=0.5)
        kept = set(window.indices)
        for unit in _units(messages[:end]):
            assert {i in kept for i in unit} in ({True}, {False}), (end, unit)
        assert window.total_tokens <= 1500


def test_a_newest_message_larger_than_the_budget_leaves_nothing_to_send() -> None:
    messages = [*history(3), TextMessage("big " + "x" * (4 * BUDGET))]
    window = context_within(messages, BUDGET, trim_to=0.5)
    assert [type(m) for m in window] == [AgentMessage]


def test_a_large_message_in_the_middle_is_dropped_with_what_came_before() -> None:
    messages = [*history(2), TextMessage("big " + "x" * (4 * BUDGET)), *history(2)[1:]]
    window = context_within(messages, BUDGET, trim_to=0.5)
    assert window.indices == (0, 6, 7, 8, 9)
