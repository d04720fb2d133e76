"""Model adapters (offline, openai, anthropic) and the selector built from the settings.

May import the domain, the settings and the provider SDKs; nothing above it.
"""

from app.providers.offline import OfflineAdapter
from app.providers.registry import build_selector, default_builder

__all__ = ["OfflineAdapter", "build_selector", "default_builder"]
