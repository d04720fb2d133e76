"""Model selection (seed 001's ``model_selector``): which adapter and model serve a request.

Imports only the standard library. ``app.providers`` builds a selector over the adapters the
server has configured; the domain only knows the protocol.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from app.domain.adapter import ModelAdapter
from app.domain.errors import ConversationConfigurationError


class ModelSelectionStrategy(Protocol):
    """Picks an adapter and a model name for a preferred provider and model."""

    def select_model(
        self, preferred_provider: str | None, preferred_model: str | None
    ) -> tuple[ModelAdapter, str]:
        """Return ``(adapter, model)`` or raise ConversationConfigurationError."""
        ...

    @property
    def available(self) -> list[str]:
        """The provider names that can be selected."""
        ...


class DefaultModelSelectionStrategy:
    """The preferred provider if it is available, else the default one; its default model."""

    def __init__(
        self, adapters: Iterable[ModelAdapter] = (), default_provider: str | None = None
    ) -> None:
        self._adapters = {a.name: a for a in adapters}
        self._default = default_provider

    @property
    def available(self) -> list[str]:
        return list(self._adapters)

    def adapter(self, name: str) -> ModelAdapter | None:
        """The adapter registered under ``name``, if any."""
        return self._adapters.get(name)

    def select_model(
        self, preferred_provider: str | None, preferred_model: str | None
    ) -> tuple[ModelAdapter, str]:
        name = preferred_provider or self._default or next(iter(self._adapters), None)
        if name is None:
            raise ConversationConfigurationError(
                "no model provider is configured: give the conversation a model_selector "
                "with at least one adapter (app.providers builds one from the settings)"
            )
        adapter = self._adapters.get(name)
        if adapter is None:
            raise ConversationConfigurationError(
                f"provider {name!r} is not available; available: {', '.join(self.available)}"
            )
        return adapter, preferred_model or adapter.default_model
