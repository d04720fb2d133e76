"""Where a worker's CPU went: a py-spy raw profile (collapsed stacks) split into parts.

Run by hand: ``python -m bench.profile_split PROFILE.txt`` on what ``PARLEY_BENCH_PROFILE=DIR
python -m bench.stream …`` wrote. Each sample is put in the part of its innermost frame that
one of the patterns below names, glue (the event loop, anyio, JSON) charged to its caller
(so ``json.dumps`` called by sse-starlette is SSE encoding);
start-up (imports, create_app) and idle waits (IDLE_LEAVES) are left out.
"""

from __future__ import annotations

import sys
from collections import Counter

PARTS: list[tuple[str, tuple[str, ...]]] = [
    (
        "provider parsing",
        (
            "app/providers/sse.py",
            "app/providers/openai_chat.py",
            "app/providers/anthropic_messages.py",
            "jiter",
        ),
    ),
    (
        "provider HTTP client (httpx2, SDK)",
        ("httpx2/", "httpcore2/", "h11/", "openai/", "anthropic/", "app/providers/"),
    ),
    (
        "runs + storage",
        ("app/runs/", "app/storage/", "sqlalchemy/", "aiosqlite/", "asyncpg/", "sqlite3/"),
    ),
    ("SSE encoding", ("sse_starlette/", "app/api/routes/streams.py", "app/api/sse.py")),
    ("domain", ("app/domain/",)),
    (
        "HTTP server (uvicorn, starlette, fastapi)",
        ("uvicorn/", "starlette/", "fastapi/", "httptools/", "app/api/", "app/observability/"),
    ),
]
GLUE = ("asyncio/", "anyio/", "sniffio/", "contextlib.py", "typing.py", "json/", "uvloop/")
"""Frames charged to their caller: the event loop, anyio's cancel scopes, JSON, typing."""
STARTUP = ("create_app (app/main.py", "_find_and_load", "Config.load (uvicorn")
IDLE_LEAVES = (
    "Runner.run (asyncio/runners.py",  # uvloop waiting for I/O (its C frames are not seen)
    "Condition.wait (threading.py",  # idle worker threads
    "_connection_worker_thread (aiosqlite/core.py:59)",  # aiosqlite's thread waiting for work
    "_worker (concurrent/futures/thread.py",
)


def part(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        if any(g in frame for g in GLUE):
            continue
        for name, patterns in PARTS:
            if any(p in frame for p in patterns):
                return name
    return "event loop, other"


def split(path: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    with open(path) as lines:
        for line in lines:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            leaf = stack.rsplit(";", 1)[-1]
            if not any(s in stack for s in STARTUP) and not leaf.startswith(IDLE_LEAVES):
                counts[part(stack)] += int(n)
    return counts


def main() -> None:
    counts = split(sys.argv[1])
    total = sum(counts.values())
    print("| part | share of the worker's CPU samples |\n| --- | ---: |")
    for name, n in counts.most_common():
        print(f"| {name} | {n / total:.0%} |")
    print(f"\n{total} samples")


if __name__ == "__main__":
    main()
