"""The package's shape: data flows one way (SQL → plan → stage DAG + decisions → Spark → rendering), so no
module imports one of a later layer, and no import cycle exists. Imports inside functions count too; imports for
type annotations only (under ``if TYPE_CHECKING:``) do not."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "aipq"

# Layers in the order data flows; a module may import its own layer and earlier ones.
LAYERS = (
    ("aipq", "aipq.errors", "aipq.version", "aipq.faults", "aipq.files", "aipq.config", "aipq.setting_aliases",
     "aipq.catalog", "aipq.tpch", "aipq.tpcds"),
    ("aipq.planner",),
    ("aipq.ip", "aipq.pipeline"),
    ("aipq.stats",),
    ("aipq.estimator",),
    ("aipq.engine",),
    ("aipq.reoptimizer",),
    ("aipq.workflow", "aipq.data"),
    ("aipq.explanation",),
    ("aipq.batch",),
    ("aipq.bench",),
    ("aipq.cli", "aipq.__main__"),
    ("aipq.api",),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or (p != "aipq" and module.startswith(p + ".")) for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:`` (annotations only: no import at run time) and in a
    module's ``__getattr__`` (PEP 562: the package's public names, ``aipq.sql``, resolved on first use, once every
    module is loaded)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports(path: Path, started: bool = True) -> set[str]:
    """The aipq modules ``path`` imports, and with ``started`` those it starts as ``python -m`` (a dependency
    for the layers; not for cycles, since a process of its own imports afresh)."""
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aipq"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if (PACKAGE.parent / f"{node.module}.{a.name}".replace(".", "/")).with_suffix(".py").exists())
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("aipq"))
        elif started and isinstance(node, (ast.List, ast.Tuple)):
            found.update(_started_modules(node.elts))
    return found


def _started_modules(elements: list[ast.expr]) -> set[str]:
    """Modules a command line in the code starts as ``python -m aipq.…``: an import through a string."""
    texts = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in elements]
    return {module for flag, module in zip(texts, texts[1:])
            if flag == "-m" and module is not None and module.split(".")[0] == "aipq"}


def test_no_module_imports_a_later_layer():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for imported in imports(path):
            if layer(imported) > layer(module):
                upward.append(f"{module} → {imported}")
    assert not upward, "\n".join(upward)


def test_no_import_cycles():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: {i for i in imports(p, started=False) if i in modules and i != m} for m, p in modules.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                cycles.append(" → ".join(stack[stack.index(other):] + [other]))
            elif other not in state:
                visit(other, [*stack, other])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


# PySpark's handles on the JVM: reaching through them is py4j use, which stays in the package engine/jvm/
_JVM_HANDLES = {"_jvm", "_jsc", "_jdf", "_jc", "_jsparkSession", "_jreader", "_jwrite", "_jconf", "_gateway"}


def py4j_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in _JVM_HANDLES:
            found.append(f"{node.attr} at line {node.lineno}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [f"import {n} at line {node.lineno}" for n in names if n.split(".")[0] == "py4j"]
    return found


def test_engine_jvm_is_the_one_package_that_touches_py4j():
    offenders = {str(p.relative_to(PACKAGE)): py4j_uses(p) for p in sorted(PACKAGE.rglob("*.py"))
                 if not p.relative_to(PACKAGE).as_posix().startswith("engine/jvm/") and py4j_uses(p)}
    assert not offenders, offenders


def test_a_module_started_with_python_m_counts_as_imported(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('import sys\nCOMMAND = [sys.executable, "-m", "aipq.cli.main", "run"]\n')
    assert imports(sample) == {"aipq.cli.main"}


def test_the_py4j_check_finds_a_use(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import py4j.java_gateway\n\ndef f(spark):\n    return spark.sparkContext._jvm.java\n")
    assert len(py4j_uses(sample)) == 2
