"""The price table: USD per million tokens of each kind, per model, and a model call's cost.

Imports the standard library and app.domain. The table ships as package data
(``prices.json`` beside this module); ``PARLEY_PRICES_FILE`` names a file of the same shape
whose models replace or add to the shipped ones. A model the table does not know costs
``None`` (counted by a metric, app/spend/ledger.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from app.domain import Usage

PER = 1_000_000
KINDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: uncached input, output, cache reads, cache writes."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        """The call's cost: ``input_tokens`` holds the cached parts, ``output_tokens`` the
        reasoning (each kind billed once)."""
        read = usage.cache_read_tokens or 0
        written = usage.cache_write_tokens or 0
        fresh = max(0, (usage.input_tokens or 0) - read - written)
        output = usage.output_tokens or 0
        total = (
            fresh * self.input
            + output * self.output
            + read * self.cache_read
            + written * self.cache_write
        )
        return total / PER


class PriceTable:
    """Prices by model; a dated variant (``claude-sonnet-4-5-20250929``) takes its base's."""

    def __init__(self, prices: dict[str, Price]) -> None:
        self._prices = prices

    def price(self, model: str) -> Price | None:
        found = self._prices.get(model)
        if found is not None:
            return found
        bases = [m for m in self._prices if model.startswith(m + "-")]
        return self._prices[max(bases, key=len)] if bases else None

    def cost(self, model: str, usage: Usage) -> float | None:
        price = self.price(model)
        return None if price is None else price.cost(usage)

    @property
    def models(self) -> list[str]:
        return sorted(self._prices)


def _parse(document: Any, source: str) -> dict[str, Price]:
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, dict):
        raise ValueError(f"{source}: a price table is an object with a 'models' object")
    out: dict[str, Price] = {}
    for model, entry in models.items():
        try:
            values = {kind: float(entry.get(kind, 0.0)) for kind in KINDS}
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: model {model!r}: prices must be numbers") from exc
        if any(v < 0 for v in values.values()):
            raise ValueError(f"{source}: model {model!r}: a price cannot be negative")
        out[str(model)] = Price(**values)
    return out


def shipped_prices() -> dict[str, Price]:
    text = resources.files("app.spend").joinpath("prices.json").read_text("utf-8")
    return _parse(json.loads(text), "app/spend/prices.json")


@cache
def load_prices(prices_file: str = "") -> PriceTable:
    """The shipped table, with ``prices_file``'s models over it (read once per process)."""
    prices = shipped_prices()
    if prices_file:
        path = Path(prices_file)
        try:
            document = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"PARLEY_PRICES_FILE {prices_file!r}: {exc}") from exc
        prices.update(_parse(document, prices_file))
    return PriceTable(prices)
