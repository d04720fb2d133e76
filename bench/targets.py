"""Issue 31's targets, read from bench/stream.py's results: Parley against the relays of the same
run (one worker, event log on), and PostgreSQL against SQLite.

Printed after the stream benchmark's table, or on its own: ``.venv/bin/python -m bench.targets
[bench/stream-results.json]``. Each cell is SQLite's figure, PostgreSQL's in brackets, with a
mark where the target is not met.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Results = list[dict[str, Any]]


@dataclass(frozen=True)
class Target:
    label: str
    scenario: str
    figure: str
    relay: str
    compare: Callable[[float, float], float]
    met: Callable[[float], bool]
    unit: str = ""


def _ratio(parley: float, relay: float) -> float:
    return parley / relay if relay else float("nan")


def _over(parley: float, relay: float) -> float:
    return parley - relay


TARGETS = [
    Target(
        "100 paced ÷ byte pipe (≥ 0.95)",
        "paced_100x150",
        "tok_s",
        "relay-pipe",
        _ratio,
        lambda v: v >= 0.95,
    ),
    Target(
        "first token p99, 100 starts at once ÷ parsing relay (≤ 1.2)",
        "starts_100",
        "first_p99_ms",
        "relay-parse",
        _ratio,
        lambda v: v <= 1.2,
    ),
    Target(
        "200 paced ÷ parsing relay (≥ 0.9)",
        "paced_200x100",
        "tok_s",
        "relay-parse",
        _ratio,
        lambda v: v >= 0.9,
    ),
    Target(
        "RSS at 200 paced − relays (≤ +30 MB)",
        "paced_200x100",
        "rss_mb",
        "relay-parse",
        _over,
        lambda v: v <= 30,
        " MB",
    ),
]


def _figure(results: Results, scenario: str, provider: str, target: str, name: str) -> float:
    for r in results:
        if (r["scenario"], r["provider"], r["target"]) == (scenario, provider, target):
            return float(r["median"][name])
    return float("nan")


def _cell(value: float, met: bool, unit: str) -> str:
    if value != value:  # not measured
        return "–"
    text = f"{value:+.0f}{unit}" if unit else f"{value:.2f}"
    return text if met else f"{text} ✗"


def targets_table(results: Results) -> str:
    """Markdown: the targets by provider, SQLite (PostgreSQL)."""
    order = ("openai", "openai-chat", "anthropic")
    providers = sorted({r["provider"] for r in results}, key=order.index)
    lines = [
        "| target | " + " | ".join(providers) + " |",
        "| --- |" + " ---: |" * len(providers),
    ]
    for t in TARGETS:
        cells = []
        for p in providers:
            relay = _figure(results, t.scenario, p, t.relay, t.figure)
            pair = [
                t.compare(_figure(results, t.scenario, p, db, t.figure), relay)
                for db in ("parley-sqlite", "parley-postgres")
            ]
            sqlite, postgres = (_cell(v, t.met(v), t.unit) for v in pair)
            cells.append(f"{sqlite} ({postgres})")
        lines.append(f"| {t.label} | " + " | ".join(cells) + " |")
    lines.append(_postgres_row(results, providers))
    return "\n".join(lines)


def _postgres_row(results: Results, providers: list[str]) -> str:
    """PostgreSQL ÷ SQLite on the paced rows' tok/s (within 10%: ≥ 0.9), the worse of the two."""
    cells = []
    for p in providers:
        ratios = [
            _ratio(
                _figure(results, s, p, "parley-postgres", "tok_s"),
                _figure(results, s, p, "parley-sqlite", "tok_s"),
            )
            for s in ("paced_100x150", "paced_200x100")
        ]
        worst = min(ratios)
        cells.append(_cell(worst, worst >= 0.9, ""))
    return "| PostgreSQL ÷ SQLite, paced tok/s, the lower (≥ 0.9) | " + " | ".join(cells) + " |"


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/stream-results.json"
    with open(path) as file:
        print(targets_table(json.load(file)["results"]))


if __name__ == "__main__":
    main()
