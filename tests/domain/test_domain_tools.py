"""Tool: schemas from functions, execution (sync, async, errors, timeouts) and to_jsonable."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import enum
import time
import uuid
from pathlib import PurePosixPath
from typing import Any, Literal

import pytest

from app.domain import ConversationConfigurationError, Tool, to_jsonable


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def forecast(
    city: str,
    days: int = 3,
    unit: Unit = Unit.C,
    detail: Literal["short", "long"] = "short",
    hours: list[int] | None = None,
    ratio: float = 0.5,
    strict: bool = False,
    extra: dict[str, Any] | None = None,
    *args: Any,
    **kwargs: Any,
) -> str:
    """Forecast the weather
    for a city.

    Args:
        city: The city's name.
        days (int): How many days
            ahead to look.
        **kwargs: ignored.

    Returns:
        text.
    """
    return city


def test_from_function_builds_a_schema_from_hints_and_docstring() -> None:
    tool = Tool.from_function(forecast)
    assert tool.name == "forecast" and tool.function is forecast
    assert tool.description == "Forecast the weather for a city."
    props = tool.parameters["properties"]
    assert props["city"] == {"type": "string", "description": "The city's name."}
    assert props["days"] == {
        "type": "integer",
        "description": "How many days ahead to look.",
        "default": 3,
    }
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"]}
    assert props["detail"] == {"enum": ["short", "long"], "default": "short"}
    assert props["hours"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
        "default": None,
    }
    assert props["ratio"]["type"] == "number" and props["strict"]["type"] == "boolean"
    assert props["extra"]["anyOf"][0] == {"type": "object"}
    assert set(props) == {"city", "days", "unit", "detail", "hours", "ratio", "strict", "extra"}
    assert tool.parameters["required"] == ["city"]
    assert tool.spec.name == "forecast" and tool.spec.parameters is tool.parameters


def test_from_function_without_docstring_or_hints() -> None:
    def bare(x, y=1):  # type: ignore[no-untyped-def]
        return x

    def broken(x: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Args:
        x: something."""

    tool = Tool.from_function(bare, name="renamed")
    assert tool.name == "renamed" and tool.description == ""
    assert tool.parameters == {
        "type": "object",
        "properties": {"x": {}, "y": {"default": 1}},
        "required": ["x"],
    }
    broken_tool = Tool.from_function(broken)
    assert broken_tool.description == ""
    assert broken_tool.parameters["properties"]["x"] == {"description": "something."}


def test_tool_names_and_parameters_are_checked() -> None:
    with pytest.raises(ConversationConfigurationError, match="tool name '1bad' must be"):
        Tool("1bad")
    with pytest.raises(ConversationConfigurationError, match="of type 'object'"):
        Tool("ok", parameters={"type": "string"})
    with pytest.raises(ConversationConfigurationError, match="a tool must be a function, not int"):
        Tool.from_function(42)  # type: ignore[arg-type]
    client = Tool.client("ask_user", "Ask the user.")
    assert Tool.from_function(client) is client  # type: ignore[arg-type]
    assert client.is_client_tool and not Tool.from_function(forecast).is_client_tool


async def test_execute_sync_async_and_awaitable_results() -> None:
    async def double(n: int) -> int:
        return n * 2

    def later(n: int) -> Any:
        return double(n)  # a sync function that returns an awaitable

    assert await Tool.from_function(double).execute({"n": 2}, 1) == (4, None)
    assert await Tool.from_function(later).execute({"n": 5}, 1) == (10, None)
    assert await Tool.from_function(forecast).execute({"city": "Oslo"}, 1) == ("Oslo", None)


async def test_execute_captures_errors_as_text() -> None:
    def boom() -> None:
        raise ValueError("boom")

    assert await Tool.from_function(boom).execute({}, 1) == (None, "ValueError: boom")
    result, error = await Tool.from_function(forecast).execute({"town": "x"}, 1)
    assert result is None
    assert error == "invalid arguments for tool 'forecast': arguments.city: is required"
    client = Tool.client("ask")
    assert await client.execute({}, 1) == (None, "tool 'ask' is executed by the client")


async def test_execute_times_out_sync_and_async_tools() -> None:
    async def slow_async() -> str:
        await asyncio.sleep(10)
        return "late"

    def slow_sync() -> str:
        time.sleep(1)
        return "late"

    started = time.monotonic()
    for fn in (slow_async, slow_sync):
        result, error = await Tool.from_function(fn).execute({}, 0.05)
        assert result is None
        assert error == f"TimeoutError: tool '{fn.__name__}' took longer than 0.05 s"
    assert time.monotonic() - started < 0.8


async def test_a_stop_that_lands_as_the_tool_finishes_is_kept() -> None:
    """The run's task is cancelled (a stop) in the step the tool returns in: the cancel must
    reach the run, not be swallowed with the tool's result (as asyncio.wait_for does on 3.11)."""
    run: asyncio.Task[None] | None = None

    async def finish() -> str:
        assert run is not None
        run.cancel()
        return "done"

    async def run_the_tool() -> None:
        assert await Tool.from_function(finish).execute({}, 5) == ("done", None)
        await asyncio.sleep(0)  # where the stop is delivered

    run = asyncio.create_task(run_the_tool())
    with pytest.raises(asyncio.CancelledError):
        await run


@dataclasses.dataclass
class Point:
    x: int
    tags: frozenset[str]


class Model:
    def model_dump(self) -> dict[str, Any]:
        return {"id": uuid.UUID(int=7)}


class Label(str):
    pass


def test_to_jsonable_follows_the_documented_rule() -> None:
    value = {
        "none": None,
        "plain": [1, True, "s", 2.5],
        "float": [float("nan"), float("inf")],
        "enum": Unit.F,
        "label": Label("sub"),
        1: "int key",
        None: "null key",
        False: "bool key",
        "point": Point(1, frozenset({"b", "a"})),
        "model": Model(),
        "bytes": [b"caf\xc3\xa9", b"\xff\xfe"],
        "when": [dt.date(2024, 5, 1), dt.datetime(2024, 5, 1, 12, 30), dt.time(8, 15)],
        "misc": [decimal.Decimal("1.10"), PurePosixPath("/tmp/x"), (1, 2), {3}],
        "other": object,
    }
    assert to_jsonable(value) == {
        "none": None,
        "plain": [1, True, "s", 2.5],
        "float": ["nan", "inf"],
        "enum": "fahrenheit",
        "label": "sub",
        "1": "int key",
        "null": "null key",
        "false": "bool key",
        "point": {"x": 1, "tags": ["a", "b"]},
        "model": {"id": "00000000-0000-0000-0000-000000000007"},
        "bytes": ["café", "//4="],
        "when": ["2024-05-01", "2024-05-01T12:30:00", "08:15:00"],
        "misc": ["1.10", "/tmp/x", [1, 2], [3]],
        "other": "<class 'object'>",
    }
    assert type(to_jsonable(Label("x"))) is str


def test_to_jsonable_turns_deep_nesting_into_text() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(40):
        node.append([])
        node = node[0]
    flat = to_jsonable(deep)
    for _ in range(33):
        flat = flat[0]
    assert flat == "[" * 8 + "]" * 8  # the 33rd level and the 7 below it, as text
