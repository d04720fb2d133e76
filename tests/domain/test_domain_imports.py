"""app/domain imports only the standard library and app.domain (DESIGN §1, STYLE 1)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "app" / "domain"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, absolute names (relative imports resolved to app.domain)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside app.domain
                found.append((node.lineno, "app.domain"))
            elif node.module is not None:
                found.append((node.lineno, node.module))
    return found


def allowed(module: str) -> bool:
    top = module.split(".")[0]
    return (
        module == "app.domain"
        or module.startswith("app.domain.")
        or (top in sys.stdlib_module_names or top == "__future__")
    )


def test_domain_imports_only_the_standard_library_and_itself() -> None:
    files = sorted(DOMAIN.glob("**/*.py"))
    assert len(files) >= 10
    bad = [
        f"{path.relative_to(DOMAIN.parent.parent)}:{line} imports {module}"
        for path in files
        for line, module in imported_modules(path)
        if not allowed(module)
    ]
    assert bad == []


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import json\nfrom . import x\nimport pydantic\nfrom app.providers import y\n"
        "def f():\n    import sqlalchemy.orm\n",
        encoding="utf-8",
    )
    modules = [m for _, m in imported_modules(sample)]
    assert [m for m in modules if not allowed(m)] == ["pydantic", "app.providers", "sqlalchemy.orm"]
