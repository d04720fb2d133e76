"""Which adapters this server has, from its settings; the model selector over them.

May import the domain, the settings and the adapters. The SDK adapters are imported only when
their key is set, so an offline-only server never loads an SDK.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.domain import DefaultModelSelectionStrategy, LLMPromptBuilder, ModelAdapter
from app.providers.base import RetryPolicy
from app.providers.offline import OfflineAdapter
from app.settings import Settings


def _retry(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        max_retries=settings.provider_max_retries,
        max_wait=settings.provider_max_retry_wait_seconds,
        backoff=settings.provider_retry_backoff_seconds,
    )


def _openai(settings: Settings) -> ModelAdapter | None:
    if settings.openai_api_key is None:
        return None
    from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig
    from app.providers.openai_responses import OpenAIResponsesAdapter

    adapter = OpenAIResponsesAdapter if settings.openai_api == "responses" else OpenAIAdapter
    return adapter(
        OpenAIConfig(
            api_key=settings.openai_api_key.get_secret_value(),
            base_url=settings.openai_base_url,
            default_model=settings.openai_default_model,
            connect_timeout=settings.provider_connect_timeout_seconds,
            read_timeout=settings.provider_read_timeout_seconds,
            http_client=settings.provider_http_client,
            retry=_retry(settings),
            trailing_assistant=settings.openai_trailing_assistant,
            prompt_caching=settings.prompt_caching,
        )
    )


def _anthropic(settings: Settings) -> ModelAdapter | None:
    if settings.anthropic_api_key is None:
        return None
    from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig

    return AnthropicAdapter(
        AnthropicConfig(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            default_model=settings.anthropic_default_model,
            connect_timeout=settings.provider_connect_timeout_seconds,
            read_timeout=settings.provider_read_timeout_seconds,
            http_client=settings.provider_http_client,
            retry=_retry(settings),
            max_tokens=settings.anthropic_max_tokens,
            prompt_caching=settings.prompt_caching,
        )
    )


def build_adapters(settings: Settings) -> list[ModelAdapter]:
    """Every available adapter: ``openai`` and ``anthropic`` when their key is set, in that
    order, then ``offline`` (always). ``openai`` speaks the API ``PARLEY_OPENAI_API`` names:
    the Responses API (the default) or chat completions."""
    real = [a for a in (_openai(settings), _anthropic(settings)) if a is not None]
    return [*real, OfflineAdapter(settings.offline_delay_ms)]


def build_selector(settings: Settings) -> DefaultModelSelectionStrategy:
    """The model selector over the available adapters.

    Default provider: ``PARLEY_DEFAULT_PROVIDER``, else the first real one, else ``offline``.
    A default that names an unavailable provider is a configuration error (ValueError).
    """
    adapters = build_adapters(settings)
    names = [a.name for a in adapters]
    default = settings.default_provider or names[0]
    if default not in names:
        raise ValueError(
            f"PARLEY_DEFAULT_PROVIDER={default!r} is not available; available: "
            f"{', '.join(names)} (openai and anthropic need OPENAI_API_KEY / ANTHROPIC_API_KEY)"
        )
    return DefaultModelSelectionStrategy(adapters, default)


def _adapters(selector: object) -> list[ModelAdapter]:
    if not isinstance(selector, DefaultModelSelectionStrategy):
        return []
    return [a for n in selector.available if (a := selector.adapter(n)) is not None]


def open_selector(selector: object) -> None:
    """Make the SDK clients of a selector made by ``build_selector`` now, at start-up, rather
    than on each provider's first request (a client's TLS context alone takes tens of ms)."""
    for adapter in _adapters(selector):
        open_client = getattr(adapter, "open", None)
        if callable(open_client):
            open_client()


async def close_adapters(adapters: Iterable[ModelAdapter]) -> None:
    """Close the SDK clients of ``adapters`` (those with an ``aclose``); call at shutdown."""
    for adapter in adapters:
        close = getattr(adapter, "aclose", None)
        if callable(close):
            await close()


async def close_selector(selector: object) -> None:
    """Close the adapters of a selector made by ``build_selector``."""
    await close_adapters(_adapters(selector))


def default_builder(settings: Settings | None = None) -> LLMPromptBuilder:
    """A fresh builder wired to the providers the environment configures."""
    return LLMPromptBuilder(model_selector=build_selector(settings or Settings()))
