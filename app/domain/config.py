"""ConversationConfig: what a conversation runs with, and how config deltas change it.

Imports only the standard library and the domain. Configuration is never serialized with the
messages (requirement 6): it lives on the conversation and is recreated on restoration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.adapter import EFFORTS, SUMMARIES, ImageGeneration, ModelAdapter, Reasoning
from app.domain.attachments import DEFAULT_RUN_BYTES, AttachmentReader
from app.domain.errors import ConversationConfigurationError, DeltaApplicationError
from app.domain.selection import DefaultModelSelectionStrategy, ModelSelectionStrategy
from app.domain.tools import Tool

DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_TOOL_TIMEOUT = 30.0


@dataclass(frozen=True)
class ConversationConfig:
    """Execution configuration; it exists only on the conversation (requirement 2.6)."""

    preferred_provider: str | None = None
    preferred_model: str | None = None
    model_selector: ModelSelectionStrategy = field(default_factory=DefaultModelSelectionStrategy)
    tools: tuple[Tool, ...] = ()
    temperature: float | None = None
    max_output_tokens: int | None = None
    context_max_tokens: int | None = None
    context_trim_to: float | None = None
    """Drop history in steps, down to this fraction of ``context_max_tokens`` (None: slide)."""
    cache_key: str | None = None
    """What a provider's prompt cache may group this conversation's requests by (its id)."""
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    reasoning: Reasoning | None = None
    """How much the model reasons; None: the provider's default."""
    attachments: AttachmentReader | None = None
    """Where a run reads its messages' attachments (the file store); None: models read a note
    in place of each file."""
    attachment_bytes: int = DEFAULT_RUN_BYTES
    """How many attachment bytes one run keeps in memory at most."""
    image_generation: ImageGeneration | None = None
    """``auto``: the model may make images (OpenAI Responses' ``image_generation`` tool, the
    offline model's drawings); ``required``: it must; None: it makes none."""

    def __post_init__(self) -> None:
        # seed 001 declares ``tools: list[Tool]``: any sequence of tools or functions is kept
        # as a tuple of Tools, so a function is refused here, not when the model calls it
        given: Any = self.tools
        if not isinstance(given, list | tuple):
            raise ConversationConfigurationError(
                f"tools must be a list of tools, not {type(given).__name__}"
            )
        object.__setattr__(self, "tools", tuple(Tool.from_function(t) for t in given))

    def select(self) -> tuple[ModelAdapter, str]:
        """The adapter and model this config runs on."""
        return self.model_selector.select_model(self.preferred_provider, self.preferred_model)

    def tool(self, name: str) -> Tool | None:
        """The configured tool called ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)


ALIASES = {"provider": "preferred_provider", "model": "preferred_model"}


def _optional_text(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DeltaApplicationError(f"config {key}: must be a non-empty string or null")
    return value.strip()


def _number(low: float, high: float | None, integer: bool) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        if value is None:
            return None
        ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or value < low or (high and value > high):
            kind = "an integer" if integer else "a number"
            bound = f"from {low:g} to {high:g}" if high else f"of at least {low:g}"
            raise DeltaApplicationError(f"config {key}: must be {kind} {bound}, or null")
        return value

    return check


def _tools(key: str, value: Any) -> tuple[Tool, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise DeltaApplicationError(f"config {key}: must be a list of tools")
    try:
        tools = tuple(Tool.from_function(t) for t in value)
    except ConversationConfigurationError as exc:
        raise DeltaApplicationError(f"config {key}: {exc}") from exc
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DeltaApplicationError(f"config {key}: tool names repeat: {', '.join(duplicates)}")
    return tools


def _reasoning(key: str, value: Any) -> Reasoning | None:
    """A Reasoning, or a mapping of its fields (``effort``, ``budget_tokens``, ``summary``)."""
    if value is None or isinstance(value, Reasoning):
        return value
    if not isinstance(value, Mapping):
        raise DeltaApplicationError(
            f"config {key}: must be an object with effort, budget_tokens, summary, or null"
        )
    unknown = sorted(str(k) for k in value if k not in ("effort", "budget_tokens", "summary"))
    if unknown:
        raise DeltaApplicationError(f"config {key}: unknown keys {', '.join(unknown)}")
    effort, summary = value.get("effort"), value.get("summary")
    if effort is not None and effort not in EFFORTS:
        raise DeltaApplicationError(
            f"config {key}.effort: must be one of {', '.join(EFFORTS)}, or null"
        )
    if summary is not None and summary not in SUMMARIES:
        raise DeltaApplicationError(
            f"config {key}.summary: must be one of {', '.join(SUMMARIES)}, or null"
        )
    budget_check = _number(1024, 1_000_000, integer=True)
    budget = budget_check(f"{key}.budget_tokens", value.get("budget_tokens"))
    return Reasoning(effort, budget, summary)


def _image_generation(key: str, value: Any) -> Any:
    if value is not None and value not in ("auto", "required"):
        raise DeltaApplicationError(f"config {key}: must be 'auto', 'required' or null")
    return value


def _store(key: str, value: Any) -> Any:
    if value is not None and not callable(getattr(value, "read", None)):
        raise DeltaApplicationError(f"config {key}: must have an async read(file_id) method")
    return value


def _selector(key: str, value: Any) -> Any:
    if value is not None and not callable(getattr(value, "select_model", None)):
        raise DeltaApplicationError(f"config {key}: must have a select_model method")
    return value


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "preferred_provider": _optional_text,
    "preferred_model": _optional_text,
    "model_selector": _selector,
    "tools": _tools,
    "temperature": _number(0, 2, integer=False),
    "max_output_tokens": _number(1, None, integer=True),
    "context_max_tokens": _number(1, None, integer=True),
    "context_trim_to": _number(0.1, 1, integer=False),
    "cache_key": _optional_text,
    "max_tool_rounds": _number(0, 1000, integer=True),
    "tool_timeout": _number(0.001, 3600, integer=False),
    "reasoning": _reasoning,
    "image_generation": _image_generation,
    "attachments": _store,
}


def validated_config(config: ConversationConfig, deltas: Mapping[str, Any]) -> ConversationConfig:
    """``config`` with ``deltas`` applied; ``None`` resets a key. Raises before changing anything.

    Keys: the fields of ConversationConfig, with ``provider`` and ``model`` as aliases of
    ``preferred_provider`` and ``preferred_model``.
    """
    if not isinstance(deltas, Mapping):
        raise DeltaApplicationError("config deltas must be a mapping of key to value")
    defaults = ConversationConfig()
    changes: dict[str, Any] = {}
    for raw_key, value in deltas.items():
        key = ALIASES.get(raw_key, raw_key)
        check = _CHECKS.get(key)
        if check is None:
            known = ", ".join(sorted([*_CHECKS, *ALIASES]))
            raise DeltaApplicationError(f"Unknown config key: {raw_key!r} (known: {known})")
        checked = check(raw_key, value)
        changes[key] = getattr(defaults, key) if checked is None else checked
    return dataclasses.replace(config, **changes)
