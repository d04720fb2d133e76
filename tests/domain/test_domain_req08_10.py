"""Seed 000, requirements 8–10: early continuation, one execution model, config deltas."""

from __future__ import annotations

import pytest

from app.domain import (
    ConversationConfig,
    ConversationConfigurationError,
    LLMConversation,
    LLMPromptBuilder,
    Message,
    MessageList,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
)
from app.providers import OfflineAdapter
from tests.domain.domain_support import (
    ScriptedAdapter,
    conversation_on,
    selector,
    text_reply,
    texts,
    tool_reply,
)


def note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"


def clock() -> str:
    """The time."""
    return "12:00"


class CountingConversation(LLMConversation):
    """Counts the steps of async iteration (then does exactly what the real one does)."""

    steps = 0

    async def __anext__(self) -> Message:
        self.steps += 1
        return await super().__anext__()


# --- requirement 8: early continuation access ---------------------------------------------------


def test_req8_1_continuation_before_iteration_has_current_state(llm: LLMPromptBuilder) -> None:
    conversation = llm.agent("sys").request("q").prompt_conversation()
    builder = conversation.continuation
    assert builder.conversation is conversation
    assert texts(builder.conversation.messages) == ["sys", "q"]


async def test_req8_2_continuation_during_iteration_sees_messages_so_far(
    llm: LLMPromptBuilder,
) -> None:
    conversation = llm.request('call note {"text": "x"}').tools(note).prompt_conversation()
    seen = []
    async for message in conversation:
        seen.append(list(conversation.continuation.conversation.messages))
        assert seen[-1][-1] is message
    assert [len(s) for s in seen] == [2, 3]


async def test_req8_3_stop_early_then_continue_with_full_history() -> None:
    adapter = ScriptedAdapter(
        [tool_reply("Checking.", ("note", {"text": "a"}, "c1")), text_reply("never read")]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("start")]), tools=())
    conversation.apply_config_deltas({"tools": [note]})
    async for message in conversation:
        assert isinstance(message, ToolCallMessage)
        break
    adapter.scripts[0] = text_reply("fresh answer")
    conversation.continuation.request("follow up").prompt_conversation()
    assert texts([m async for m in conversation]) == ["fresh answer"]
    assert texts(adapter.requests[-1].messages) == ["start", "Checking.", "follow up"]
    assert texts(conversation.messages) == ["start", "Checking.", "follow up", "fresh answer"]


