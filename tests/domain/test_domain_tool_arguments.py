"""A tool's arguments are held to its schema before it runs (issue 31: a proxy sent
``{"numbers": ["a", "b"]}`` to ``add_numbers`` and the model read back a raw TypeError)."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from app.domain import Tool
from app.domain.arguments import MAX_ERRORS, argument_errors
from app.runs.server_tools import add_numbers

CALLS: list[Any] = []


def scale(values: list[int], factor: float = 1.0, mode: Literal["up", "down"] = "up") -> float:
    """Scale numbers."""
    CALLS.append(values)
    return sum(values) * factor


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"values": ["a", 2]},
            'arguments.values[0]: must be an integer, not the string "a"',
        ),
        ({"values": 3}, "arguments.values: must be an array, not the number 3"),
        ({"values": [1.5]}, "arguments.values[0]: must be an integer, not the number 1.5"),
        ({"values": [True]}, "arguments.values[0]: must be an integer, not true"),
        ({}, "arguments.values: is required"),
        ({"values": [1], "factor": "2"}, 'arguments.factor: must be a number, not the string "2"'),
        ({"values": [1], "mode": "sideways"}, 'arguments.mode: must be one of "up", "down"'),
        ({"values": [1], "power": 2}, "arguments.power: is not a parameter"),
    ],
)
async def test_bad_arguments_never_reach_the_tool_and_say_what_was_expected(
    arguments: dict[str, Any], error: str
) -> None:
    CALLS.clear()
    result, text = await Tool.from_function(scale).execute(arguments, 1)
    assert result is None and text is not None
    assert text.startswith("invalid arguments for tool 'scale': ") and error in text
    assert CALLS == []


async def test_good_arguments_run_the_tool() -> None:
    assert await Tool.from_function(scale).execute({"values": [1, 2], "factor": 2}, 1) == (6, None)
    assert await Tool.from_function(scale).execute({"values": [2.0]}, 1) == (2.0, None)


async def test_the_server_tool_of_the_report_answers_the_model_with_the_field() -> None:
    result, error = await Tool.from_function(add_numbers).execute({"numbers": ["a", "b"]}, 1)
    assert result is None
    assert error == (
        "invalid arguments for tool 'add_numbers': "
        'arguments.numbers[0]: must be a number, not the string "a"; '
        'arguments.numbers[1]: must be a number, not the string "b"'
    )


def test_the_keywords_tools_use_are_checked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 3},
            "n": {"type": ["integer", "null"], "minimum": 0, "maximum": 9},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
            "kind": {"const": "x"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "inner": {
                "type": "object",
                "properties": {"a": {"type": "boolean"}},
                "additionalProperties": False,
            },
        },
    }
    assert argument_errors(schema, {"name": "ab", "n": None, "tags": ["t"], "kind": "x"}) == []
    assert argument_errors(schema, {"name": "a"}) == ["arguments.name: must be at least 2 chars"]
    assert argument_errors(schema, {"n": 10}) == ["arguments.n: must be at most 9"]
    assert argument_errors(schema, {"tags": ["a", "b"]}) == [
        "arguments.tags: must be at most 1 items"
    ]
    assert argument_errors(schema, {"kind": "y"}) == [
        'arguments.kind: must be "x", not the string "y"'
    ]
    assert argument_errors(schema, {"either": 1.5}) == [
        "arguments.either: the number 1.5 matches none of the allowed shapes"
    ]
    assert argument_errors(schema, {"inner": {"a": 1, "b": 2}}) == [
        "arguments.inner.a: must be true or false, not the number 1",
        "arguments.inner.b: is not a parameter (parameters: a)",
    ]
    many = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(9)}}
    assert len(argument_errors(many, {f"p{i}": i for i in range(9)})) == MAX_ERRORS


def test_a_client_tool_is_not_checked_here() -> None:  # its caller runs it
    tool = Tool.client("ask", "", {"type": "object", "properties": {"q": {"type": "string"}}})
    assert tool.argument_errors({"q": "fine"}) == []
    assert tool.argument_errors({"q": 1}) == ["arguments.q: must be a string, not the number 1"]
