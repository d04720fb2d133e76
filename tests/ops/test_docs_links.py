"""The README's and docs/' links name files of the repository, which a fresh clone has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_is_a_file_in_the_repository(page: Path) -> None:
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        inside = path.is_relative_to(ROOT.resolve())
        assert inside, f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links a missing file: {target}"


def test_the_readme_links_only_files_of_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    outside = [t for t in LINK.findall(readme) if re.match(r"[a-z]+:", t)]
    assert outside == [], f"README.md links outside the repository: {outside}"
