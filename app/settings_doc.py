"""Write docs/settings.md and .env.example from the Settings class: ``make settings-doc``.

Imports app.settings and pydantic only. ``tests/ops/test_settings_doc.py`` fails when either
file drifts from the class, so a new setting is documented by its ``description`` alone.
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt
from pydantic.fields import FieldInfo

from app.settings import Settings, env_names

ROOT = Path(__file__).resolve().parents[1]
_BOUNDS = ((Ge, "ge", "≥"), (Gt, "gt", ">"), (Le, "le", "≤"), (Lt, "lt", "<"))

_HEADER = """# Settings

Every setting Parley reads, from the environment (or `.env` with docker compose). This page is
generated from `app/settings.py` by `make settings-doc`: edit a field's `description` there, not
here. A bad value stops the process with exit status 2 and one line naming the variable.
Besides these, the container reads uvicorn's `FORWARDED_ALLOW_IPS` and prometheus_client's
`PROMETHEUS_MULTIPROC_DIR` (see [deploy.md](deploy.md)).

| variable | default | meaning |
| --- | --- | --- |
"""


def default_text(info: FieldInfo) -> str:
    default = info.get_default()
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    text = str(default)  # a SecretStr's str is "" when it is empty, its stars otherwise
    return text if text else "empty"


def constraints(info: FieldInfo) -> str:
    """``one of …`` for a choice, bounds for a number, as a short suffix."""
    if typing.get_origin(info.annotation) is typing.Literal:
        return "one of " + ", ".join(f"`{c}`" for c in typing.get_args(info.annotation))
    bounds = [
        f"{symbol} {getattr(m, attr)}"
        for m in info.metadata
        for kind, attr, symbol in _BOUNDS
        if isinstance(m, kind)
    ]
    return ", ".join(bounds)


def rows() -> list[tuple[list[str], str, str, FieldInfo]]:
    """(variables, default, meaning, field) for every setting, in the class's order."""
    out = []
    for name, info in Settings.model_fields.items():
        meaning = (info.description or "").rstrip(".") + "."
        extra = constraints(info)
        if extra:
            meaning += f" ({extra})"
        out.append((env_names(name), default_text(info), meaning, info))
    return out


def markdown() -> str:
    lines = [_HEADER.rstrip("\n")]
    for names, default, meaning, _ in rows():
        variables = ", ".join(f"`{n}`" for n in names)
        escaped = meaning.replace("|", "\\|")
        lines.append(f"| {variables} | `{default}` | {escaped} |")
    return "\n".join(lines) + "\n"


def dotenv() -> str:
    lines = [
        "# Parley's settings, generated from app/settings.py by `make settings-doc`.",
        "# Copy to .env and uncomment what you change (docker compose reads .env).",
    ]
    for names, default, meaning, _ in rows():
        value = "" if default in ("unset", "empty") else default
        lines += ["", f"# {meaning}", f"# {names[0]}={value}"]
    return "\n".join(lines) + "\n"


def render() -> dict[str, str]:
    """Each generated file's path (from the repository root) and its text."""
    return {"docs/settings.md": markdown(), ".env.example": dotenv()}


def main(argv: list[str]) -> int:
    for path, text in render().items():
        (ROOT / path).write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
