"""Prompt caching: Anthropic ``cache_control`` breakpoints on the stable prefix, OpenAI's
``prompt_cache_key``, and a long conversation over the prefix-cache fake (``anthropic_cache``)
that reads most of its input from the cache thanks to stepped truncation."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
import pytest

from app.domain import (
    AgentMessage,
    ConversationConfig,
    DefaultModelSelectionStrategy,
    LLMConversation,
    Message,
    MessageList,
    Reasoning,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolSpec,
)
from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.anthropic_request import EPHEMERAL, messages_request
from app.providers.openai_chat import OpenAIAdapter, prompt_cache_key
from app.providers.openai_responses import OpenAIResponsesAdapter
from app.providers.registry import build_adapters
from app.runs.services import Services
from app.settings import Settings

from . import wire
from .anthropic_cache import CachingModel, PrefixCache
from .anthropic_rules import Registry, anthropic_violations, cache_violations, request_blocks
from .cache_run import SYSTEM, user_turn
from .conftest import FAST_RETRY
from .fake_server import FakeServer, Reply
from .helpers import run

TOOLS = [
    ToolSpec("lookup", "Look it up.", {"type": "object", "properties": {}}),
    ToolSpec("search", "Search.", {"type": "object", "properties": {}}),
]


def marked(body: dict[str, Any]) -> list[str]:
    """Where the request's breakpoints are."""
    return [where for where, block in request_blocks(body) if "cache_control" in block]


def tool_loop_history(registry: Registry) -> list[Message]:
    """A system prompt, a finished turn, and a tool loop whose reply began with thinking."""
    thinking = registry.sign("Let me look it up.")
    payload = {k: v for k, v in thinking.items() if k != "thinking"}
    registry.issued_with(["toolu_1"], [thinking])
    return [
        AgentMessage("Be brief."),
        TextMessage("Hello"),
        TextMessage("Hi.", Role.ASSISTANT),
        TextMessage("Look up Paris"),
        ReasoningMessage(thinking["thinking"], "anthropic", payload),
        ToolCallMessage("lookup", "toolu_1", {"q": "Paris"}, {"temp": 19}),
    ]


def test_breakpoints_mark_tools_system_the_previous_request_and_this_one() -> None:
    registry = Registry()
    history = tool_loop_history(registry)
    options = RequestOptions(reasoning=Reasoning("high"))
    body = messages_request(history, TOOLS, options, model="claude-test", max_tokens=1024)
    body = json.loads(json.dumps(body))
    assert marked(body) == [
        "tools.1",  # the last tool
        "system.0",  # the system prompt, as one text block
        "messages.2.content.0",  # "Look up Paris": where the previous request ended
        "messages.4.content.0",  # the tool result: the end of this request
    ]
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert body["messages"][3]["content"][0]["type"] == "thinking"
    assert "cache_control" not in body["messages"][3]["content"][0]
    assert anthropic_violations(body, registry) == []


def test_thinking_blocks_never_carry_a_breakpoint() -> None:
    """A prefill whose thinking is all there is left is cut; a turn's last cacheable block
    is marked instead of its thinking."""
    registry = Registry()
    thinking = registry.sign("hmm")
    payload = {k: v for k, v in thinking.items() if k != "thinking"}
    history: list[Message] = [
        TextMessage("Q1"),
        ReasoningMessage(thinking["thinking"], "anthropic", payload),
        TextMessage("A1", Role.ASSISTANT),
        TextMessage("Q2"),
    ]
    body = messages_request(history, [], RequestOptions(), model="m", max_tokens=10)
    assert marked(body) == ["messages.0.content.0", "messages.2.content.0"]
    blocks = [b for _, b in request_blocks(body) if b["type"] == "thinking"]
    assert blocks and all("cache_control" not in b for b in blocks)


def test_no_breakpoints_without_caching() -> None:
    history = tool_loop_history(Registry())
    body = messages_request(history, TOOLS, RequestOptions(), model="m", max_tokens=10, cache=False)
    assert marked(body) == [] and body["system"] == "Be brief."


def test_the_fake_refuses_what_the_api_refuses_of_cache_control() -> None:
    text = {"type": "text", "text": "x", "cache_control": EPHEMERAL}
    five = {"messages": [{"role": "user", "content": [dict(text) for _ in range(5)]}]}
    assert cache_violations(five)[0] == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )
    thinking = {"type": "thinking", "thinking": "t", "signature": "s", "cache_control": EPHEMERAL}
    on_thinking = {"messages": [{"role": "assistant", "content": [thinking]}]}
    assert cache_violations(on_thinking) == [
        "messages.0.content.0.thinking.cache_control: Extra inputs are not permitted"
    ]
    bad = {"type": "text", "text": "x", "cache_control": {"type": "persistent"}}
    assert cache_violations({"system": [bad]}) == [
        "system.0.cache_control.type: Input should be 'ephemeral'"
    ]


