"""The hostile-input corpus: every file under tests/corpus is one input, run through the real CLI.

Each input must end with exit 0 (and, for a query, DuckDB's rows), exit 2 for bad input (with ``file:line:column``
where the error has a place in the text) or exit 1 for a runtime or data fault — never a traceback, never
"internal error", never longer than 60 s. A new case is one new file.

A case states what it expects in ``-- key: value`` lines at its top (SQL comments, so the file stays the input):
``expect`` (0, 1, 2, or ``any``: 0 or 2, and when planning accepts it, it must run and give DuckDB's rows),
``command`` (``explain`` by default; ``run`` runs it), ``args`` (more CLI arguments), ``contains`` (text the
output must hold; repeatable), ``position`` (``yes``: the output must point at ``file:line:column``), ``setup``
(a data fault made before the run, see ``SETUPS``). Files under ``options/`` hold a command line instead of SQL.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlglot
from conftest import Aipq
from sqlglot import exp

CORPUS = Path(__file__).parent / "corpus"
TIME_LIMIT_SECONDS = 60


@dataclass
class Case:
    path: Path
    expect: str = "2"
    command: str = "explain"
    args: list[str] = field(default_factory=list)
    contains: list[str] = field(default_factory=list)
    position: bool = False
    setup: str | None = None


def read_case(path: Path) -> Case:
    text = path.read_bytes().decode("utf-8", errors="replace").removeprefix("\ufeff")
    case = Case(path)
    for line in text.splitlines():
        match = re.match(r"\s*(?:--|#)\s*(expect|command|args|contains|position|setup):\s*(.*?)\s*$", line)
        if match is None:
            if line.strip() and not line.strip().startswith("--"):
                break
            continue
        key, value = match.groups()
        if key == "args":
            case.args += shlex.split(value)
        elif key == "contains":
            case.contains.append(value)
        elif key == "position":
            case.position = value == "yes"
        else:
            setattr(case, key, value)
    return case


# inputs that run long by design (a hundred-way UNION, hundreds of statements, one very long line): run after the
# README's tests, in .ci/run
SLOW_CASES = {"sql/union-100.sql", "files/many-statements.sql", "files/very-long-line.sql"}


def all_cases() -> list:
    found = []
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file() and path.suffix in (".sql", ".args", ".txt", ".bin") and path.parent != CORPUS:
            case = str(path.relative_to(CORPUS))
            found.append(pytest.param(path, id=case, marks=[pytest.mark.slow] if case in SLOW_CASES else []))
    return found


def test_the_corpus_holds_at_least_250_inputs():
    assert len(all_cases()) >= 250


# ---- data faults made before a case runs (each in a home of its own) ---------------------------------------
def _copy_table(tpch_home: Path, home: Path, name: str) -> Path:
    source = next((tpch_home / "warehouse" / "tpch").rglob(f"{name}.parquet"))
    target = home / "data" / name
    target.mkdir(parents=True)
    shutil.copy(source, target / "part-0.parquet")
    return target


def setup_missing_file(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    assert aipq("table", "add", "t", str(folder)).exit_code == 0
    shutil.rmtree(folder)


def setup_truncated_file(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    assert aipq("table", "add", "t", str(folder)).exit_code == 0
    data = (folder / "part-0.parquet").read_bytes()
    (folder / "part-0.parquet").write_bytes(data[: len(data) // 2])


def setup_mixed_schema(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    shutil.copy(next((tpch_home / "warehouse" / "tpch").rglob("region.parquet")), folder / "part-1.parquet")
    assert aipq("table", "add", "t", str(folder)).exit_code == 0


def setup_corrupt_catalog(aipq: Aipq, tpch_home: Path) -> None:
    (aipq.home / "catalog.db").write_bytes(b"this is not a database" * 100)


def setup_corrupt_statistics(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    assert aipq("table", "add", "nation", str(folder)).exit_code == 0
    (aipq.home / "stats.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)


def setup_foreign_statistics(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    assert aipq("table", "add", "nation", str(folder)).exit_code == 0
    with sqlite3.connect(aipq.home / "stats.db") as con:
        con.execute("CREATE TABLE stuff (x)")


def setup_deleted_data_file(aipq: Aipq, tpch_home: Path) -> None:
    folder = _copy_table(tpch_home, aipq.home, "nation")
    shutil.copy(folder / "part-0.parquet", folder / "part-1.parquet")
    assert aipq("table", "add", "t", str(folder)).exit_code == 0
    (folder / "part-1.parquet").unlink()


def setup_tables(aipq: Aipq, tpch_home: Path) -> None:
    for name in ("nation", "region"):
        assert aipq("table", "add", name, str(_copy_table(tpch_home, aipq.home, name))).exit_code == 0


SETUPS = {
    "missing-file": setup_missing_file, "truncated-file": setup_truncated_file,
    "mixed-schema": setup_mixed_schema, "corrupt-catalog": setup_corrupt_catalog,
    "corrupt-statistics": setup_corrupt_statistics, "foreign-statistics": setup_foreign_statistics,
    "deleted-data-file": setup_deleted_data_file, "tables": setup_tables,
}


# ---- checks ---------------------------------------------------------------------------------------------------
def _text(value: str) -> str:
    try:
        return repr(round(float(value), 4))
    except ValueError:
        return value


def _oracle_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return _text(str(value))


def assert_rows_match_duckdb(output: str, sql: str, duck) -> None:
    """The printed CSV against DuckDB's rows of the file's last statement (a workflow's result)."""
    try:
        last = [s for s in sqlglot.parse(sql, read="hive") if s is not None and not isinstance(s, exp.Semicolon)][-1]
        expected = duck.execute(last.sql("duckdb")).fetchall()
    except Exception:  # noqa: BLE001 — DuckDB cannot run it (Hive-only semantics): no oracle
        return
    lines = list(csv.reader(io.StringIO(output)))[1:]
    actual = sorted(tuple(_text(v) for v in row) if row else ("",) for row in lines)
    oracle = sorted(tuple(_oracle_text(v) for v in row) for row in expected)
    assert actual == oracle, f"{len(actual)} rows vs DuckDB's {len(oracle)}"


def check_clean(result, case: Case, seconds: float) -> None:
    output = result.output
    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    assert "\tat org.apache" not in output, output
    assert seconds < TIME_LIMIT_SECONDS, f"took {seconds:.0f} s"
    assert result.exit_code in (0, 1, 2), output
    if result.exit_code == 2 and "syntax error" in output and case.path.suffix == ".sql":
        assert f"{case.path.name}:" in output, output  # file:line:column
    if case.position:
        assert re.search(rf"{re.escape(case.path.name)}:\d+:\d+", output), output
    for fragment in case.contains:
        assert fragment in output, output


@pytest.mark.parametrize("path", all_cases())
def test_corpus_input(path: Path, aipq, duck, home, tmp_path):
    case = read_case(path)
    runner = aipq
    if case.setup is not None:
        runner = Aipq(tmp_path / "home")
        runner.home.mkdir()
        SETUPS[case.setup](runner, home)
    if path.suffix == ".args":
        line = path.read_text().strip().splitlines()[-1]
        arguments = [a.replace("{tmp}", str(tmp_path)) for a in shlex.split(line)]
    else:
        command = "run" if case.expect in ("0", "1") and case.command == "explain" and case.setup else case.command
        arguments = [command, *case.args, str(path)]
        if command == "run":
            arguments[1:1] = ["--quiet", "--format", "csv"]
    started = time.perf_counter()
    result = runner(*arguments)
    check_clean(result, case, time.perf_counter() - started)
    if case.expect == "any":
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 0 and arguments[0] == "explain":
            ran = runner("run", "--quiet", "--format", "csv", *case.args, str(path))
            check_clean(ran, case, time.perf_counter() - started)
            if ran.exit_code == 0:
                assert_rows_match_duckdb(ran.stdout, path.read_text(), duck)
        return
    assert str(result.exit_code) == case.expect, result.output
    if result.exit_code == 0 and arguments[0] == "run" and "--output" not in arguments and case.setup is None:
        assert_rows_match_duckdb(result.stdout, path.read_text(), duck)
