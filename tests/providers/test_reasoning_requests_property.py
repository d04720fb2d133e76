"""A property (issue 26): any stored history with reasoning gives requests both providers accept.

Histories are made as runs make them — replies by Anthropic, OpenAI (Responses or chat), or
the offline model, with or without reasoning, tool rounds, client calls, replies cut short,
injected assistant messages, switches of provider between any two requests — with the
reasoning signed by the rule-enforcing fakes' own registries. For any context budget, the
request each adapter builds from that
history (after the run loop's window and repair) must break none of the real API's rules as
``anthropic_rules`` and ``responses_rules`` spell them: thinking exactly as issued and first in
its turn, the current tool loop led by its thinking, each reasoning item just before the call it
began, only encrypted content that was issued.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain import (
    AgentMessage,
    Message,
    Reasoning,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolSpec,
    context_within,
    interrupt_passed_calls,
    repair_history,
)
from app.providers.anthropic_request import messages_request
from app.providers.openai_chat import OpenAIConfig
from app.providers.openai_responses import OpenAIResponsesAdapter

from .anthropic_rules import Registry, anthropic_violations
from .responses_rules import encrypted_for, issued_from_history, responses_violations
from .wire import rs_reasoning_item

TOOLS = [ToolSpec("lookup", "Look it up.", {"type": "object", "properties": {}})]
PROVIDERS = ("anthropic", "openai", "openai-chat", "offline")


@dataclass
class Made:
    """A history and what the fakes issued while it was made."""

    messages: list[Message] = field(default_factory=list)
    anthropic: Registry = field(default_factory=Registry)
    serial: int = 0

    def next(self) -> int:
        self.serial += 1
        return self.serial


def _reasoning(made: Made, provider: str, draw: st.DrawFn) -> list[ReasoningMessage]:
    """The reasoning a reply by ``provider`` begins with, signed as that provider signs."""
    n = made.next()
    if provider == "anthropic":
        block = made.anthropic.sign(f" thought {n} — «é»\n")
        out = [ReasoningMessage(block.pop("thinking"), "anthropic", block)]
        if draw(st.booleans()):
            out.append(ReasoningMessage("", "anthropic", made.anthropic.redact(f"secret {n}")))
        return out
    if provider == "openai":
        item = rs_reasoning_item(f"rs_{n}", [f"plan {n}", "check"], encrypted_for(f"rs_{n}"))
        return [ReasoningMessage(f"plan {n}\n\ncheck", "openai", item)]
    if provider == "openai-chat":
        return [ReasoningMessage(f"hmm {n}", "openai", {"type": "reasoning_content"})]
    return [ReasoningMessage(f"offline {n}", "offline", {"type": "offline", "signature": "s"})]


def _round(made: Made, draw: st.DrawFn, last: bool) -> bool:
    """One model reply appended; True when it ended its turn (a text, or cut short)."""
    provider = draw(st.sampled_from(PROVIDERS))
    thinks = draw(st.booleans())
    reasoning = _reasoning(made, provider, draw) if thinks else []
    kind = draw(st.sampled_from(["calls", "text", "cut"]))
    if kind == "cut":
        if reasoning and draw(st.booleans()):  # cut while thinking: no payload, never sent
            made.messages.append(ReasoningMessage("half", reasoning[0].provider, None, True))
            return True
        made.messages += reasoning
        made.messages.append(TextMessage("partial", Role.ASSISTANT, incomplete=True))
        return True
    made.messages += reasoning
    if kind == "text":
        made.messages.append(TextMessage(f"answer {made.next()}", Role.ASSISTANT))
        return True
    pending = last and draw(st.booleans())  # a client call still waiting, at the very end
    text = draw(st.sampled_from(["", "Let me look."]))
    ids = [f"call_{made.next()}" for _ in range(draw(st.integers(1, 2)))]
    for i, call_id in enumerate(ids):
        call = ToolCallMessage("lookup", call_id, {"q": i}, message=text if i == 0 else "")
        made.messages.append(call if pending else call.completed(result={"n": i}))
    if provider == "anthropic" and reasoning:
        blocks = [_block(m) for m in reasoning]
        made.anthropic.issued_with(ids, blocks)
    return False


def _block(message: ReasoningMessage) -> dict[str, Any]:
    payload = dict(message.payload or {})
    if payload["type"] == "thinking":
        return {"type": "thinking", "thinking": message.text, "signature": payload["signature"]}
    return payload


@st.composite
def histories(draw: st.DrawFn) -> Made:
    made = Made()
    if draw(st.booleans()):
        made.messages.append(AgentMessage("Be brief."))
    turns = draw(st.integers(1, 4))
    for turn in range(turns):
        made.messages.append(TextMessage(f"question {turn}"))
        if draw(st.booleans()):  # an injected assistant message, then a run (`.assistant()`)
            made.messages.append(TextMessage("Sure.", Role.ASSISTANT))
        for step in range(draw(st.integers(1, 3))):
            if _round(made, draw, last=turn == turns - 1 and step == 2):
                break
    made.messages = interrupt_passed_calls(made.messages)  # as stored
    return made


def _window(
    made: Made, budget: int | None, provider: str, trim_to: float | None = None
) -> list[Message] | None:
    window = context_within(made.messages, budget, trim_to=trim_to)
    if all(isinstance(m, AgentMessage) for m in window.messages):
        return None  # the run refuses to send a window without the latest message
    return repair_history(window.messages, provider)


REASONING = st.sampled_from(
    [None, Reasoning("high"), Reasoning("low", summary="auto"), Reasoning(budget_tokens=2048)]
)
BUDGETS = st.one_of(st.none(), st.integers(20, 400))
TRIM_TO = st.sampled_from([None, 0.3, 0.6, 0.9])  # None: the sliding window; else in steps


@settings(max_examples=400, deadline=None)
@given(histories(), BUDGETS, REASONING, TRIM_TO)
def test_any_history_gives_a_request_anthropic_accepts(
    made: Made, budget: int | None, reasoning: Reasoning | None, trim_to: float | None
) -> None:
    history = _window(made, budget, "anthropic", trim_to)
    if history is None:
        return
    options = RequestOptions(reasoning=reasoning)
    body = messages_request(history, TOOLS, options, model="claude-test", max_tokens=1024)
    body = json.loads(json.dumps(body))  # as the wire carries it
    assert anthropic_violations(body, made.anthropic) == []


@settings(max_examples=400, deadline=None)
@given(histories(), BUDGETS, REASONING, TRIM_TO)
def test_any_history_gives_a_request_the_responses_api_accepts(
    made: Made, budget: int | None, reasoning: Reasoning | None, trim_to: float | None
) -> None:
    history = _window(made, budget, "openai", trim_to)
    if history is None:
        return
    adapter = OpenAIResponsesAdapter(
        OpenAIConfig(api_key="sk-none", default_model="gpt-5.4-mini", trailing_assistant="send")
    )
    body = adapter._request(history, TOOLS, RequestOptions(reasoning=reasoning))
    body = json.loads(json.dumps(body))
    assert responses_violations(body, issued_from_history(made.messages)) == []
