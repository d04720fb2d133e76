"""Model adapters (offline, openai, anthropic) and the selector built from the settings.

May import the domain, the settings and the provider SDKs; nothing above it. The SDK adapters
live in ``openai_responses`` (the default), ``openai_chat`` and ``anthropic_messages`` and load
only when their key is set.
"""

from app.providers.offline import OfflineAdapter
from app.providers.registry import (
    build_adapters,
    build_selector,
    close_adapters,
    close_selector,
    default_builder,
    open_selector,
)
from app.providers.tokens import token_counter_for

__all__ = [
    "OfflineAdapter",
    "build_adapters",
    "build_selector",
    "close_adapters",
    "close_selector",
    "default_builder",
    "open_selector",
    "token_counter_for",
]
