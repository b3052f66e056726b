"""A test helper lives once: a function whose code two test files both define belongs in conftest.py, where every
test file imports it from (``from conftest import …``). Pure source reading, milliseconds."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def helper_bodies(path: Path) -> dict[str, str]:
    """Each module-level helper (not a test) of a test file, by the text of its code without docstring."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("test_"):
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            found[node.name] = ast.dump(ast.Module(body=body, type_ignores=[])) + ast.dump(node.args)
    return found


def test_no_helper_is_copied_between_test_files():
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("test_*.py")):
        for name, code in helper_bodies(path).items():
            where[code].append(f"{path.relative_to(TESTS)}:{name}")
    copies = [places for places in where.values() if len(places) > 1]
    assert not copies, f"the same helper in several test files (move it to conftest.py): {copies}"