async def test_req8_4_each_continuation_reflects_the_state_then(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("one").prompt_conversation()
    before = len(conversation.continuation.conversation.messages)
    _ = [m async for m in conversation]
    conversation.add("user", "two")
    after = len(conversation.continuation.conversation.messages)
    assert (before, after) == (1, 3)


async def test_req8_5_continuations_follow_mutation_by_iteration(llm: LLMPromptBuilder) -> None:
    conversation = llm.request("call clock {}").tools(clock).prompt_conversation()
    held = conversation.continuation  # taken before the run
    _ = [m async for m in conversation]
    assert texts(held.conversation.messages)[-1] == "12:00"
    follow = held.request("again")
    assert follow.prompt_conversation() is conversation
    assert texts([m async for m in conversation]) == ["again"]


# --- requirement 9: one execution model ---------------------------------------------------------


async def test_req9_1_prompt_runs_a_conversation_and_returns_the_final_text(
    llm: LLMPromptBuilder,
) -> None:
    assert await llm.request("just this").prompt() == "just this"
    assert await llm.request("call clock {}").tools(clock).prompt() == "12:00"


async def test_req9_2_prompt_conversation_returns_a_multi_turn_conversation(
    llm: LLMPromptBuilder,
) -> None:
    conversation = llm.request("turn one").prompt_conversation()
    assert isinstance(conversation, LLMConversation)
    _ = [m async for m in conversation]
    conversation.continuation.request("turn two").prompt_conversation()
    _ = [m async for m in conversation]
    assert [m.role for m in conversation.messages] == [Role.USER, Role.ASSISTANT] * 2


async def test_req9_3_one_shot_methods_run_through_the_conversation() -> None:
    conversation = CountingConversation(
        MessageList([TextMessage("earlier"), TextMessage("noted", Role.ASSISTANT)]),
        ConversationConfig(model_selector=selector(OfflineAdapter())),
    )
    reply = await conversation.continuation.request("one shot").prompt()
    assert reply == "one shot"
    assert conversation.steps == 2  # one message, then the end of the iteration
    assert texts(conversation.messages) == ["earlier", "noted", "one shot", "one shot"]


async def test_req9_4_one_shot_and_multi_turn_use_the_same_mechanism() -> None:
    one_shot = ScriptedAdapter([tool_reply("", ("note", {"text": "n"}, "c1")), text_reply("end")])
    multi = ScriptedAdapter([tool_reply("", ("note", {"text": "n"}, "c1")), text_reply("end")])
    builders = [
        LLMPromptBuilder(model_selector=selector(a)).tools(note).request("q")
        for a in (one_shot, multi)
    ]
    assert await builders[0].prompt() == "end"
    conversation = builders[1].prompt_conversation()
    _ = [m async for m in conversation]
    assert [r.messages for r in one_shot.requests] == [r.messages for r in multi.requests]
    assert one_shot.sent == multi.sent


async def test_req9_5_every_execution_goes_through_async_iteration() -> None:
    conversation = CountingConversation(
        config=ConversationConfig(model_selector=selector(OfflineAdapter()), tools=())
    )
    builder = conversation.continuation.tools(clock).request("call clock {}")
    assert await builder.prompt() == "12:00"
    assert conversation.steps == 3  # the tool call, the answer, the end


# --- requirement 10: configuration deltas -------------------------------------------------------


def test_req10_1_provider_model_tools_accumulate_config_deltas(llm: LLMPromptBuilder) -> None:
    builder = llm.provider("offline").model("echo").tools(note)
    assert builder.delta_config["preferred_provider"] == "offline"
    assert builder.delta_config["preferred_model"] == "echo"
    assert [t.name for t in builder.delta_config["tools"]] == ["note"]
    assert llm.delta_config == {}


def test_req10_2_applied_config_deltas_update_the_conversation(llm: LLMPromptBuilder) -> None:
    conversation = llm.provider("offline").model("echo-9").tools(note).prompt_conversation()
    assert conversation.config.preferred_provider == "offline"
    assert conversation.config.preferred_model == "echo-9"
    assert [t.name for t in conversation.config.tools] == ["note"]


def test_req10_3_chained_config_methods_accumulate(llm: LLMPromptBuilder) -> None:
    builder = llm.model("a").tools(note).model("b").tools(clock).configure(temperature=0.3)
    conversation = builder.prompt_conversation()
    assert conversation.config.preferred_model == "b"
    assert [t.name for t in conversation.config.tools] == ["note", "clock"]
    assert conversation.config.temperature == 0.3


def test_req10_4_continuations_change_the_conversation_config(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(note).prompt_conversation()
    conversation.continuation.tools(clock).model("m2").prompt_conversation()
    assert [t.name for t in conversation.config.tools] == ["note", "clock"]
    conversation.continuation.configure(tools=None, model=None).prompt_conversation()
    assert conversation.config.tools == () and conversation.config.preferred_model is None


async def test_req10_5_later_calls_use_the_updated_config() -> None:
    scripted = ScriptedAdapter([text_reply("scripted 1"), text_reply("scripted 2")])
    llm = LLMPromptBuilder(model_selector=selector(OfflineAdapter(), scripted))
    conversation = llm.request("hello").prompt_conversation()
    assert texts([m async for m in conversation]) == ["hello"]  # the default: offline
    conversation.continuation.provider("scripted").request("next").prompt_conversation()
    assert texts([m async for m in conversation]) == ["scripted 1"]
    conversation.continuation.model("script-2").tools(note).configure(
        temperature=0.7, max_output_tokens=55
    ).request("again").prompt_conversation()
    assert texts([m async for m in conversation]) == ["scripted 2"]
    first, second = scripted.requests
    assert (first.options.model, first.options.temperature) == ("script-1", None)
    assert (second.options.model, second.options.temperature) == ("script-2", 0.7)
    assert second.options.max_output_tokens == 55
    assert [t.name for t in second.tools] == ["note"] and first.tools == []


async def test_a_config_built_as_seed_001_writes_it_takes_a_list_of_tools_or_functions() -> None:
    tools = [clock, Tool.from_function(note)]
    config = ConversationConfig(model_selector=selector(OfflineAdapter()), tools=tools)  # type: ignore[arg-type]
    assert config.tools == (Tool.from_function(clock), Tool.from_function(note))
    conversation = LLMConversation(MessageList([TextMessage("call clock {}")]), config)
    call, answer = [m async for m in conversation]
    assert isinstance(call, ToolCallMessage) and call.result == "12:00"
    assert answer == TextMessage("12:00", Role.ASSISTANT)
    with pytest.raises(ConversationConfigurationError, match="a tool must be a function, not int"):
        ConversationConfig(tools=[3])  # type: ignore[arg-type]
    with pytest.raises(ConversationConfigurationError, match="tools must be a list of tools"):
        ConversationConfig(tools=clock)  # type: ignore[arg-type]
