"""Which adapters this server has, from its settings; the model selector over them."""

from __future__ import annotations

from app.domain import DefaultModelSelectionStrategy, LLMPromptBuilder, ModelAdapter
from app.providers.offline import OfflineAdapter
from app.settings import Settings


def build_adapters(settings: Settings) -> list[ModelAdapter]:
    """Every available adapter: ``offline`` always, the others when their key is set."""
    adapters: list[ModelAdapter] = []
    adapters.append(OfflineAdapter(settings.offline_delay_ms))
    return adapters


def build_selector(settings: Settings) -> DefaultModelSelectionStrategy:
    """The model selector over the available adapters (default: the settings' choice)."""
    adapters = build_adapters(settings)
    default = settings.default_provider or adapters[0].name
    return DefaultModelSelectionStrategy(adapters, default)


def default_builder(settings: Settings | None = None) -> LLMPromptBuilder:
    """A fresh builder wired to the providers the environment configures."""
    return LLMPromptBuilder(model_selector=build_selector(settings or Settings()))
