"""The stream-path benchmark (issue 10): Parley with its real adapters beside three relays.

Run by hand: ``make bench`` or ``.venv/bin/python -m bench.stream [--quick] [--scenario NAME]
[--provider openai|openai-chat|anthropic] [--db sqlite|postgres] [--clients N] [--json PATH]``.

Providers: ``openai`` is Parley's ``openai`` provider on the Responses API (its default),
``openai-chat`` the same provider on chat completions (``PARLEY_OPENAI_API=chat``: a Parley of
its own per database, shown under the same target name), ``anthropic`` the messages API.

Starts, each its own process: the fake upstream (bench/stream_upstream.py), the relays
(bench/stream_relays.py under uvicorn) and Parley under uvicorn (one worker, the event log on)
on SQLite and on PostgreSQL (PARLEY_BENCH_DATABASE_URL, or a database made for the bench on
127.0.0.1:5432), the real adapters pointed at the fake upstream through OPENAI_BASE_URL and
ANTHROPIC_BASE_URL with dummy keys. The load comes from ``--clients`` worker processes
(bench/stream_client.py). Each scenario runs every target once per round, targets taking
turns; the table gives medians of the rounds (3, or 1 with ``--quick``), checks that every
token arrived in order, and is printed as markdown and written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.relay import free_port, wait_up
from bench.stream_client import Call, Record, run_streams
from bench.targets import targets_table

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_BENCH_DB = "parley_bench_stream"

# name: (streams, tokens, pace in ms, one after another)
SCENARIOS: dict[str, tuple[int, int, int, bool]] = {
    "burst_1x20000": (1, 20_000, 0, False),
    "burst_100x200": (100, 200, 0, False),
    "paced_100x150": (100, 150, 20, False),
    "paced_200x100": (200, 100, 20, False),
    "first_token": (20, 5, 0, True),
    "starts_100": (100, 2, 0, False),  # 100 starts at once: the first token's p99
}
DEFAULT_SCENARIOS = list(SCENARIOS)
RELAYS = ("relay-typed", "relay-parse", "relay-pipe")
PROVIDERS = ("openai", "openai-chat", "anthropic")
UPSTREAM_PATHS = {
    "openai": "/v1/responses",
    "openai-chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
}
CHAT = "-chat"
"""The suffix of a Parley on chat completions (``PARLEY_OPENAI_API=chat``)."""
PROFILING = bool(os.environ.get("PARLEY_BENCH_PROFILE"))
"""PARLEY_BENCH_PROFILE=DIR runs each Parley under py-spy, writing DIR/parley-<db>.txt."""


SHIPPED_SERVER = ("--loop", "asyncio", "--http", "app.server:BoundedHttpToolsProtocol")
"""The server options Parley ships with (docs/deploy.md: "Request heads", "The event loop")."""


def serve_uvicorn(
    target: str,
    port: int,
    env: dict[str, str],
    factory: bool,
    profile: str | None = None,
    loop: str = "auto",
) -> subprocess.Popen[bytes]:
    """uvicorn, one worker; under ``py-spy record`` (collapsed stacks to ``profile``) if set.
    ``loop`` is for the relays (Parley is served on the loop it ships with)."""
    # --gil: only samples holding the GIL (the CPU); --nonblocking: the worker is not paused.
    spy = [str(Path(PY).parent / "py-spy"), "record", "--nonblocking", "--gil", "-r", "200"]
    spy += ["-f", "raw", "-o", str(profile)]
    args = [*([*spy, "--"] if profile else []), PY, "-m", "uvicorn", target]
    args += ["--host", "127.0.0.1", "--port", str(port)]
    args += ["--log-level", "warning", "--no-access-log", "--backlog", "4096"]
    if factory:  # Parley, served as it ships (the Makefile's `run`, the Dockerfile's CMD)
        args += ["--factory", *SHIPPED_SERVER]
    else:
        args += ["--loop", loop]
    return subprocess.Popen(args, cwd=ROOT, env={**os.environ, **env})


def postgres_url() -> str | None:
    """The bench's PostgreSQL database, made afresh; None when no server answers."""
    given = os.environ.get("PARLEY_BENCH_DATABASE_URL", "")
    if given.startswith("postgresql"):
        return given

    async def create() -> None:
        import asyncpg

        conn = await asyncpg.connect(PG_ADMIN, timeout=3)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
            await conn.execute(f"CREATE DATABASE {PG_BENCH_DB}")
        finally:
            await conn.close()

    try:
        asyncio.run(create())
    except (TimeoutError, OSError) as exc:
        print(f"PostgreSQL not reachable ({exc}): SQLite only", file=sys.stderr)
        return None
    return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{PG_BENCH_DB}"


