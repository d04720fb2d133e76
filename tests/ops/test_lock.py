"""The lock files pin every dependency pyproject.toml names, at a version it allows, with hashes:
a dependency added without `make lock` fails here instead of on a fresh machine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)")


def pins(lock: str) -> dict[str, str]:
    text = (REPO_ROOT / lock).read_text(encoding="utf-8")
    entries = [line for line in text.splitlines() if line and line[0] not in " #"]
    matches = [PIN.match(line) for line in entries]
    assert all(matches), f"{lock}: an entry is not pinned with =="
    assert text.count("--hash=sha256:") >= len(entries), f"{lock}: an entry has no hash"
    return {canonicalize_name(m[1]): m[2] for m in matches if m}


def declared(*extras: str) -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = list(project["dependencies"])
    for extra in extras:
        names += project["optional-dependencies"][extra]
    return [Requirement(n) for n in names]


@pytest.mark.parametrize(
    ("lock", "extras"), [("requirements.lock", ()), ("requirements-dev.lock", ("dev",))]
)
def test_the_lock_pins_every_declared_dependency(lock: str, extras: tuple[str, ...]) -> None:
    pinned = pins(lock)
    for requirement in declared(*extras):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not in {lock}: run `make lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{lock} pins {name}=={pinned[name]}, outside {requirement.specifier}: run `make lock`"
        )


def test_the_dev_lock_agrees_with_the_service_lock() -> None:
    service, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert {name: dev.get(name) for name in service} == service
