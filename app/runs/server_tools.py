"""The server-side tools a conversation may enable by name (config ``tools``).

May import the domain only. They run inside the run, bounded by ``max_tool_rounds`` and the
tool timeout; what they raise becomes the call's error, sent back to the model.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from app.domain import Tool


def current_time(timezone: str = "UTC") -> str:
    """The current date and time in ISO 8601.

    Args:
        timezone: An IANA time zone name, such as "Europe/Paris".
    """
    return dt.datetime.now(zoneinfo.ZoneInfo(timezone)).isoformat(timespec="seconds")


def add_numbers(numbers: list[float]) -> float:
    """The sum of a list of numbers.

    Args:
        numbers: The numbers to add.
    """
    return sum(numbers)


def builtin_tools() -> dict[str, Tool]:
    """Every server-side tool, by name."""
    tools = [Tool.from_function(f) for f in (current_time, add_numbers)]
    return {t.name: t for t in tools}
