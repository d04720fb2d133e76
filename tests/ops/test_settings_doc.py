"""docs/settings.md and .env.example are what ``make settings-doc`` makes of the Settings class."""

from __future__ import annotations

import pytest

from app.settings import Settings
from app.settings_doc import ROOT, render


def test_the_generated_files_match_the_settings_class() -> None:
    for path, text in render().items():
        committed = (ROOT / path).read_text(encoding="utf-8")
        assert committed == text, f"{path} is out of date: run `make settings-doc`"


def test_every_setting_is_in_the_table_and_the_example() -> None:
    files = render()
    for name in Settings.model_fields:
        variable = f"PARLEY_{name.upper()}"
        assert f"`{variable}`" in files["docs/settings.md"]
        assert f"# {variable}=" in files[".env.example"]


def test_the_example_file_is_all_comments_so_defaults_stay_defaults() -> None:
    lines = [line for line in render()[".env.example"].splitlines() if line]
    assert all(line.startswith("#") for line in lines)


def test_every_setting_has_a_default_to_read() -> None:
    table = [line for line in render()["docs/settings.md"].splitlines() if line.startswith("| `")]
    assert len(table) == len(Settings.model_fields)
    for line in table:
        default = line.split(" | ")[1]
        assert default.strip("`"), line  # an empty secret reads `empty`, not ``


def test_the_example_file_uncommented_as_it_is_gives_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "uncomment what you change": a line uncommented but not yet changed (an empty value for
    # what is unset) must not stop the server, nor change anything
    for line in render()[".env.example"].splitlines():
        if line.startswith("# PARLEY_") and "=" in line:
            name, _, value = line.removeprefix("# ").partition("=")
            monkeypatch.setenv(name, value)
    assert Settings().model_dump() == Settings.model_construct().model_dump()
