"""The npm tools the tests drive, from ``js/node_modules`` (``npm ci --prefix js``, which .ci/run
does; js/package-lock.json pins them). Without node, or without the install, a test skips — and
fails in CI (``CI=true``), where .ci/run installs both."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "js"


def npm_bin(name: str) -> Path:
    """``js/node_modules/.bin/<name>``; skips the test (fails it in CI) when it cannot run."""
    tool = JS / "node_modules" / ".bin" / name
    reason = None
    if shutil.which("node") is None:
        reason = "node is not installed"
    elif not tool.exists():
        reason = f"{tool} is missing: run `npm ci --prefix js`"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true requires it", pytrace=False)
        pytest.skip(reason)
    return tool
