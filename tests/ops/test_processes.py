"""Parley as an operator starts it: real uvicorn and alembic processes, their exit status, their
stderr. A bad setting exits 2 with one line; JSON logs carry the request id of each request."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import load_settings
from tests.processes import SHIPPED_SERVER

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOG_CONFIG = "app/observability/uvicorn-logging.json"


def clean_env(**settings: str) -> dict[str, str]:
    """This environment without any PARLEY_ or provider setting, plus ``settings``."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PARLEY_", "OPENAI_", "ANTHROPIC_", "PROMETHEUS_"))
    }
    return {**keep, **settings}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uvicorn(port: int) -> list[str]:
    return [
        str(BIN / "uvicorn"),
        "--factory",
        "app.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *SHIPPED_SERVER,
    ]


@pytest.mark.parametrize(
    ("program", "setting", "value"),
    [
        ("uvicorn", "PARLEY_PAGE_SIZE", "0"),
        ("uvicorn", "PARLEY_DATABASE_URL", "mysql://root:hunter2@db/parley"),
        ("alembic", "PARLEY_DATABASE_URL", "mysql://root:hunter2@db/parley"),
        ("alembic", "PARLEY_DEFAULT_PROVIDER", "anthropic"),
    ],
)
def test_a_bad_setting_exits_2_with_one_line(program: str, setting: str, value: str) -> None:
    command = (
        uvicorn(free_port())
        if program == "uvicorn"
        else [str(BIN / "alembic"), "-c", str(REPO_ROOT / "alembic.ini"), "upgrade", "head"]
    )
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=clean_env(**{setting: value}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("parley: configuration error: ") and setting in lines[0]
    assert "hunter2" not in done.stderr and done.stdout == ""


@pytest.fixture
def json_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """uvicorn with JSON logs on a new SQLite database that it migrates on start."""
    port = free_port()
    env = clean_env(
        PARLEY_LOG_FORMAT="json",
        PARLEY_MIGRATE_ON_START="true",
        PARLEY_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/parley.db",
    )
    server = subprocess.Popen(
        uvicorn(port), cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield url, server
    finally:
        server.terminate()
        server.wait(15)


def test_the_json_log_line_of_a_request_carries_its_id(
    json_server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, server = json_server
    response = httpx.get(f"{url}/conversations/c-404", headers={"X-Request-ID": "req-json-1"})
    assert response.status_code == 404 and response.headers["x-request-id"] == "req-json-1"
    server.terminate()
    _, stderr = server.communicate(timeout=15)
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one object
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    mine = [line for line in lines if line.get("request_id") == "req-json-1"]
    assert len(mine) == 1
    assert mine[0]["logger"] == "uvicorn.access" and "/conversations/c-404" in mine[0]["message"]
    assert mine[0]["conversation_id"] == "c-404" and mine[0]["level"] == "INFO"
    assert any("Running upgrade" in line["message"] for line in lines)  # migrated on start


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"PARLEY_LOG_FORMAT": "xml"}, "PARLEY_LOG_FORMAT: Input should be 'text' or 'json'"),
        ({"OPENAI_BASE_URL": "ftp://x"}, "PARLEY_OPENAI_BASE_URL or OPENAI_BASE_URL: must be"),
        ({"PARLEY_MIGRATE_ON_START": "maybe"}, "PARLEY_MIGRATE_ON_START: Input should be"),
        ({"PARLEY_PAGE_SIZE": "x", "PARLEY_API_KEYS": "k"}, "PARLEY_PAGE_SIZE: Input should be"),
        # pydantic takes `inf` for a float; infinite (or date-overflowing) durations made every
        # stream, idempotent create or provider call of the server fail with a 500 instead.
        ({"PARLEY_RUN_LEASE_SECONDS": "inf"}, "PARLEY_RUN_LEASE_SECONDS: Input should be a finite"),
        ({"PARLEY_RUN_LEASE_SECONDS": "1e20"}, "PARLEY_RUN_LEASE_SECONDS: Input should be less"),
        ({"PARLEY_IDEMPOTENCY_TTL_SECONDS": "1e15"}, "PARLEY_IDEMPOTENCY_TTL_SECONDS: Input"),
        ({"PARLEY_RUN_EVENT_RETENTION_SECONDS": "1e20"}, "PARLEY_RUN_EVENT_RETENTION_SECONDS: "),
        ({"PARLEY_PROVIDER_READ_TIMEOUT_SECONDS": "inf"}, "PARLEY_PROVIDER_READ_TIMEOUT_SECONDS: "),
        ({"PARLEY_OFFLINE_DELAY_MS": "Infinity"}, "PARLEY_OFFLINE_DELAY_MS: Input should be a"),
        # accepted before, and then every origin got 403: `*` does not mean "any" here
        ({"PARLEY_CORS_ORIGINS": "*"}, "PARLEY_CORS_ORIGINS: '*' is not supported"),
        # only separators: any token (or none) would have been accepted
        ({"PARLEY_API_KEYS": " , ,"}, "PARLEY_API_KEYS: lists no key"),
        ({"PARLEY_CORS_ORIGINS": "https://a.example, app.example.com"}, "'app.example.com' is"),
    ],
)
def test_each_bad_value_is_named_on_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variables: dict[str, str],
    named: str,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        load_settings()
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("parley: configuration error: ") and named in line


def test_with_workers_the_parent_process_logs_json_too(tmp_path: Path) -> None:
    """Under ``--workers N`` uvicorn's parent process never builds the app, so its lines (start,
    signals, workers stopped or died) came out as uvicorn's text; the log config that Parley
    ships puts them in PARLEY_LOG_FORMAT as well."""
    (tmp_path / "metrics").mkdir()
    env = clean_env(
        PARLEY_LOG_FORMAT="json",
        PARLEY_MIGRATE_ON_START="true",
        PARLEY_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/parley.db",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    port = free_port()
    command = [*uvicorn(port), "--workers", "2", "--log-config", LOG_CONFIG]
    server = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one object
    messages = [line["message"] for line in lines]
    assert any(m.startswith("Started parent process") for m in messages)
    assert any(m.startswith("Stopping parent process") for m in messages)
    assert sum(m.startswith("Application startup complete") for m in messages) == 2
