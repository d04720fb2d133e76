"""A conversation's stored config (a JSON object) and the domain ConversationConfig it runs with.

May import the domain and the providers' token counting. The stored keys are the API's:
``provider``, ``model``, ``tools``, ``client_tools``, ``temperature``, ``max_output_tokens``,
``context_max_tokens``, ``max_tool_rounds``, ``reasoning`` (an object: ``effort``,
``budget_tokens``, ``summary``). In ``tools``, ``image_generation`` names the providers' image
tool (``ConversationConfig.image_generation: auto``), not a server-side tool. A patch is a JSON
Merge Patch (RFC 7396) over them: ``null`` removes a key, an object is merged key by key, and an
object left empty is removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.domain import (
    ConversationConfig,
    ConversationConfigurationError,
    DeltaApplicationError,
    ModelSelectionStrategy,
    Reasoning,
    Tool,
    approximate_tokens,
)
from app.domain.config import validated_config
from app.domain.context import TokenCounter
from app.providers.tokens import token_counter_for
from app.runs.errors import InvalidInput

IMAGE_TOOL = "image_generation"
"""The name in ``tools`` that lets the model make images (docs/providers.md)."""


def config_error(key: str, detail: str, **extra: Any) -> InvalidInput:
    """The error for a bad value of config ``key``."""
    return InvalidInput(("body", "config", key), detail, **extra)


def merge_patch(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` with ``patch`` applied (RFC 7396): ``None`` removes a key, an object is
    merged into the stored one key by key (an object left empty is removed: nothing set is
    the default), anything else replaces the key's value."""
    merged = dict(stored)
    for key, value in patch.items():
        if isinstance(value, Mapping):
            current = merged.get(key)
            value = merge_patch(current if isinstance(current, Mapping) else {}, value)
        if value is None or value == {}:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class ConfigContext:
    """What the server offers: the model selector and the server-side tools."""

    selector: ModelSelectionStrategy
    server_tools: Mapping[str, Tool]
    tool_timeout: float
    context_trim_to: float | None = None
    """``PARLEY_CONTEXT_TRIM_TO`` below 1: history is dropped in steps (None: it slides)."""

    def check(self, config: Mapping[str, Any]) -> None:
        """Raise InvalidInput unless this server can run ``config``."""
        provider = config.get("provider")
        if provider is not None and provider not in self.selector.available:
            raise config_error(
                "provider",
                f"provider {provider!r} is not available on this server; available: "
                f"{', '.join(self.selector.available)}",
                available=self.selector.available,
            )
        names: list[str] = list(config.get("tools", []))
        for name in names:
            if name not in self.server_tools and name != IMAGE_TOOL:
                raise config_error(
                    "tools",
                    f"no server-side tool is called {name!r}; available: "
                    f"{', '.join([*sorted(self.server_tools), IMAGE_TOOL])}",
                    available=[*sorted(self.server_tools), IMAGE_TOOL],
                )
        names += [t["name"] for t in config.get("client_tools", [])]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise config_error("client_tools", f"tool names repeat: {', '.join(repeated)}")
        try:
            _reasoning(config)
        except DeltaApplicationError as exc:
            raise config_error("reasoning", str(exc)) from exc

    def token_counter(self, config: ConversationConfig) -> tuple[TokenCounter, bool]:
        """The counter a run of ``config`` uses, and whether its counts are exact."""
        try:
            adapter, model = config.select()
        except ConversationConfigurationError:
            return approximate_tokens, False
        return token_counter_for(adapter, model)

    def provider_name(self, config: ConversationConfig) -> str | None:
        """The provider a run of ``config`` talks to (None: none is available); a run sends
        it only its own reasoning."""
        try:
            adapter, _ = config.select()
        except ConversationConfigurationError:
            return None
        return adapter.name

    def build(
        self, config: Mapping[str, Any], conversation_id: str | None = None
    ) -> ConversationConfig:
        """The domain config a run uses for this stored config; ``conversation_id`` is the
        key a provider's prompt cache may group the conversation's requests by."""
        tools = [self.server_tools[n] for n in config.get("tools", []) if n in self.server_tools]
        tools += [
            Tool.client(t["name"], t.get("description", ""), t.get("parameters"))
            for t in config.get("client_tools", [])
        ]
        defaults = ConversationConfig()
        return ConversationConfig(
            preferred_provider=config.get("provider"),
            preferred_model=config.get("model"),
            model_selector=self.selector,
            tools=tuple(tools),
            temperature=config.get("temperature"),
            max_output_tokens=config.get("max_output_tokens"),
            context_max_tokens=config.get("context_max_tokens"),
            context_trim_to=self.context_trim_to,
            cache_key=conversation_id,
            max_tool_rounds=config.get("max_tool_rounds", defaults.max_tool_rounds),
            tool_timeout=self.tool_timeout,
            reasoning=_reasoning(config),
            image_generation="auto" if IMAGE_TOOL in config.get("tools", []) else None,
        )


def _reasoning(config: Mapping[str, Any]) -> Reasoning | None:
    """The domain's Reasoning of a stored config (None: the provider's default), checked by
    the domain's rules; DeltaApplicationError if the stored object breaks them."""
    return validated_config(ConversationConfig(), {"reasoning": config.get("reasoning")}).reasoning
