"""The spend metrics: tokens by kind, cost by model, and the calls of models no price is known
for (docs/spend.md). Imports prometheus_client and app.observability.metrics (whose scrape
reads the same registry, in multiprocess mode too)."""

from __future__ import annotations

from prometheus_client import Counter

import app.observability.metrics  # noqa: F401  (the multiprocess directory is checked first)

MODEL_TOKENS = Counter(
    "parley_model_tokens_total",
    "Tokens of the model calls charged to the ledger, by provider and kind (input, output, "
    "reasoning, cache_read, cache_write; the cache kinds are parts of input, reasoning of output).",
    ["provider", "kind"],
)
COST = Counter(
    "parley_cost_usd_total",
    "US dollars charged to the ledger, by provider and model.",
    ["provider", "model"],
)
UNPRICED_CALLS = Counter(
    "parley_unpriced_calls_total",
    "Model calls charged with cost null: the price table knows no such model.",
    ["provider", "model"],
)


def charged(provider: str, model: str, tokens: dict[str, int], cost: float | None) -> None:
    """One model call written to the ledger."""
    for kind, n in tokens.items():
        if n:
            MODEL_TOKENS.labels(provider, kind.removesuffix("_tokens")).inc(n)
    if cost is None:
        UNPRICED_CALLS.labels(provider, model).inc()
    else:
        COST.labels(provider, model).inc(cost)
