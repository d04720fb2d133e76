"""Text that can be encoded and sent back: lone surrogates and NULs (from a model's or a tool's
JSON) become U+FFFD.

Imports only the standard library. JSON may spell a lone surrogate (``"\\ud800"``); Python then
holds a ``str`` that no UTF-8 encoder accepts, so it could be neither streamed nor stored.
The run loop passes what models and tools return through ``scrub``. JSON texts a client sends
inside a request are refused instead (``unstorable_json``), as the API refuses such bodies.
"""

from __future__ import annotations

import math
from typing import Any

MAX_JSON_DEPTH = 200  # the API reads back no deeper JSON (pydantic stops at 255 levels)


def scrub_text(text: str) -> str:
    """``text`` with each lone surrogate (a pair becomes its character) and each NUL replaced by
    U+FFFD: the API refuses NUL in what clients send, so a conversation holding one could not be
    imported again from its own export."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def scrub(value: Any) -> Any:
    """``value`` (JSON-like) with every string, keys included, scrubbed."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def unstorable_json(value: Any) -> str | None:
    """Why a parsed JSON value cannot be stored as the API stores JSON; None when it can: a
    NUL, a lone surrogate (key or value), a non-finite number or nesting past MAX_JSON_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if (why := unstorable_text(item)) is not None:
                return why
        elif isinstance(item, float) and not math.isfinite(item):
            return "holds a number that is not finite (NaN, Infinity or out of range)"
        elif isinstance(item, dict | list) and depth > MAX_JSON_DEPTH:
            return f"nests deeper than {MAX_JSON_DEPTH} levels"
        elif isinstance(item, dict):
            stack.extend((key, depth) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


def unstorable_text(text: str) -> str | None:
    """Why a string cannot be stored as the API stores text (a NUL, a lone surrogate); None
    when it can."""
    if "\x00" in text:
        return "holds the NUL character (\\u0000), which cannot be stored"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate: not valid Unicode"
    return None
