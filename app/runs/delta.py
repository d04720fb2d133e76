"""A delta bundle in domain terms, and the config patch it carries, as a run's start and a
conversation's change both apply them.

May import the domain, storage and the runs layer's config and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain import Message, ToolResult
from app.runs.config import ConfigContext, merge_patch
from app.storage import ToolOutcome


@dataclass(frozen=True)
class Delta:
    """A delta bundle in domain terms: new messages, tool outcomes, a config merge patch."""

    messages: Sequence[Message] = ()
    tool_results: Sequence[ToolResult] = ()
    config_patch: Mapping[str, Any] | None = None

    def outcomes(self) -> list[ToolOutcome]:
        """The tool results as storage takes them."""
        return [
            ToolOutcome(r.tool_call_id, r.result, r.error, r.attachments) for r in self.tool_results
        ]


def config_update(
    configs: ConfigContext, patch: Mapping[str, Any] | None
) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """What turns a stored config into the patched one (checked), or None for no patch."""
    if not patch:
        return None

    def update(stored: Mapping[str, Any]) -> dict[str, Any]:
        config = merge_patch(stored, patch)
        configs.check(config)
        return config

    return update
