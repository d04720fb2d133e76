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
from app.runs.errors import InvalidInput
from app.storage import ConversationRepository, ToolOutcome


@dataclass(frozen=True)
class Delta:
    """A delta bundle in domain terms: new messages, tool outcomes, a config merge patch."""

    messages: Sequence[Message] = ()
    tool_results: Sequence[ToolResult] = ()
    config_patch: Mapping[str, Any] | None = None
    keep: int | None = None
    """A run's start only: first keep this many messages and drop the rest (the AI SDK's
    regenerate or edit), in the start's transaction, so a start refused (a key's limits, a
    busy conversation) drops nothing."""

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


async def rewound(
    repo: ConversationRepository,
    conversation_id: str,
    delta: Delta,
    expected_version: int | None,
) -> int | None:
    """Rewind as the delta asks (``keep``), in the repository's transaction; the version the
    rest of the write expects next (None: the rewind checked it)."""
    if delta.keep is None:
        return expected_version
    try:
        await repo.rewind(conversation_id, delta.keep, expected_version)
    except ValueError as exc:  # checked under the row lock, against the current count
        raise InvalidInput(("body", "messageId"), str(exc)) from exc
    return None