def parley_env(database_url: str, upstream: int, openai_api: str = "responses") -> dict[str, str]:
    return {
        "PARLEY_OPENAI_API": openai_api,
        "PARLEY_DATABASE_URL": database_url,
        "PARLEY_SSE_PING_SECONDS": "0",
        "PARLEY_LOG_LEVEL": "WARNING",
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{upstream}/v1",
        "ANTHROPIC_API_KEY": "sk-ant-bench",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{upstream}",
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used (user and system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def peak_rss(pid: int | None) -> Iterator[list[float]]:
    """Samples the resident memory of ``pid`` every 50 ms: the list holds the peak at exit,
    then the CPU seconds ``pid`` used meanwhile."""
    peak = [0.0]
    cpu_before = cpu_seconds(pid) if pid is not None else 0.0
    stop = threading.Event()

    def sample() -> None:
        while pid is not None and not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            stop.wait(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()
        peak.append(cpu_seconds(pid) - cpu_before if pid is not None else 0.0)


class Bench:
    """The servers, the client pool, and the calls each target needs for a scenario."""

    def __init__(self, ports: dict[str, int], pids: dict[str, int], clients: int) -> None:
        self.ports = ports
        self.pids = pids
        self.clients = clients
        self.pool = multiprocessing.get_context("spawn").Pool(clients)

    @staticmethod
    def server(target: str, provider: str) -> str:
        """The process that serves ``target`` for ``provider``: the chat-completions Parley for
        ``openai-chat``."""
        return target + CHAT if target.startswith("parley") and provider.endswith(CHAT) else target

    def calls(self, target: str, provider: str, model: str, count: int) -> list[Call]:
        if target == "upstream":
            body = json.dumps({"model": model, "stream": True}).encode()
            return [Call(self.ports["upstream"], UPSTREAM_PATHS[provider], body)] * count
        if target in RELAYS:
            body = json.dumps({"model": model}).encode()
            return [Call(self.ports[target], f"/{target[6:]}/{provider}", body)] * count
        bundle = {
            "messages": [{"role": "user", "text": "go"}],
            "config": {"provider": provider.removesuffix(CHAT), "model": model},
        }
        body = json.dumps(bundle).encode()
        port = self.ports[self.server(target, provider)]
        ids = asyncio.run(self._conversations(port, count))
        return [Call(port, f"/conversations/{i}/stream", body) for i in ids]

    @staticmethod
    async def _conversations(port: int, count: int) -> list[str]:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            semaphore = asyncio.Semaphore(16)

            async def one() -> str:
                async with semaphore:
                    response = await http.post("/conversations", json={})
                    response.raise_for_status()
                    return str(response.json()["id"])

            return list(await asyncio.gather(*(one() for _ in range(count))))

    def run(self, target: str, provider: str, scenario: str) -> dict[str, Any]:
        streams, tokens, pace, sequential = SCENARIOS[scenario]
        calls = self.calls(target, provider, f"bench-{tokens}-{pace}", streams)
        shares = (
            [calls[i :: self.clients] for i in range(self.clients)] if not sequential else [calls]
        )
        go_at = time.monotonic() + 0.5
        with peak_rss(self.pids.get(self.server(target, provider))) as peak:
            parts = self.pool.map(
                run_streams, [(share, go_at, sequential) for share in shares if share]
            )
        records = [r for part in parts for r in part]
        return summarize(records, tokens, go_at, peak[0], peak[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(
    records: list[Record], tokens: int, go_at: float, rss: float, cpu: float
) -> dict[str, Any]:
    delivered = sum(r.tokens for r in records)
    seconds = max(r.ended for r in records) - go_at
    firsts = [r.first for r in records if r.first is not None]
    gaps = [g for r in records for g in r.gaps]
    errors = [r.error for r in records if r.error]
    ok = not errors and all(r.tokens == tokens and r.in_order for r in records)
    return {
        "tok_s": delivered / seconds if seconds > 0 else 0.0,
        "first_p50_ms": pct(firsts, 0.5) * 1000,
        "first_p99_ms": pct(firsts, 0.99) * 1000,
        "gap_p99_ms": pct(gaps, 0.99) * 1000,
        "rss_mb": rss,
        "cpu_s": cpu,
        "ok": ok,
        "errors": errors[:3],
    }


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("tok_s", "first_p50_ms", "first_p99_ms", "gap_p99_ms", "rss_mb", "cpu_s")
    out: dict[str, Any] = {k: statistics.median(r[k] for r in rounds) for k in keys}
    out["ok"] = all(r["ok"] for r in rounds)
    out["errors"] = [e for r in rounds for e in r["errors"]][:3]
    return out


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | provider | target | tok/s | first p50 ms | first p99 ms | gap p99 ms "
        "| RSS MB | CPU s | all in order |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        m = r["median"]
        lines.append(
            f"| {r['scenario']} | {r['provider']} | {r['target']} | {m['tok_s']:,.0f} | "
            f"{m['first_p50_ms']:.1f} | {m['first_p99_ms']:.1f} | {m['gap_p99_ms']:.1f} | "
            f"{m['rss_mb']:.0f} | {m['cpu_s']:.2f} | "
            f"{'yes' if m['ok'] else 'NO ' + '; '.join(m['errors'])} |"
        )
    return "\n".join(lines)


def migrate(database_url: str) -> None:
    env = {**os.environ, "PARLEY_DATABASE_URL": database_url}
    subprocess.run(
        [PY, "-m", "alembic", "upgrade", "head"], cwd=ROOT, env=env, check=True, capture_output=True
    )


def start_servers(
    dbs: list[str], tmp: str, chat: bool = True, relays_loop: str = "auto"
) -> tuple[dict[str, int], dict[str, int], list[subprocess.Popen[bytes]]]:
    """The upstream, the relays (on ``relays_loop``) and one Parley per database (two with
    ``chat``: one more on chat completions): their ports, pids and processes."""
    ports = {"upstream": free_port(), "relays": free_port()}
    procs = [
        subprocess.Popen([PY, "-m", "bench.stream_upstream", str(ports["upstream"])], cwd=ROOT)
    ]
    relay_env = parley_env("", ports["upstream"])
    procs.append(
        serve_uvicorn(
            "bench.stream_relays:app", ports["relays"], relay_env, False, loop=relays_loop
        )
    )
    pids = {name: procs[1].pid for name in RELAYS}
    for name in RELAYS:
        ports[name] = ports["relays"]
    urls = {"sqlite": f"sqlite+aiosqlite:///{tmp}/bench.db", "postgres": postgres_url()}
    apis = [("", "responses"), *([(CHAT, "chat")] if chat else [])]
    for db in dbs:
        url = urls[db]
        if url is None:
            continue
        migrate(url)
        for suffix, api in apis:
            # the chat Parley on SQLite gets a file of its own: two processes would take turns
            # at one file's lock
            db_url = url.replace("bench.db", "bench-chat.db") if suffix else url
            if db_url != url:
                migrate(db_url)
            name = f"parley-{db}{suffix}"
            ports[name] = free_port()
            profile = f"{os.environ['PARLEY_BENCH_PROFILE']}/{name}.txt" if PROFILING else None
            env = parley_env(db_url, ports["upstream"], api)
            procs.append(serve_uvicorn("app.main:create_app", ports[name], env, True, profile))
            pids[name] = procs[-1].pid
    for name, port in ports.items():
        path = "/healthz" if name.startswith("parley") else "/"
        if name != "upstream":
            asyncio.run(wait_up(f"http://127.0.0.1:{port}{path}"))
        if PROFILING and name.startswith("parley"):  # py-spy's child is Parley
            pids[name] = children(pids[name])[0]
    return ports, pids, procs


def line(m: dict[str, Any]) -> str:
    return (
        f"{m['tok_s']:9,.0f} tok/s  first p50 {m['first_p50_ms']:7.1f} ms "
        f"p99 {m['first_p99_ms']:7.1f} ms  gap p99 {m['gap_p99_ms']:6.1f} ms  "
        f"rss {m['rss_mb']:4.0f} MB  cpu {m['cpu_s']:5.2f} s  ok={m['ok']}"
    )


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop every server; under py-spy, stop Parley itself, and py-spy writes its profile."""
    for proc in procs:
        spied = str(proc.args[0]).endswith("py-spy")
        for pid in children(proc.pid) if spied else [proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    for proc in procs:
        proc.wait(30)


def run_all(bench: Bench, args: argparse.Namespace, targets: list[str]) -> list[dict[str, Any]]:
    results = []
    for scenario in args.scenario:
        for provider in args.provider:
            names = ["upstream", *targets] if scenario == "first_token" else targets
            for name in names:  # warm up: connections, caches, the SDK clients
                bench.run(name, provider, "first_token")
            rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
            for _ in range(args.rounds):
                for name in names:
                    rounds[name].append(bench.run(name, provider, scenario))
            for name in names:
                median = medians(rounds[name])
                results.append(
                    {
                        "scenario": scenario,
                        "provider": provider,
                        "target": name,
                        "median": median,
                        "rounds": rounds[name],
                    }
                )
                print(f"{scenario:15} {provider:9} {name:16} {line(median)}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round instead of 3")
    parser.add_argument(
        "--scenario", action="append", choices=list(SCENARIOS), help="repeatable; default all"
    )
    parser.add_argument(
        "--provider",
        action="append",
        choices=list(PROVIDERS),
        help="repeatable; default all three",
    )
    parser.add_argument(
        "--db", action="append", choices=["sqlite", "postgres"], help="repeatable; default both"
    )
    parser.add_argument(
        "--relays",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the three relays too",
    )
    parser.add_argument(
        "--relays-loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="the relays' event loop (auto: uvicorn's default, uvloop when installed)",
    )
    parser.add_argument("--clients", type=int, default=2, help="load-generating processes")
    parser.add_argument(
        "--json", default="bench/stream-results.json", help="where to write the results"
    )
    args = parser.parse_args()
    args.scenario = args.scenario or DEFAULT_SCENARIOS
    args.provider = args.provider or list(PROVIDERS)
    args.rounds = 1 if args.quick else 3
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        chat = "openai-chat" in args.provider
        dbs = args.db or ["sqlite", "postgres"]
        ports, pids, procs = start_servers(dbs, tmp, chat, args.relays_loop)
        targets = [n for n in ports if n.startswith("parley") and not n.endswith(CHAT)] + (
            list(RELAYS) if args.relays else []
        )
        bench = Bench(ports, pids, args.clients)
        try:
            results = run_all(bench, args, targets)
        finally:
            bench.pool.terminate()
            stop_servers(procs)
    report = {
        "machine": machine(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rounds": args.rounds,
        "clients": args.clients,
        "results": results,
    }
    Path(args.json).write_text(json.dumps(report, indent=2))
    after = report["load_after"][0]
    print(f"\nmachine: {report['machine']}; load average before {load_before[0]:.2f}, ", end="")
    print(f"after {after:.2f}; medians of {args.rounds} rounds\n")
    print(table(results))
    print(f"\nIssue 31's targets, SQLite (PostgreSQL):\n\n{targets_table(results)}")


if __name__ == "__main__":
    main()
