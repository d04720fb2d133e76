"""The price table: shipped for the providers' default models, overridden by a file, and a
call's cost with each kind of token billed once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.domain import Usage
from app.providers.anthropic_messages import DEFAULT_ANTHROPIC_MODEL
from app.providers.openai_chat import DEFAULT_OPENAI_MODEL
from app.settings import Settings
from app.spend.pricing import load_prices


def test_the_providers_default_models_have_prices() -> None:
    prices = load_prices()
    assert prices.price(DEFAULT_ANTHROPIC_MODEL) is not None
    assert prices.price(DEFAULT_OPENAI_MODEL) is not None
    assert prices.price("no-such-model") is None
    assert prices.cost("no-such-model", Usage(1, 1)) is None


def test_a_dated_model_takes_its_bases_price() -> None:
    prices = load_prices()
    assert prices.price("claude-sonnet-4-5-20250929") == prices.price("claude-sonnet-4-5")


def test_each_kind_is_billed_once() -> None:
    price = load_prices().price("claude-sonnet-4-6")
    assert price is not None
    # 1M input tokens, of which 600k read from the cache and 100k written to it; 1M output
    # tokens, of which 200k reasoning (billed as output, once).
    usage = Usage(1_000_000, 1_000_000, 200_000, 600_000, 100_000)
    expected = 0.3 * price.input + 0.6 * price.cache_read + 0.1 * price.cache_write + price.output
    assert price.cost(usage) == pytest.approx(expected)


def test_a_file_replaces_and_adds_models(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    table = {"models": {"claude-sonnet-4-6": {"input": 1, "output": 2}, "mine": {"output": 5}}}
    path.write_text(json.dumps(table))
    prices = load_prices(str(Settings(prices_file=str(path)).prices_file))
    assert prices.cost("claude-sonnet-4-6", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert prices.cost("mine", Usage(10, 1_000_000)) == pytest.approx(5.0)
    assert prices.price("gpt-4o") == load_prices().price("gpt-4o")


def test_a_file_that_is_no_price_table_is_a_setting_error(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('["not", "a", "table"]')
    with pytest.raises(ValidationError, match="is not a price table"):
        Settings(prices_file=str(path))
    with pytest.raises(ValidationError):
        Settings(prices_file=str(tmp_path / "missing.json"))
