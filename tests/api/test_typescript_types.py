"""openapi-typescript (pinned in js/package-lock.json) types openapi/openapi.json: `tsc --strict`
accepts a good delta bundle and the parsed stream events narrowed by name, and refuses a bundle
with `role: "robot"` and an event body read under the wrong name. openapi-typescript 7 typed
every delta message `unknown` while `ToolMessageIn` had an `anyOf` of `required` alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.api.npm import JS, npm_bin

DOCUMENT = JS.parent / "openapi" / "openapi.json"

CHECKS = """
export const bundle: DeltaBundle = {
  messages: [
    { role: "system", text: "Be brief." },
    { role: "user", text: "Why is the sky blue?" },
    { role: "tool", tool_call_id: "call_1", result: { temp_c: 21 } },
    { role: "tool", tool_call_id: "call_2", error: "no such city" },
  ],
  config: { provider: "offline" },
};

export function show(event: StreamEvent): string {
  switch (event.event) {
    case "content_block_delta":
      return event.data.delta;
    case "error":
      return event.data.code;
    case "done":
      return event.data.status;
    default:
      return event.id ?? "";
  }
}
"""
"""A good bundle and the events narrowed by name, over the generated `DeltaBundle` and
`StreamEvent` (each generator's test imports them its way)."""

GOOD = (
    """
import type { components } from "./api";
type DeltaBundle = components["schemas"]["DeltaBundle"];
type StreamEvent = components["schemas"]["StreamEvent"];
"""
    + CHECKS
)

BAD = {
    "robot": """
import type { components } from "./api";
export const bundle: components["schemas"]["DeltaBundle"] = {
  messages: [{ role: "robot", text: "beep" }],
};
""",
    "wrong_event": """
import type { components } from "./api";
export function show(event: components["schemas"]["StreamEvent"]): string {
  return event.event === "run_started" ? event.data.delta : "";
}
""",
}


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    generator = npm_bin("openapi-typescript")
    root = tmp_path_factory.mktemp("ts")
    subprocess.run(
        [generator, DOCUMENT, "--output", root / "api.d.ts"],
        check=True,
        capture_output=True,
        cwd=JS,
        timeout=180,
    )
    return root


def tsc_each(root: Path, sources: dict[str, str]) -> dict[str, str]:
    """``tsc --strict`` over the ``sources`` (name → TypeScript) at once, in ``root``: the
    diagnostics of each file, by name, and those of no file of them under ``""``. One run for
    all (tsc takes seconds of CPU to start and to read the generated types); each file is a
    module of its own, so none sees another's declarations."""
    for name, source in sources.items():
        (root / f"{name}.ts").write_text(source, encoding="utf-8")
    command = [
        npm_bin("tsc"),
        "--strict",
        "--noEmit",
        "--target",
        "es2022",
        "--module",
        "esnext",
        "--moduleResolution",
        "bundler",
        *(root / f"{name}.ts" for name in sources),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=root, timeout=180)
    diagnostics = dict.fromkeys(["", *sources], "")
    file = ""
    for line in (done.stdout + done.stderr).splitlines():
        if not line.startswith(" "):  # a diagnostic's first line names its file, if any
            file = next((name for name in sources if line.startswith(f"{name}.ts(")), "")
        diagnostics[file] += line + "\n"
    assert (done.returncode == 0) == (not any(diagnostics.values())), done.stdout + done.stderr
    return diagnostics


@pytest.fixture(scope="module")
def checked(typed: Path) -> dict[str, str]:
    return tsc_each(typed, {"good": GOOD, **BAD})


def test_the_generated_types_take_a_good_bundle_and_every_event_by_name(
    typed: Path, checked: dict[str, str]
) -> None:
    api = (typed / "api.d.ts").read_text(encoding="utf-8")
    assert "unknown" not in api.split("ToolMessageIn: {", 1)[1].split("};", 1)[0]
    assert checked["good"] == checked[""] == "", checked


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_generated_types_refuse_a_bad_bundle_and_a_wrong_event_body(
    checked: dict[str, str], case: str
) -> None:
    assert "error TS" in checked[case], checked
    if case == "robot":
        assert '"robot"' in checked[case]
