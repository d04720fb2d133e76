"""Text that can be encoded: lone surrogates (from a model's or a tool's JSON) become U+FFFD.

Imports only the standard library. JSON may spell a lone surrogate (``"\\ud800"``); Python then
holds a ``str`` that no UTF-8 encoder accepts, so it could be neither streamed nor stored.
The run loop passes what models and tools return through ``scrub``.
"""

from __future__ import annotations

from typing import Any


def scrub_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a pair becomes its character)."""
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
