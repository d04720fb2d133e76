"""A tool call's arguments held to the tool's own JSON schema before the tool runs.

Imports only the standard library. A model (or a proxy in front of it) may send arguments of the
wrong shape; the tool must not see them, and the model must be told, field by field, what was
expected so it can call again. The schema keywords read here are those a tool's parameters use
(``Tool.from_function`` writes them; client tools declare them): ``type``, ``enum``, ``const``,
``properties``, ``required``, ``additionalProperties`` (false), ``items``, ``anyOf``/``oneOf``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``. Any other keyword
is not checked (the tool still sees the value).
"""

from __future__ import annotations

import json
from typing import Any

MAX_ERRORS = 5
"""How many problems one refusal lists: enough for a model to mend the call."""

_TYPES: dict[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def argument_errors(schema: dict[str, Any], arguments: Any) -> list[str]:
    """What is wrong with ``arguments`` for ``schema``: ``where: problem`` texts, at most
    ``MAX_ERRORS``; empty when they fit."""
    errors: list[str] = []
    _check(schema, arguments, "arguments", errors)
    return errors[:MAX_ERRORS]


def _check(schema: Any, value: Any, where: str, errors: list[str]) -> None:
    if not isinstance(schema, dict) or len(errors) >= MAX_ERRORS:
        return
    if not _type_ok(schema.get("type"), value, where, errors):
        return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:10])
        errors.append(f"{where}: must be one of {allowed}, not {_show(value)}")
    if "const" in schema and value != schema["const"]:
        const = json.dumps(schema["const"], ensure_ascii=False)
        errors.append(f"{where}: must be {const}, not {_show(value)}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and not any(_fits(o, value) for o in options):
            errors.append(f"{where}: {_show(value)} matches none of the allowed shapes")
    _bounds(schema, value, where, errors)
    if isinstance(value, dict):
        _object(schema, value, where, errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(schema["items"], item, f"{where}[{i}]", errors)


def _fits(schema: Any, value: Any) -> bool:
    found: list[str] = []
    _check(schema, value, "", found)
    return not found


def _type_ok(expected: Any, value: Any, where: str, errors: list[str]) -> bool:
    names = [expected] if isinstance(expected, str) else expected
    if not isinstance(names, list) or not names:
        return True
    if any(_is(name, value) for name in names):
        return True
    wanted = " or ".join(_TYPES.get(n, str(n)) for n in names)
    errors.append(f"{where}: must be {wanted}, not {_show(value)}")
    return False


def _is(name: str, value: Any) -> bool:
    if name == "integer":
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and float(value).is_integer()
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "boolean": bool,
        "object": dict,
        "array": list,
        "null": type(None),
    }
    kind = kinds.get(name)
    return kind is None or isinstance(value, kind)


def _object(schema: dict[str, Any], value: dict[str, Any], where: str, errors: list[str]) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if name not in value:
            errors.append(f"{where}.{name}: is required")
    for name, item in value.items():
        if name in properties:
            _check(properties[name], item, f"{where}.{name}", errors)
        elif schema.get("additionalProperties") is False:
            known = ", ".join(properties) or "none"
            errors.append(f"{where}.{name}: is not a parameter (parameters: {known})")


def _bounds(schema: dict[str, Any], value: Any, where: str, errors: list[str]) -> None:
    checks = (
        ("minimum", "maximum", _number(value), "{}"),
        ("minLength", "maxLength", len(value) if isinstance(value, str) else None, "{} chars"),
        ("minItems", "maxItems", len(value) if isinstance(value, list) else None, "{} items"),
    )
    for low_key, high_key, measure, unit in checks:
        if measure is None:
            continue
        low, high = schema.get(low_key), schema.get(high_key)
        if isinstance(low, int | float) and measure < low:
            errors.append(f"{where}: must be at least {unit.format(low)}")
        if isinstance(high, int | float) and measure > high:
            errors.append(f"{where}: must be at most {unit.format(high)}")


def _number(value: Any) -> float | None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None


def _show(value: Any) -> str:
    """A value as the model sent it, short: ``the string "a"``, ``an array``…"""
    if isinstance(value, str):
        text = json.dumps(value[:40], ensure_ascii=False)
        return f"the string {text}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return "an object" if isinstance(value, dict) else "an array"
