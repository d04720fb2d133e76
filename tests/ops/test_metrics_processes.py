"""Metrics across processes (PROMETHEUS_MULTIPROC_DIR) and the helpers the runs layer calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from app.observability import metrics

REPO_ROOT = Path(__file__).resolve().parents[2]

RECORD = """
from app.observability import metrics
metrics.run_started("offline")
metrics.output_tokens("offline", 7)
metrics.event_log_flush(0.004, 12)
metrics.process_exited()  # as the app's shutdown does
"""

SCRAPE = """
import sys
from app.observability import metrics
body, content_type = metrics.scrape()
sys.stdout.write(body.decode())
"""


def python(code: str, directory: Path) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def scraped(tmp_path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A scrape in a process of its own: each sample's value by its name and labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(python(SCRAPE, tmp_path))
        for s in family.samples
    }


def test_a_scrape_adds_up_every_process(tmp_path: Path) -> None:
    python(RECORD, tmp_path)
    python(RECORD, tmp_path)
    samples = scraped(tmp_path)
    assert samples[("parley_runs_started_total", (("provider", "offline"),))] == 2
    assert samples[("parley_output_tokens_total", (("provider", "offline"),))] == 14
    assert samples[("parley_event_log_flush_batch_events_count", ())] == 2
    assert samples[("parley_event_log_flush_batch_events_sum", ())] == 24
    # Both recording processes have shut down: their share of a live gauge is gone.
    assert samples.get(("parley_runs_active", (("provider", "offline"),)), 0) == 0


KILLED = """
import os
from app.observability import metrics
metrics.run_started("offline")
metrics.run_started("offline")
os._exit(0)  # as kill -9 or the OOM killer would end it: no process_exited
"""


def test_a_process_that_died_without_shutting_down_leaves_no_active_runs(
    tmp_path: Path,
) -> None:
    python(KILLED, tmp_path)
    python(RECORD, tmp_path)
    samples = scraped(tmp_path)
    assert samples[("parley_runs_started_total", (("provider", "offline"),))] == 3  # counters stay
    assert samples.get(("parley_runs_active", (("provider", "offline"),)), 0) == 0


def test_event_log_flush_records_latency_and_batch_size() -> None:
    def count(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    flushes = count("parley_event_log_flush_duration_seconds_count")
    small = REGISTRY.get_sample_value("parley_event_log_flush_batch_events_bucket", {"le": "5.0"})
    metrics.event_log_flush(0.002, 3)
    assert count("parley_event_log_flush_duration_seconds_count") == flushes + 1
    assert (
        REGISTRY.get_sample_value("parley_event_log_flush_batch_events_bucket", {"le": "5.0"})
        == (small or 0) + 1
    )


def test_the_token_clock_restarts_its_gap_at_each_block() -> None:
    def gaps() -> float:
        return (
            REGISTRY.get_sample_value("parley_inter_token_gap_seconds_count", {"provider": "p"})
            or 0
        )

    before = gaps()
    clock = metrics.TokenClock("p")
    clock.delta()  # the first token: no gap
    clock.delta()
    clock.block_start()  # a tool round in between is not a gap between tokens
    clock.delta()
    clock.delta()
    assert gaps() == before + 2


def test_a_multiprocess_directory_that_does_not_exist_is_a_one_line_configuration_error(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "not-created"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(missing)}
    done = subprocess.run(
        [sys.executable, "-c", "import app.main"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()  # not prometheus_client's FileNotFoundError traceback
    assert line.startswith("parley: configuration error: PROMETHEUS_MULTIPROC_DIR: ")
