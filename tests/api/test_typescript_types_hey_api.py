"""The other TypeScript generator, @hey-api/openapi-ts (pinned in js/package-lock.json), types
openapi/openapi.json as well: `tsc --strict` accepts a good delta bundle and the parsed stream
events narrowed by name, and refuses a bundle with `role: "robot"` and an event body read under
the wrong name (tests/api/test_typescript_types.py does the same for openapi-typescript)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.api.npm import JS, npm_bin
from tests.api.test_typescript_types import CHECKS, DOCUMENT, tsc_each

GOOD = '\nimport type { DeltaBundle, StreamEvent } from "./types.gen";\n' + CHECKS

BAD = {
    "robot": """
import type { DeltaBundle } from "./types.gen";
export const bundle: DeltaBundle = { messages: [{ role: "robot", text: "beep" }] };
""",
    "wrong_event": """
import type { StreamEvent } from "./types.gen";
export function show(event: StreamEvent): string {
  return event.event === "run_started" ? event.data.delta : "";
}
""",
}


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    generator = npm_bin("openapi-ts")
    root = tmp_path_factory.mktemp("hey")
    command = [generator, "-i", DOCUMENT, "-o", root, "--no-log-file", "--silent"]
    subprocess.run(command, check=True, capture_output=True, cwd=JS, timeout=180)
    return root


@pytest.fixture(scope="module")
def checked(typed: Path) -> dict[str, str]:
    return tsc_each(typed, {"good": GOOD, **BAD})


def test_hey_api_types_take_a_good_bundle_and_every_event_by_name(
    typed: Path, checked: dict[str, str]
) -> None:
    types = (typed / "types.gen.ts").read_text(encoding="utf-8")
    assert "export type StreamEvent =" in types
    assert checked["good"] == checked[""] == "", checked


@pytest.mark.parametrize("case", sorted(BAD))
def test_hey_api_types_refuse_a_bad_bundle_and_a_wrong_event_body(
    checked: dict[str, str], case: str
) -> None:
    assert "error TS" in checked[case], checked
