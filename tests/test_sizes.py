"""The size gate (STYLE.md): no module of ``app/`` over 450 lines, no function over 50.

A function's size runs from its ``def`` line to its last line (docstring and nested functions
included, decorators not). Its other half is ruff's mccabe check at 12 (pyproject.toml).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 50
_Function = ast.FunctionDef | ast.AsyncFunctionDef


def modules() -> list[Path]:
    return sorted(APP.glob("**/*.py"))


def functions(tree: ast.AST) -> Iterator[tuple[str, _Function]]:
    """Every function and method with its qualified name (``Class.method``, ``outer.inner``)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, _Function]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + child.name, child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def long_modules() -> list[str]:
    found = []
    for path in modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return found


def long_functions() -> list[str]:
    found = []
    for path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, node in functions(tree):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}: {lines} lines")
    return found


def test_no_module_of_app_is_over_450_lines() -> None:
    assert long_modules() == []


def test_no_function_of_app_is_over_50_lines() -> None:
    assert long_functions() == []


def test_the_gate_sees_the_modules_and_their_methods() -> None:
    assert len(modules()) > 50
    names = {name for name, _ in functions(ast.parse("class A:\n    async def f(self): pass\n"))}
    assert names == {"A.f"}
