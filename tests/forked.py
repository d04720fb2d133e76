"""The test side of tests/forkserver.py: one fork server per pytest worker (started on first
use), and ``Forked``, a child of it with what the tests use of ``subprocess.Popen``: ``pid``,
``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``.

The child is the fork server's, not this process's: its status arrives on the server's output,
read here by a thread of its own. A signal is sent only while the child has not been reported
ended (its pid could then be another process's), as ``Popen`` does.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

REPO_ROOT = Path(__file__).resolve().parent.parent


class _Server:
    """The fork server and what it has told: the pids of the requests, the codes of the ended."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.changed = threading.Condition()
        self.pids: dict[int, int] = {}
        self.codes: dict[int, int] = {}
        self.ids = itertools.count()
        threading.Thread(target=self._read, daemon=True, name="forkserver-reader").start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            told = json.loads(line)
            with self.changed:
                if "id" in told:
                    self.pids[told["id"]] = told["pid"]
                else:
                    self.codes[told["pid"]] = told["code"]
                self.changed.notify_all()

    def fork(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        request_id = next(self.ids)
        request = {"id": request_id, "argv": argv, "env": env, "cwd": str(REPO_ROOT)}
        request["log"] = str(log)
        assert self.process.stdin is not None
        with self.changed:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            if not self.changed.wait_for(lambda: request_id in self.pids, timeout=30):
                raise RuntimeError("the fork server did not answer")
            return self.pids.pop(request_id)


class Forked:
    """A uvicorn process forked by this worker's fork server."""

    _server: ClassVar[_Server | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        with Forked._lock:
            if Forked._server is None or Forked._server.process.poll() is not None:
                Forked._server = _Server(env)
            self._server = Forked._server
        self.pid = self._server.fork(argv, env, log)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with self._server.changed:
            self.returncode = self._server.codes.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._server.changed:
            if not self._server.changed.wait_for(lambda: self.pid in self._server.codes, timeout):
                raise subprocess.TimeoutExpired(f"uvicorn ({self.pid})", timeout or 0)
            self.returncode = self._server.codes[self.pid]
        return self.returncode

    def send_signal(self, signum: int) -> None:
        with self._server.changed:  # not once it is reported ended: its pid may be reused
            if self.pid not in self._server.codes:
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
