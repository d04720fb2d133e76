"""Tools: server-side functions the run executes, and client tools the caller executes.

Imports only the standard library. ``Tool.from_function`` derives a JSON schema from type hints
and the docstring; ``to_jsonable`` is the documented rule that turns any tool result into JSON
at execution time, so a run never fails later when its messages are persisted.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.adapter import ToolSpec
from app.domain.arguments import MAX_ERRORS, argument_errors
from app.domain.errors import ConversationConfigurationError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class Tool:
    """A tool the model may call. ``function`` is None for a client tool (run by the caller)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    function: Callable[..., Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConversationConfigurationError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-', "
                "starting with a letter or '_'"
            )
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise ConversationConfigurationError(
                f"tool {self.name!r}: parameters must be a JSON schema of type 'object'"
            )

    @property
    def is_client_tool(self) -> bool:
        """True when the caller, not the run, executes this tool."""
        return self.function is None

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.parameters)

    @classmethod
    def client(
        cls, name: str, description: str = "", parameters: dict[str, Any] | None = None
    ) -> Tool:
        """A tool that the caller executes: the run stops with the call pending."""
        return cls(name, description, parameters or {"type": "object", "properties": {}})

    @classmethod
    def from_function(cls, function: Callable[..., Any], name: str | None = None) -> Tool:
        """A server-side tool; its schema comes from the type hints and the docstring."""
        if isinstance(function, Tool):
            return function
        if not callable(function):
            raise ConversationConfigurationError(
                f"a tool must be a function, not {type(function).__name__}"
            )
        summary, param_docs = _parse_docstring(inspect.getdoc(function) or "")
        return cls(
            name=name or function.__name__,
            description=summary,
            parameters=_parameters_schema(function, param_docs),
            function=function,
        )

    async def execute(
        self,
        arguments: Mapping[str, Any],
        timeout: float,  # noqa: ASYNC109 - a per-tool limit the caller passes down
    ) -> tuple[Any, str | None]:
        """Run the function; return ``(jsonable result, None)`` or ``(None, error text)``.

        Arguments that do not fit the tool's schema (or name no parameter of its function) are
        refused before it runs: the error says, field by field, what was expected.
        """
        if self.function is None:
            return None, f"tool {self.name!r} is executed by the client"
        problems = self.argument_errors(arguments)
        if problems:
            return None, f"invalid arguments for tool {self.name!r}: {'; '.join(problems)}"
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a stop (a cancel)
            # that lands as the tool finishes, and the run would go on.
            async with asyncio.timeout(timeout):
                if inspect.iscoroutinefunction(self.function):
                    value = await self.function(**arguments)
                else:
                    value = await asyncio.to_thread(self.function, **arguments)
                    if inspect.isawaitable(value):
                        value = await value
        except TimeoutError:
            return None, f"TimeoutError: tool {self.name!r} took longer than {timeout:g} s"
        except Exception as exc:  # a tool's failure is data sent back to the model
            return None, f"{type(exc).__name__}: {exc}"
        return to_jsonable(value), None

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """What is wrong with ``arguments`` for this tool (see ``app.domain.arguments``)."""
        problems = argument_errors(self.parameters, dict(arguments))
        if self.function is not None:
            problems += _unknown_names(self.function, arguments)
        return problems[:MAX_ERRORS]


def _unknown_names(function: Callable[..., Any], arguments: Mapping[str, Any]) -> list[str]:
    """The arguments no parameter of ``function`` takes (none when it takes ``**kwargs``)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    names = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
    return [
        f"arguments.{name}: is not a parameter (parameters: {', '.join(names) or 'none'})"
        for name in arguments
        if name not in names
    ]


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Turn a tool result into a JSON value, by this rule:

    str, int, bool and None as they are (subclasses as the plain type); float as it is, NaN and
    infinities as strings; enums as their value; dict keys as strings (a non-string key as
    JSON writes it: ``1``, ``true``, ``null``); lists, tuples, sets and frozensets as arrays
    (sets sorted by their text); dataclasses and objects with ``model_dump()`` (pydantic) as
    objects; dates, times, UUIDs, Decimals and paths as text; bytes as UTF-8 text, or base64
    when they are not UTF-8; anything else as ``str(value)``. Nesting deeper than 32 becomes text.
    """
    if value is None or type(value) in (bool, int, str):
        return value
    scalar = _scalar(value, _depth)
    if scalar is not _NOT_SCALAR:
        return scalar
    if _depth > 32:
        return str(value)
    return _composite(value, _depth + 1)


_NOT_SCALAR = object()


def _scalar(value: Any, depth: int) -> Any:
    """An enum, a subclass of bool, int or str, or a float as JSON; ``_NOT_SCALAR`` otherwise."""
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, depth + 1)
    if isinstance(value, bool | int):
        return int(value) if not isinstance(value, bool) else bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(float(value))
    return _NOT_SCALAR


def _composite(value: Any, depth: int) -> Any:
    """Containers, dataclasses, pydantic models, bytes and dates; anything else as its text."""
    if isinstance(value, Mapping):
        return {_key(k): to_jsonable(v, depth) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v, depth) for v in value]
    if isinstance(value, set | frozenset):
        return [to_jsonable(v, depth) for v in sorted(value, key=str)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), depth)
    if callable(getattr(value, "model_dump", None)):
        return to_jsonable(value.model_dump(), depth)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)  # UUID, Decimal, paths and anything else: their text


def _key(key: Any) -> str:
    """A dict key as JSON writes it."""
    plain = to_jsonable(key, 33)  # scalars only: anything nested is already text
    return plain if isinstance(plain, str) else json.dumps(plain)


# --- schema from a signature ---------------------------------------------------------------

_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    dict: {"type": "object"},
    list: {"type": "array"},
    type(None): {"type": "null"},
}


def _parameters_schema(function: Callable[..., Any], docs: dict[str, str]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable annotations: fall back to "any"
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(function).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        schema = _type_schema(hints.get(name, Any))
        if name in docs:
            schema = {**schema, "description": docs[name]}
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif _is_json_literal(param.default):
            schema = {**schema, "default": param.default}
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    return result


def _is_json_literal(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _type_schema(hint: Any) -> dict[str, Any]:
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [_type_schema(a) for a in args]
        return {"anyOf": options}
    if origin in (list, tuple, set, frozenset) or origin is typing.Sequence:
        items = _type_schema(args[0]) if args else {}
        return {"type": "array", "items": items} if items else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    return {}


_SECTIONS = ("args:", "arguments:", "parameters:", "params:")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and parameter descriptions from an ``Args:`` section."""
    summary: list[str] = []
    for line in doc.strip().splitlines():
        stripped = line.strip()
        if not stripped or stripped.lower() in _SECTIONS:
            break
        summary.append(stripped)
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in _SECTIONS:
            in_args, current = True, None
        elif in_args and stripped.endswith(":") and " " not in stripped:
            in_args = False  # the next section (Returns:, Raises:)
        elif in_args and stripped:
            match = re.match(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current:
                params[current] = f"{params[current]} {stripped}".strip()
    return " ".join(summary), params
