"""History repair, property-tested: random stored histories, repaired, make requests that both
providers accept. The requests are built by the real adapters' request builders; no network."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain import (
    AgentMessage,
    Message,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.repair import INTERRUPTED, repair_history, repair_with_sources
from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import conversation, run, uncached

# Never used for a request: only the request builders run. Port 9 is discard, not a provider.
OPENAI = OpenAIAdapter(
    OpenAIConfig(api_key="sk-test", base_url="http://127.0.0.1:9/v1", trailing_assistant="send")
)
ANTHROPIC = AnthropicAdapter(AnthropicConfig(api_key="sk-test", base_url="http://127.0.0.1:9"))
OPTIONS = RequestOptions("test-model", None, None)

texts = st.sampled_from(["", " ", "hi", "two words", "line\n"])
call_ids = st.sampled_from(["call_a", "call_b", "call_c", "call.d"])


@st.composite
def tool_calls(draw: st.DrawFn) -> ToolCallMessage:
    outcome = draw(st.sampled_from(["result", "error", "pending"]))
    return ToolCallMessage(
        tool_name=draw(st.sampled_from(["clock", "lookup"])),
        tool_call_id=draw(call_ids),
        arguments=draw(st.sampled_from([{}, {"q": 1}])),
        result={"ok": True} if outcome == "result" else None,
        error="boom" if outcome == "error" else None,
        message=draw(texts),
        pending=outcome == "pending",
    )


@st.composite
def text_messages(draw: st.DrawFn) -> TextMessage:
    role = draw(st.sampled_from([Role.USER, Role.ASSISTANT, Role.SYSTEM]))
    incomplete = role is Role.ASSISTANT and draw(st.booleans())
    return TextMessage(draw(texts), role, incomplete=incomplete)


messages = st.one_of(text_messages(), tool_calls(), texts.map(AgentMessage))
histories = st.lists(messages, max_size=12)


def check_openai(body: dict[str, Any]) -> None:
    """Each assistant ``tool_calls`` message is followed at once by one ``tool`` message per
    call id, and tool messages appear nowhere else; user and assistant never repeat in a row."""
    turns = body["messages"]
    i = 0
    while i < len(turns):
        turn = turns[i]
        assert turn["role"] != "tool", f"message {i}: a tool message answers no call"
        if i and turn["role"] in ("user", "assistant"):
            assert turns[i - 1]["role"] != turn["role"], f"messages {i - 1} and {i}: same role"
        i += 1
        if turn["role"] == "assistant" and turn.get("tool_calls"):
            ids = [c["id"] for c in turn["tool_calls"]]
            assert len(set(ids)) == len(ids), f"message {i - 1}: a call id twice"
            answers = turns[i : i + len(ids)]
            assert [a["role"] for a in answers] == ["tool"] * len(ids), (i, answers)
            assert sorted(a["tool_call_id"] for a in answers) == sorted(ids)
            i += len(ids)


def check_anthropic(body: dict[str, Any]) -> None:
    """Roles alternate; no empty turn or blank text; each turn's tool_use blocks are answered,
    by id and first, in the next turn, and every tool_result answers the turn before it."""
    turns = body["messages"]
    ids_seen: set[str] = set()
    for i, turn in enumerate(turns):
        assert turn["role"] in ("user", "assistant")
        if i:
            assert turns[i - 1]["role"] != turn["role"], f"turns {i - 1} and {i}: same role"
        assert turn["content"], f"turn {i} is empty"
        blocks = turn["content"]
        assert all(b["text"].strip() for b in blocks if b["type"] == "text"), f"turn {i}"
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        assert not ids_seen & set(uses), f"turn {i}: a tool_use id used twice"
        ids_seen.update(uses)
        before = turns[i - 1]["content"] if i else []
        asked = [b["id"] for b in before if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert sorted(answered) == sorted(asked), (i, asked, answered)
        kinds = [b["type"] for b in blocks]
        assert kinds[: len(answered)] == ["tool_result"] * len(answered), "results come first"
        if uses:
            assert i + 1 < len(turns), f"turn {i}: tool_use with no turn after it"


@settings(max_examples=300, deadline=None)
@given(histories)
def test_repaired_histories_make_requests_both_providers_accept(history: list[Message]) -> None:
    repaired = repair_history(history)
    check_openai(OPENAI._request(repaired, [], OPTIONS))
    check_anthropic(ANTHROPIC._request(repaired, [], OPTIONS))


@settings(max_examples=200, deadline=None)
@given(histories)
def test_repair_is_idempotent_and_keeps_the_sources_in_order(history: list[Message]) -> None:
    repaired = repair_with_sources(history)
    assert repair_history([r.message for r in repaired]) == [r.message for r in repaired]
    flat = [i for r in repaired for i in r.sources]
    assert flat == sorted(flat) and len(set(flat)) == len(flat)
    assert not any(isinstance(r.message, ToolCallMessage) and r.message.pending for r in repaired)


def test_the_checkers_refuse_what_providers_refuse() -> None:
    broken = [
        TextMessage("q"),
        ToolCallMessage("clock", "call_a", pending=True),
        TextMessage("again"),
        TextMessage("and again"),
        ToolCallMessage("clock", "call_b", result=1),
        ToolCallMessage("clock", "call_b", result=2, message="a result without its own call"),
    ]
    for check, adapter in ((check_openai, OPENAI), (check_anthropic, ANTHROPIC)):
        try:
            check(adapter._request(broken, [], OPTIONS))
        except AssertionError:
            continue
        raise AssertionError(f"{check.__name__} accepted an unrepaired history")


def test_an_unanswered_call_is_sent_as_interrupted() -> None:
    call = ToolCallMessage("clock", "call_a", pending=True)
    body = OPENAI._request(repair_history([TextMessage("q"), call]), [], OPTIONS)
    assert body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": f"Error: {INTERRUPTED}",
    }


BROKEN: list[Message] = [
    AgentMessage("Be brief."),
    TextMessage("what time is it?"),
    ToolCallMessage("clock", "call_a", {}, result="12:00"),
    ToolCallMessage("clock", "call_a", {}, result="13:00", message="again"),  # an orphan result
    TextMessage("", Role.ASSISTANT, incomplete=True),
    TextMessage("hello?"),
    TextMessage("anyone?"),
]


async def test_a_broken_history_runs_through_the_real_openai_sdk(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("Here.")))
    conv = conversation([openai_adapter], BROKEN)
    _, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Here.", Role.ASSISTANT)
    sent = server.bodies[0]
    check_openai(sent)
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert sent["messages"][3:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "12:00"},
        {"role": "user", "content": "hello?\n\nanyone?"},
    ]
    assert list(conv.messages)[: len(BROKEN)] == BROKEN  # what is stored is unchanged


async def test_a_broken_history_runs_through_the_real_anthropic_sdk(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=wire.an_text("Here.")))
    conv = conversation([anthropic_adapter], BROKEN)
    _, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Here.", Role.ASSISTANT)
    sent = uncached(server.bodies[0])
    check_anthropic(sent)
    assert [t["role"] for t in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "12:00"},
        {"type": "text", "text": "hello?\n\nanyone?"},
    ]
