"""Parley as separate uvicorn processes on one database, for tests of what crosses processes:
cancel and resume on another process, kill -9, SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.forked import REPO_ROOT, Forked

__all__ = ["REPO_ROOT", "SHIPPED_SERVER", "FreezableProxy", "ServerProcess", "free_port"]
SHIPPED_SERVER = ("--loop", "asyncio", "--http", "app.server:BoundedHttpToolsProtocol")
"""The server options of the Makefile's ``run`` and the image's ``CMD`` (held equal to them by
tests/ops/test_request_heads.py): the processes here are served as Parley ships."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``uvicorn --factory app.main:create_app`` in a process of its own."""

    def __init__(self, database_url: str, log_path: Path, **settings: Any) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PARLEY_", "OPENAI_", "ANTHROPIC_"))
        }
        env["PARLEY_DATABASE_URL"] = database_url
        env["PARLEY_SSE_PING_SECONDS"] = "0"
        for key, value in settings.items():
            env[f"PARLEY_{key.upper()}"] = str(value)
        self.env = env
        self.log_path = log_path
        log_path.touch()  # the server appends to it (tests/forkserver.py)
        self._spawn()

    def _spawn(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log_start = self.log_path.stat().st_size
        argv = ["--factory", "app.main:create_app", "--host", "127.0.0.1", "--port", str(self.port)]
        argv += [*SHIPPED_SERVER, "--timeout-graceful-shutdown", "15", "--log-level", "warning"]
        # Forked from this worker's fork server, which imported uvicorn and the app once
        # (tests/forkserver.py): `python -m uvicorn` with these arguments, a second less of CPU.
        self.argv = argv
        self.process = Forked(argv, self.env, self.log_path)

    def wait_ready(self, within: float = 60.0) -> ServerProcess:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                # The port was free when picked, but taken before uvicorn bound it: another one.
                if "address already in use" in self.log_path.read_bytes()[self._log_start :].decode(
                    errors="replace"
                ):
                    self._spawn()
                    continue
                raise RuntimeError(f"uvicorn exited: {self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"uvicorn did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """kill -9: no cleanup at all."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process stops where it is (a frozen container, a long pause)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: it goes on from where it stopped."""
        self.process.send_signal(signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM, as a rolling deploy does."""
        self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.send_signal(signal.SIGCONT)  # a paused one (a test failed) stops too
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class FreezableProxy:
    """A TCP proxy in front of PostgreSQL that can stop passing bytes without closing anything:
    a database that stops answering (a network partition, a stalled server)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.frozen = threading.Event()
        self._closed = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = []
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                while self.frozen.is_set() and not self._closed.is_set():
                    time.sleep(0.05)  # hold the bytes: no answer, no error
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Ends every connection both ways. ``shutdown`` before ``close``: closing a socket
        that another thread is reading does not end the connection on Linux, and a server
        connection left open there keeps its transaction, and its locks, for good."""
        self._closed.set()
        self.frozen.clear()
        for sock in [self._server, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
