"""The frontend tests' fixtures: Node with the `ai` package installed from js/'s lock file
(``npm ci --prefix js``, as .ci/run does), or a clear skip — a failure under ``CI=true``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.api.conftest import client, live_server, settings  # the app, in-process and real
from tests.processes import REPO_ROOT

__all__ = ["NodeRunner", "client", "live_server", "node", "settings"]

JS = REPO_ROOT / "js"
API_KEY = "test-key"  # the Node transports send it (`headers`), as a frontend would
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _unavailable() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (apt-get install -y nodejs)"
    if not (JS / "node_modules" / "ai" / "package.json").is_file():
        return "js/node_modules is missing: npm ci --prefix js"
    return None


@dataclass(frozen=True)
class NodeRunner:
    """Runs a scenario of js/tests/scenarios.mjs against a server; its JSON summary."""

    url: str

    async def __call__(self, scenario: str, conversation_id: str) -> Any:
        env = {**os.environ, "PARLEY_URL": self.url}
        done = await asyncio.to_thread(
            subprocess.run,
            ["node", "tests/scenarios.mjs", scenario, conversation_id],
            cwd=JS,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{scenario}: {done.stderr}\n{done.stdout}"
        return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def node() -> type[NodeRunner]:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return NodeRunner


async def create(http: httpx.AsyncClient, **body: Any) -> str:
    response = await http.post("/conversations", json=body, headers=AUTH)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
