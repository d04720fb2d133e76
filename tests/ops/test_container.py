"""The container files, parsed (Docker does not run here): compose's config, the Dockerfile's
stages, user, health check, install from the lock, and the uvicorn command line."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import yaml

from app.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_DRAIN_SECONDS = 10  # the durable-runs drain that the graceful shutdown must outlast


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    start = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[start:]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    return loaded


def test_the_image_is_multi_stage_and_installs_from_the_lock() -> None:
    steps = instructions()
    assert sum(1 for keyword, _ in steps if keyword == "FROM") >= 2
    runs = [args for keyword, args in steps if keyword == "RUN"]
    installs = [args for args in runs if "pip install" in args]
    assert installs and all("--require-hashes" in a and "requirements.lock" in a for a in installs)
    copied = [args.split()[-2] for keyword, args in steps if keyword == "COPY"]
    for source in (s for s in copied if not s.startswith("/")):
        assert (REPO_ROOT / source).exists(), f"the Dockerfile copies {source}, which is missing"
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final_stage()


def test_the_image_runs_as_a_user_with_a_health_check() -> None:
    stage = final_stage()
    users = [args for keyword, args in stage if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    [health] = [args for keyword, args in stage if keyword == "HEALTHCHECK"]
    assert '"app.healthcheck"' in health
    assert (REPO_ROOT / "app" / "healthcheck.py").is_file()


def test_uvicorn_uses_asyncio_bounded_heads_proxy_headers_and_outlasts_the_drain() -> None:
    [command] = [json.loads(args) for keyword, args in final_stage() if keyword == "CMD"]
    assert command[:3] == ["uvicorn", "--factory", "app.main:create_app"]
    options = dict(itertools.pairwise(command))
    assert options["--loop"] == "asyncio"  # tests/ops/test_accept_burst.py
    # httptools with a bounded request head: tests/ops/test_request_heads.py
    assert options["--http"] == "app.server:BoundedHttpToolsProtocol"
    assert "--proxy-headers" in command
    assert int(options["--timeout-graceful-shutdown"]) > RUN_DRAIN_SECONDS
    assert (REPO_ROOT / options["--log-config"]).is_file()  # COPY app ./app: the same path
    env = " ".join(args for keyword, args in final_stage() if keyword == "ENV")
    assert "PARLEY_MIGRATE_ON_START=true" in env and "FORWARDED_ALLOW_IPS=" in env


def test_compose_reads_env_checks_health_and_waits_for_postgres() -> None:
    services = compose()["services"]
    parley = services["parley"]
    assert {"path": ".env", "required": False} in parley["env_file"]
    assert parley["healthcheck"]["test"] == ["CMD", "python", "-m", "app.healthcheck"]
    assert parley["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    grace = int(parley["stop_grace_period"].removesuffix("s"))
    [command] = [json.loads(args) for keyword, args in final_stage() if keyword == "CMD"]
    assert grace > int(command[command.index("--timeout-graceful-shutdown") + 1])
    url = parley["environment"]["PARLEY_DATABASE_URL"]
    default = url.partition(":-")[2].removesuffix("}")
    assert Settings(database_url=default).database_url.startswith("postgresql+asyncpg://")
    for name in parley["environment"]:
        assert name.removeprefix("PARLEY_").lower() in Settings.model_fields
