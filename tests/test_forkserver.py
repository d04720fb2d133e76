"""The uvicorn processes the tests fork (tests/forkserver.py) are as one started as a command:
the same signals ignored, caught and blocked (a SIGPIPE that killed a server instead of failing
a write to a gone client would make every disconnect test a different test)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import copy_sqlite
from tests.processes import REPO_ROOT, ServerProcess, free_port


def _signals(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in lines) if k.startswith("Sig")}


def _ready(url: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise AssertionError(f"{url} did not start")


def test_a_forked_server_has_the_signals_of_one_started_as_a_command(
    sqlite_template: Path, tmp_path: Path
) -> None:
    forked = ServerProcess(copy_sqlite(sqlite_template, tmp_path), tmp_path / "forked.log")
    port = free_port()
    argv = [*forked.argv]
    argv[argv.index("--port") + 1] = str(port)
    command = [sys.executable, "-m", "uvicorn", *argv]
    started = subprocess.Popen(command, cwd=REPO_ROOT, env=forked.env, stderr=subprocess.DEVNULL)
    try:
        forked.wait_ready()
        _ready(f"http://127.0.0.1:{port}")
        theirs, ours = _signals(started.pid), _signals(forked.process.pid)
        assert ours["SigIgn"] == theirs["SigIgn"]
        assert int(ours["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1))
        assert ours["SigCgt"] == theirs["SigCgt"]
        assert ours["SigBlk"] == theirs["SigBlk"]
    finally:
        started.terminate()
        started.wait(20)
        forked.stop()
