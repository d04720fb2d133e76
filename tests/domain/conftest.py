"""Fixtures of the domain tests (helpers in domain_support.py)."""

from __future__ import annotations

import pytest

from app.domain import LLMPromptBuilder
from app.providers import OfflineAdapter
from tests.domain.domain_support import selector


@pytest.fixture
def offline() -> OfflineAdapter:
    return OfflineAdapter()


@pytest.fixture
def llm(offline: OfflineAdapter) -> LLMPromptBuilder:
    """A fresh builder on the offline adapter, as ``app.providers.default_builder`` makes one."""
    return LLMPromptBuilder(model_selector=selector(offline))
