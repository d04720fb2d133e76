"""Settings of prompt caching and of how a conversation's history is trimmed to its budget
(docs/providers.md, "Prompt caching")."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class CachingSettings(BaseSettings):
    """Prompt-cache hints sent to the providers, and stepped context truncation."""

    prompt_caching: bool = Field(
        True,
        description="Send prompt-cache hints: Anthropic `cache_control` breakpoints on the "
        "stable prefix (tools, system, history), OpenAI `prompt_cache_key` from the "
        "conversation. Off: requests carry neither.",
    )
    context_trim_to: float = Field(
        0.6,
        ge=0.1,
        le=1.0,
        description="When a conversation's history outgrows its `context_max_tokens`, the "
        "oldest messages are dropped until it is within this fraction of the budget, so the "
        "kept prefix (and the provider's prompt cache) stays the same for many turns. `1`: "
        "slide instead, dropping as little as fits each turn (the prefix changes every turn).",
    )