def test_the_installed_sdks_take_what_is_sent() -> None:
    """cache_control where the anthropic SDK's types have it, and prompt_cache_key on both
    OpenAI APIs."""

    def fields(kind: Any) -> set[str]:
        return set(typing.get_type_hints(kind))

    for kind in (at.TextBlockParam, at.ToolParam, at.ToolResultBlockParam, at.ToolUseBlockParam):
        assert "cache_control" in fields(kind), kind
    for kind in (at.ThinkingBlockParam, at.RedactedThinkingBlockParam):
        assert "cache_control" not in fields(kind), kind
    assert "prompt_cache_key" in fields(orr.response_create_params.ResponseCreateParamsBase)
    assert "prompt_cache_key" in fields(oc.completion_create_params.CompletionCreateParamsBase)


def test_the_previous_request_is_read_back_from_the_cache() -> None:
    cache = PrefixCache(min_tokens=0)
    history: list[Message] = [AgentMessage("sys"), TextMessage("Q1 " + "x" * 400)]
    first = cache.account(
        messages_request(history, TOOLS, RequestOptions(), model="m", max_tokens=9)
    )
    assert (first.read, first.uncached) == (0, 0) and first.written > 100
    history += [TextMessage("A1 " + "y" * 400, Role.ASSISTANT), TextMessage("Q2")]
    second = cache.account(
        messages_request(history, TOOLS, RequestOptions(), model="m", max_tokens=9)
    )
    assert second.read == first.written  # all the first request sent
    assert second.written > 100 and second.uncached == 0


async def test_openai_sends_a_prompt_cache_key_from_the_conversation(
    server: FakeServer, openai_adapter: OpenAIAdapter, responses_adapter: OpenAIResponsesAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("ok")), Reply(events=wire.rs_text("ok")))
    options = RequestOptions(cache_key="conv-29")
    await openai_adapter.send_message([TextMessage("x")], [], options)
    await responses_adapter.send_message([TextMessage("x")], [], options)
    key = prompt_cache_key("conv-29")
    assert [b["prompt_cache_key"] for b in server.bodies] == [key, key]
    assert key.startswith("parley-") and len(key) <= 64 and "conv-29" not in key
    assert prompt_cache_key("conv-30") != key
    server.script(Reply(events=wire.oa_text("ok")))
    await openai_adapter.send_message([TextMessage("x")], [], RequestOptions())
    assert "prompt_cache_key" not in server.bodies[-1]


@pytest.mark.parametrize("trim_to", [0.6, None])
async def test_a_long_conversation_reads_most_of_its_input_from_the_cache(
    server: FakeServer, trim_to: float | None
) -> None:
    model = CachingModel(cache=PrefixCache(min_tokens=1024)).serve(server)
    adapter = AnthropicAdapter(
        AnthropicConfig(
            api_key="k", base_url=server.url, default_model="claude-test", retry=FAST_RETRY
        )
    )
    selector = DefaultModelSelectionStrategy([adapter], "anthropic")
    config = ConversationConfig(
        model_selector=selector, context_max_tokens=3000, context_trim_to=trim_to
    )
    conv = LLMConversation(MessageList([AgentMessage(SYSTEM)]), config)
    for i in range(60):
        conv.add("user", user_turn(i).replace("lookup", "look"))
        _, error = await run(conv)
        assert error is None
    await adapter.aclose()
    share = model.cache.cached_share(skip=3)
    print(f"cached share trim_to={trim_to}: {share:.3f}")
    if trim_to is None:  # sliding: only the system prompt is read back
        assert share < 0.5, share
    else:
        assert share >= 0.6, share


def test_the_settings_reach_the_adapters_and_the_runs(tmp_path: Path) -> None:
    keys = {"openai_api_key": "o", "anthropic_api_key": "a"}
    on = [a for a in build_adapters(Settings(**keys)) if a.name != "offline"]
    off = [a for a in build_adapters(Settings(**keys, prompt_caching=False)) if a.name != "offline"]
    assert len(on) == len(off) == 2
    history = tool_loop_history(Registry())
    options = RequestOptions(cache_key="conv-1")
    for adapter in on:
        body = adapter._request(history, TOOLS, options)  # type: ignore[attr-defined]
        assert marked(body) if adapter.name == "anthropic" else body["prompt_cache_key"]
    for adapter in off:
        body = adapter._request(history, TOOLS, options)  # type: ignore[attr-defined]
        assert marked(body) == [] and "prompt_cache_key" not in body
    url = f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}"  # never connected to
    services = Services.from_settings(Settings(database_url=url, context_trim_to=0.5))
    stepped = services.configs.build({}, "c1")
    assert (stepped.context_trim_to, stepped.cache_key) == (0.5, "c1")
    services = Services.from_settings(Settings(database_url=url, context_trim_to=1))
    sliding = services.configs.build({})
    assert (sliding.context_trim_to, sliding.cache_key) == (None, None)
