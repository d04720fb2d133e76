"""Parley's Prometheus metrics: the metric objects, small recording helpers, and the scrape.

Imports prometheus_client and the standard library only; any layer but the domain may import
it. With ``PROMETHEUS_MULTIPROC_DIR`` set (before the process starts) every process writes its
values to files there and a scrape of any one of them adds them all up (prometheus_client's
multiprocess mode); the directory must exist, be empty at start, and be shared by the processes
of one server. Gauges then sum over live processes only.

Names follow Prometheus conventions: a ``parley_`` prefix, the unit last, ``_total`` for counters.
"""

from __future__ import annotations

import glob
import os
import sys
import time
from dataclasses import dataclass, field

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)


def _check_multiprocess_dir() -> None:
    """A ``PROMETHEUS_MULTIPROC_DIR`` that is not a writable directory ends the process as a
    bad setting does (status 2, one line), not with prometheus_client's traceback at import."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path and not (os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)):
        print(
            "parley: configuration error: PROMETHEUS_MULTIPROC_DIR: "
            f"{path!r} is not a writable directory (create it, empty, before starting)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(2)


_check_multiprocess_dir()  # before the first metric below opens its file there

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

HTTP_REQUESTS = Counter(
    "parley_http_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "parley_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response (a stream: to its last byte).",
    ["route", "method"],
    buckets=_LATENCY_BUCKETS,
)
RUNS_STARTED = Counter("parley_runs_started_total", "Runs started, by provider.", ["provider"])
RUNS_FINISHED = Counter(
    "parley_runs_finished_total",
    "Runs finished, by provider and final status (completed, requires_action, aborted, failed…).",
    ["provider", "status"],
)
RUNS_ACTIVE = Gauge(
    "parley_runs_active", "Runs in progress.", ["provider"], multiprocess_mode="livesum"
)
TITLES = Counter(
    "parley_titles_total",
    "Titles made after a reply, by outcome: stored, taken (another had titled it), failed, "
    "over_budget (not asked for: the key's budget is spent).",
    ["outcome"],
)
OUTPUT_TOKENS = Counter(
    "parley_output_tokens_total", "Output tokens the models reported, by provider.", ["provider"]
)
FIRST_TOKEN = Histogram(
    "parley_time_to_first_token_seconds",
    "Time from a run's start to its first text delta.",
    ["provider"],
    buckets=_LATENCY_BUCKETS,
)
TOKEN_GAP = Histogram(
    "parley_inter_token_gap_seconds",
    "Time between two text deltas of one content block.",
    ["provider"],
    buckets=_TOKEN_BUCKETS,
)
UPSTREAM_ERRORS = Counter(
    "parley_upstream_errors_total",
    "Failed model requests (each attempt), by provider and error code.",
    ["provider", "code"],
)
UPSTREAM_RETRIES = Counter(
    "parley_upstream_retries_total",
    "Model requests tried again after a failure, by provider and the failure's code.",
    ["provider", "code"],
)
EVENT_LOG_FLUSH = Histogram(
    "parley_event_log_flush_duration_seconds",
    "Time one group commit of the run event log took.",
    buckets=_LATENCY_BUCKETS,
)
EVENT_LOG_BATCH = Histogram(
    "parley_event_log_flush_batch_events",
    "Events written by one group commit of the run event log.",
    buckets=_BATCH_BUCKETS,
)
DB_POOL_IN_USE = Gauge(
    "parley_db_pool_connections_in_use",
    "Database connections checked out of the pool.",
    multiprocess_mode="livesum",
)


def http_request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered request; ``route`` is its template (``/conversations/{conversation_id}``)."""
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    HTTP_DURATION.labels(route, method).observe(seconds)


def run_started(provider: str) -> None:
    RUNS_STARTED.labels(provider).inc()
    RUNS_ACTIVE.labels(provider).inc()


def run_finished(provider: str, status: str) -> None:
    RUNS_FINISHED.labels(provider, status).inc()
    RUNS_ACTIVE.labels(provider).dec()


def title_made(outcome: str) -> None:
    TITLES.labels(outcome).inc()


def first_token(provider: str, seconds: float) -> None:
    FIRST_TOKEN.labels(provider).observe(seconds)


def output_tokens(provider: str, n: int) -> None:
    if n > 0:
        OUTPUT_TOKENS.labels(provider).inc(n)


def upstream_error(provider: str, code: str) -> None:
    UPSTREAM_ERRORS.labels(provider, code).inc()


def upstream_retry(provider: str, code: str) -> None:
    UPSTREAM_RETRIES.labels(provider, code).inc()


def event_log_flush(seconds: float, batch_size: int) -> None:
    """One group commit of the event log: how long it took and how many events it wrote."""
    EVENT_LOG_FLUSH.observe(seconds)
    EVENT_LOG_BATCH.observe(batch_size)


def pool_checkout() -> None:
    DB_POOL_IN_USE.inc()


def pool_checkin() -> None:
    DB_POOL_IN_USE.dec()


@dataclass
class TokenClock:
    """Times one run's text deltas: the first one against the start, the rest against the one
    before (within a content block; a new block, such as after a tool round, starts afresh)."""

    provider: str
    started: float = field(default_factory=time.monotonic)
    last: float | None = None
    seen_first: bool = False

    def block_start(self) -> None:
        self.last = None

    def __post_init__(self) -> None:
        self._gaps = TOKEN_GAP.labels(self.provider)  # looked up once: ``delta`` runs per token

    def delta(self) -> None:
        now = time.monotonic()
        if not self.seen_first:
            self.seen_first = True
            first_token(self.provider, now - self.started)
        elif self.last is not None:
            self._gaps.observe(now - self.last)
        self.last = now


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when multiprocess mode is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def scrape() -> tuple[bytes, str]:
    """The current metrics in the Prometheus text format, and its content type."""
    path = multiprocess_dir()
    if path is None:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    _forget_dead_processes(path)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    return True


def _forget_dead_processes(path: str) -> None:
    """Drop the live gauges of processes that ended without ``process_exited`` (kill -9, OOM):
    a worker that died mid-run would otherwise count its runs as active for good."""
    for file in glob.glob(os.path.join(path, "gauge_live*_*.db")):
        pid = os.path.basename(file).removesuffix(".db").rpartition("_")[2]
        if pid.isdigit() and not _alive(int(pid)):
            multiprocess.mark_process_dead(int(pid), path)  # type: ignore[no-untyped-call]


def process_exited(pid: int | None = None) -> None:
    """Drop a finished process's live gauges (multiprocess mode; call at shutdown)."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
