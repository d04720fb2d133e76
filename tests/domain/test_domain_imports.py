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


def domain_graph() -> dict[str, set[str]]:
    """Which app.domain module imports which, TYPE_CHECKING and function-level imports included.

    ``app/domain/__init__.py`` re-exports the package and is left out: it imports everything.
    """
    graph: dict[str, set[str]] = {}
    for path in sorted(DOMAIN.glob("*.py")):
        if path.name == "__init__.py":
            continue
        graph[f"app.domain.{path.stem}"] = {
            module for _, module in imported_modules(path) if module.startswith("app.domain.")
        }
    return graph


def cycles(graph: dict[str, set[str]], allowed_pairs: set[frozenset[str]]) -> list[list[str]]:
    """The import circles of ``graph``, except between the pairs allowed to know each other."""
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if frozenset((node, nxt)) in allowed_pairs:
                continue
            if nxt in path:
                found.append([*path[path.index(nxt) :], nxt])
            elif len(path) < len(graph):
                visit(nxt, [*path, nxt])

    for start in graph:
        visit(start, [start])
    return found


# The builder and the conversation may know each other (seed 001: continuation returns a builder).
MUTUAL = {frozenset(("app.domain.builder", "app.domain.conversation"))}


def test_domain_imports_point_one_way() -> None:
    graph = domain_graph()
    assert "app.domain.conversation" not in graph["app.domain.run"]
    assert cycles(graph, MUTUAL) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert ["a", "b", "c", "a"] in cycles(graph, set())
    assert cycles({"a": {"b"}, "b": {"a"}}, {frozenset(("a", "b"))}) == []
