"""Imports point downward between the layers (DESIGN §1): api → conversations → runs →
storage/providers → domain, and nothing under them imports ``app.main``, which assembles them
all."""

from __future__ import annotations

from pathlib import Path

from tests.domain.test_domain_imports import imported_modules

APP = Path(__file__).resolve().parents[1] / "app"

# Which app packages each layer may import (besides itself). ``observability`` (metrics and log
# context) is a leaf every layer but the domain may use.
ALLOWED: dict[str, set[str]] = {
    "api": {
        "conversations",
        "runs",
        "spend",
        "webhooks",
        "storage",
        "providers",
        "domain",
        "settings",
        "observability",
    },
    "conversations": {
        "runs",
        "spend",
        "webhooks",
        "storage",
        "domain",
        "settings",
        "observability",
    },
    "runs": {"spend", "webhooks", "storage", "providers", "domain", "settings", "observability"},
    # keys, limits, the usage ledger and prices: beside storage, below the runs
    "spend": {"storage", "domain", "settings", "observability"},
    # the webhooks' outbox and deliverer: beside storage, so a run's ending can enqueue
    "webhooks": {"storage", "domain", "settings", "observability"},
    "storage": {"domain", "settings", "observability"},
    "providers": {"domain", "settings", "observability"},
    "observability": set(),
    "domain": set(),
}


def violations() -> list[str]:
    found = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((APP / layer).glob("**/*.py")):
            for line, module in imported_modules(path):
                parts = module.split(".")
                if parts[0] != "app" or len(parts) < 2:
                    continue
                target = parts[1]
                if target != layer and target not in allowed:
                    found.append(f"{path.relative_to(APP.parent)}:{line} imports {module}")
    return found


def test_layers_import_only_downward() -> None:
    assert violations() == []


def test_the_layer_walk_sees_every_layer() -> None:
    assert all(any((APP / layer).glob("*.py")) for layer in ALLOWED)
