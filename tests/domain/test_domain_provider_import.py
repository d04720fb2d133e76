"""Provider-format import (issue 14): export → import → export gives the same document, for
both formats and random histories with tool calls; a bad item is named by index and field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain import (
    AgentMessage,
    Message,
    ProviderFormatError,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
    from_anthropic_format,
    from_openai_format,
    interrupt_passed_calls,
    to_anthropic_format,
    to_openai_format,
)

texts = st.sampled_from(["", " ", "hi", "two words", "Error: not one", '"quoted"', "42"])
results = st.sampled_from([None, 1, "text", '"quoted"', {"a": [1, "é"]}, [], "Error: x"])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for i in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["agent", "user", "assistant", "system", "call", "reasoning"]))
        if kind == "agent":
            out.append(AgentMessage(draw(texts)))
        elif kind == "reasoning":
            payload = draw(
                st.sampled_from(
                    [
                        {"type": "thinking", "signature": f"sig{i}"},
                        {"type": "redacted_thinking", "data": f"data{i}"},
                    ]
                )
            )
            provider = draw(st.sampled_from(["anthropic", "openai"]))
            text = draw(texts) if payload["type"] == "thinking" else ""
            out.append(ReasoningMessage(text, provider, payload))
        elif kind == "call":
            outcome = draw(st.sampled_from(["result", "error", "pending"]))
            out.append(
                ToolCallMessage(
                    draw(st.sampled_from(["clock", "lookup"])),
                    f"call_{i}",
                    draw(st.sampled_from([{}, {"q": 1, "ü": [True, None]}])),
                    result=draw(results) if outcome == "result" else None,
                    error=draw(texts) if outcome == "error" else None,
                    message=draw(texts),
                    pending=outcome == "pending",
                )
            )
        else:
            out.append(TextMessage(draw(texts), Role(kind), incomplete=draw(st.booleans())))
    return interrupt_passed_calls(out)  # as stored: a pending call only at the end


def test_a_call_the_conversation_moved_past_is_imported_interrupted() -> None:
    """Issue 31: an OpenAI request whose call has no result, then a user message (the user
    carried on), imported as a pending call, could never run again."""
    messages = from_openai_format(
        [
            {"role": "user", "content": "time?"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "clock"}}]},
            {"role": "user", "content": "never mind"},
            {"role": "assistant", "tool_calls": [{"id": "c2", "function": {"name": "clock"}}]},
        ]
    )
    passed, last = messages[1], messages[3]
    assert isinstance(passed, ToolCallMessage) and not passed.pending
    assert passed.error_text == "interrupted: the tool call never got its result"
    assert isinstance(last, ToolCallMessage) and last.pending  # the one still to answer
    anthropic = from_anthropic_format(
        None,
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]},
            {"role": "user", "content": "carry on"},
        ],
    )
    assert isinstance(anthropic[0], ToolCallMessage) and not anthropic[0].pending


@settings(max_examples=300, deadline=None)
@given(histories())
def test_openai_export_import_export_is_the_same_document(history: list[Message]) -> None:
    exported = to_openai_format(history)
    assert to_openai_format(from_openai_format(exported)) == exported


@settings(max_examples=300, deadline=None)
@given(histories())
def test_anthropic_export_import_export_is_the_same_document(history: list[Message]) -> None:
    exported = to_anthropic_format(history)
    again = from_anthropic_format(exported["system"], exported["messages"])
    assert to_anthropic_format(again) == exported


def test_an_openai_request_with_tool_rounds_imports_as_calls_with_results() -> None:
    messages = from_openai_format(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "time?"}]},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "clock"}},
                    {"id": "c2", "function": {"name": "tz", "arguments": '{"city": "Oslo"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "Error: no such city"},
            {"role": "tool", "tool_call_id": "c1", "content": '{"h": 12}'},
            {"role": "assistant", "tool_calls": [{"id": "c3", "function": {"name": "clock"}}]},
        ]
    )
    assert messages == [
        AgentMessage("Be brief."),
        TextMessage("time?"),
        ToolCallMessage("clock", "c1", {}, result={"h": 12}, message="Checking."),
        ToolCallMessage("tz", "c2", {"city": "Oslo"}, error="no such city"),
        TextMessage("", Role.ASSISTANT),  # keeps the second round apart from the first
        ToolCallMessage("clock", "c3", {}, pending=True),
    ]


def test_anthropic_blocks_import_with_the_system_prompt_first() -> None:
    messages = from_anthropic_format(
        [{"type": "text", "text": "Be brief."}],
        [
            {"role": "user", "content": "time?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "clock", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "down"}],
                        "is_error": True,
                    },
                    {"type": "text", "text": "oh"},
                ],
            },
        ],
    )
    assert messages == [
        AgentMessage("Be brief."),
        TextMessage("time?"),
        ToolCallMessage("clock", "t1", {}, error="down", message="Checking."),
        TextMessage("oh"),
    ]


def _call(id_: str = "c1", **function: Any) -> dict[str, Any]:
    return {"id": id_, "function": {"name": "clock", **function}}


OPENAI_ERRORS: list[tuple[Any, tuple[str | int, ...]]] = [
    ({"role": "robot", "content": "x"}, ("messages", 0, "role")),
    ("not an object", ("messages", 0)),
    ({"role": "user", "content": 5}, ("messages", 0, "content")),
    ({"role": "user", "content": [{"type": "image_url"}]}, ("messages", 0, "content", 0, "type")),
    ({"role": "tool", "tool_call_id": "nope", "content": "1"}, ("messages", 0, "tool_call_id")),
    ({"role": "tool", "content": "1"}, ("messages", 0, "tool_call_id")),
    (
        {"role": "assistant", "tool_calls": [_call(arguments="[1]")]},
        ("messages", 0, "tool_calls", 0, "function", "arguments"),
    ),
    (
        {"role": "assistant", "tool_calls": [_call(), _call()]},
        ("messages", 0, "tool_calls", 1, "id"),
    ),
    (
        # the name is the function's: `tool_calls[0].name` named a field that does not exist
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": " "}}]},
        ("messages", 0, "tool_calls", 0, "function", "name"),
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": " ", "function": {"name": "clock"}}]},
        ("messages", 0, "tool_calls", 0, "id"),
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "c"}]},
        ("messages", 0, "tool_calls", 0, "function"),
    ),
]


@pytest.mark.parametrize(("item", "loc"), OPENAI_ERRORS)
def test_a_bad_openai_item_is_named_by_index_and_field(
    item: Any, loc: tuple[str | int, ...]
) -> None:
    with pytest.raises(ProviderFormatError) as caught:
        from_openai_format([item])
    assert caught.value.loc == loc


ARGUMENTS = ("messages", 0, "tool_calls", 0, "function", "arguments")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"a": "\\ud800"}', "lone surrogate"),
        ('{"\\udc00": 1}', "lone surrogate"),
        ('{"a": "\\u0000"}', "NUL"),
        ('{"a": NaN}', "not finite"),
        ('{"a": 1e400}', "not finite"),
        ('{"a": ' + "[" * 200 + "]" * 200 + "}", "deeper than 200"),
        ('{"a": ' + "[" * 990 + "]" * 990 + "}", "deeper than 200"),  # json's own recursion
    ],
)
def test_arguments_the_api_could_not_store_are_refused(arguments: str, problem: str) -> None:
    item = {"role": "assistant", "tool_calls": [_call(arguments=arguments)]}
    with pytest.raises(ProviderFormatError, match=problem) as caught:
        from_openai_format([item])
    assert caught.value.loc == ARGUMENTS
    deepest = '{"a": ' + "[" * 199 + "]" * 199 + "}"
    [call] = from_openai_format([{"role": "assistant", "tool_calls": [_call(arguments=deepest)]}])
    assert isinstance(call, ToolCallMessage) and call.pending


@pytest.mark.parametrize(
    "content",
    ['{"a": "\\u0000"}', '{"a": NaN}', '{"a": ' + "[" * 990 + "]" * 990 + "}", '"\\ud800"'],
)
def test_a_result_whose_json_value_could_not_be_stored_is_kept_as_its_text(content: str) -> None:
    call = {"role": "assistant", "tool_calls": [_call()]}
    [done] = from_openai_format([call, {"role": "tool", "tool_call_id": "c1", "content": content}])
    assert done == ToolCallMessage("clock", "c1", {}, result=content)
    use = {"type": "tool_use", "id": "c1", "name": "clock", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "c1", "content": content}
    turns = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    assert from_anthropic_format(None, turns) == [done]


def test_a_second_result_for_one_call_is_refused() -> None:
    answer = {"role": "tool", "tool_call_id": "c1", "content": "1"}
    with pytest.raises(ProviderFormatError, match=r"messages\[2\]\.tool_call_id: .*already"):
        from_openai_format([{"role": "assistant", "tool_calls": [_call()]}, answer, answer])
    with pytest.raises(ProviderFormatError, match=r"^messages: must be an array"):
        from_openai_format({"role": "user"})


ANTHROPIC_ERRORS: list[tuple[Any, Any, tuple[str | int, ...]]] = [
    (None, [{"role": "system", "content": "x"}], ("messages", 0, "role")),
    (
        None,
        [{"role": "user", "content": [{"type": "image"}]}],
        ("messages", 0, "content", 0, "type"),
    ),
    (
        None,
        [{"role": "assistant", "content": [{"type": "tool_result"}]}],
        ("messages", 0, "content", 0, "type"),
    ),
    (None, [{"role": "user", "content": 3}], ("messages", 0, "content")),
    (
        None,
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}],
        ("messages", 0, "content", 0, "tool_use_id"),
    ),
    (
        None,
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": 1}],
            }
        ],
        ("messages", 0, "content", 0, "input"),
    ),
    ([{"type": "text"}], [], ("system", 0, "text")),
    (
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}
                ],
            }
        ],
        ("messages", 0, "content", 0, "content", 0, "type"),
    ),
]


@pytest.mark.parametrize(("system", "turns", "loc"), ANTHROPIC_ERRORS)
def test_a_bad_anthropic_item_is_named_by_index_and_field(
    system: Any, turns: Any, loc: tuple[str | int, ...]
) -> None:
    with pytest.raises(ProviderFormatError) as caught:
        from_anthropic_format(system, turns)
    assert caught.value.loc == loc
