"""Request heads are bounded in the server Parley ships: the Dockerfile's ``CMD``, run as it is
(on a loopback port), refuses a 1 MiB header without growing and cuts a head sent a byte a
second within ``HEAD_TIMEOUT_SECONDS``; the Makefile's ``run`` serves with the same bounds."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.server import HEAD_LIMIT_BYTES, HEAD_TIMEOUT_SECONDS
from tests.ops.test_container import REPO_ROOT, compose, final_stage
from tests.processes import SHIPPED_SERVER, free_port

BOUNDS = ("--http", "--loop")


def shipped_command() -> list[str]:
    """The image's ``CMD``."""
    [command] = [json.loads(args) for keyword, args in final_stage() if keyword == "CMD"]
    return list(command)


def make_run_options() -> dict[str, str]:
    """The options of the uvicorn line of the Makefile's ``run`` recipe."""
    text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert recipe, "the Makefile has no run target"
    words = re.sub(r"\\\n\s*", " ", recipe.group(1)).split()
    return dict(itertools.pairwise(words))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int]]:
    """The image's command on a free loopback port, SQLite; yields (host, port, pid)."""
    tmp = tmp_path_factory.mktemp("heads")
    port = free_port()
    command = shipped_command()
    options = dict(itertools.pairwise(command))
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(port)
    assert command[0] == "uvicorn" and options["--http"] == "app.server:BoundedHttpToolsProtocol"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARLEY_", "OPENAI_"))}
    env |= {"PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'p.db'}"}
    env |= {"PARLEY_MIGRATE_ON_START": "true", "PARLEY_LOG_FORMAT": "json"}
    with (tmp / "server.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", *command], cwd=REPO_ROOT, env=env, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp / "server.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield "127.0.0.1", port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def head(name: str, value: bytes) -> bytes:
    return b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + name.encode() + b": " + value


def answer(sock: socket.socket) -> bytes:
    """What the server sends before closing (b"" for a bare close or a reset)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return received


def test_the_makefile_and_compose_serve_with_the_images_bounds() -> None:
    shipped = dict(itertools.pairwise(shipped_command()))
    run = make_run_options()
    assert {flag: run.get(flag) for flag in BOUNDS} == {flag: shipped[flag] for flag in BOUNDS}
    assert shipped["--http"] == "app.server:BoundedHttpToolsProtocol"
    served = dict(zip(SHIPPED_SERVER[::2], SHIPPED_SERVER[1::2], strict=True))
    assert {flag: shipped[flag] for flag in BOUNDS} == served  # tests/processes.py
    assert HEAD_LIMIT_BYTES <= 64 * 1024
    assert "command" not in compose()["services"]["parley"]  # compose runs the image's CMD
    deploy = (REPO_ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert f"complete {HEAD_TIMEOUT_SECONDS:.0f} s after the connection opened" in deploy


def test_a_header_of_one_mib_is_refused_without_the_process_growing(
    server: tuple[str, int, int],
) -> None:
    host, port, pid = server
    before = rss_mb(pid)
    for _ in range(5):
        with socket.create_connection((host, port), timeout=10) as sock:
            # Closed while we were still sending: refused too.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(head("X-Big", b"a" * (1 << 20) + b"\r\n\r\n"))
            received = answer(sock)
        assert received == b"" or re.match(rb"HTTP/1\.1 4\d\d ", received), received[:100]
    assert rss_mb(pid) - before < 20
    # Heads under the bound are served, and the process still serves.
    with httpx.Client(base_url=f"http://{host}:{port}") as client:
        response = client.get("/healthz", headers={"X-Fat": "a" * 32_000})
        assert response.status_code == 200
        assert client.get("/healthz").status_code == 200


def test_a_head_sent_a_byte_a_second_is_cut_within_the_documented_time(
    server: tuple[str, int, int],
) -> None:
    host, port, _ = server
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=1) as sock:
        for byte in head("X-Slow", b"a" * 100):
            try:
                sock.send(bytes([byte]))
                received = sock.recv(200)
            except TimeoutError:
                assert time.monotonic() - started < HEAD_TIMEOUT_SECONDS + 3, "never cut"
                continue
            except (BrokenPipeError, ConnectionResetError):
                received = b""
            break
    took = time.monotonic() - started
    assert received == b"" or received.startswith(b"HTTP/1.1 408 "), received
    assert HEAD_TIMEOUT_SECONDS - 1 < took < HEAD_TIMEOUT_SECONDS + 3
