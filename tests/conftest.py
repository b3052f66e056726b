"""One SparkSession and one SF 0.01 TPC-H data set for the whole run; DuckDB on the same files as the oracle."""

from __future__ import annotations

import json
import math
import os
import socket
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import sqlglot
from click.testing import CliRunner

from aipq.catalog import Catalog
from aipq.cli.main import cli
from aipq.config import Settings
from aipq.data import add_table, generate_tpch
from aipq.engine.context import RunContext
from aipq.engine.session import get_session
from aipq.engine.storage import local_storage
from aipq.files import total_bytes
from aipq.tpch.generate import TABLES as TPCH_TABLES

SF = float(os.environ.get("AIPQ_TEST_SF", "0.01"))
# The test session's JVM would otherwise start a class archive builder as pytest exits (engine/class_archive.py);
# tests/test_class_archive.py turns it on for the processes it starts, with a cache of its own.
os.environ.setdefault("AIPQ_CLASS_ARCHIVE", "off")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the tests' Spark listens on the loopback only


# The README's test command runs one representative corner of the strategy × plan × join-setting matrix: left-deep
# plans, repartition joins (where summaries act) and the strategies off, always and adaptive; .ci/run runs the rest
# after it (``pytest -m matrix``).
REPRESENTATIVE = {"plan": {"linear"}, "broadcast": {"0"}, "strategy": {"off", "always", "adaptive", "transfer"},
                  "staging": {"adaptive"}}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(name in REPRESENTATIVE and value not in REPRESENTATIVE[name] for name, value in params.items()):
            item.add_marker(pytest.mark.matrix)


@pytest.fixture(scope="session")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("aipq-home")


@pytest.fixture(scope="session")
def spark(home):
    return get_session(Settings(), home)


@pytest.fixture(scope="session")
def tpch(home) -> Catalog:
    """TPC-H at SF, registered without Spark: tests that only plan (explain, the planner, IP candidates, the
    estimator) start no JVM."""
    generate_tpch(RunContext(home), SF, "default")
    return Catalog(home)


def oracle_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to compute expected rows with. Its common-subexpression optimizer is off: DuckDB 1.5
    holds ``INTERVAL 30 DAY`` and ``INTERVAL 1 MONTH`` equal and merged ``d + INTERVAL 30 DAY`` with
    ``d + INTERVAL 1 MONTH`` in one SELECT list (giving the first value for both)."""
    con = duckdb.connect()
    con.execute("SET disabled_optimizers = 'common_subexpressions'")
    return con


@pytest.fixture(scope="session")
def duck(tpch):
    con = oracle_connection()
    for entry in tpch.entries():
        if entry.database == "default":  # other tests register synthetic databases in the same home
            con.execute(f"CREATE VIEW {entry.name} AS SELECT * FROM read_parquet('{entry.path}')")
    return con


class Aipq:
    """Runs the real CLI in-process (sharing the session's SparkSession)."""

    def __init__(self, home: Path):
        self.home = home
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None):
        return self.runner.invoke(cli, ["--home", str(self.home), *args], input=input, catch_exceptions=False)


@pytest.fixture(scope="session")
def aipq(home, tpch) -> Aipq:
    return Aipq(home)


@pytest.fixture(scope="session")
def tpch_statistics(aipq) -> None:
    """Every TPC-H table's statistics in the repository (``--plan cost`` orders joins from them)."""
    for table in TPCH_TABLES:
        result = aipq("stats", "collect", table)
        assert result.exit_code == 0, result.output


ALL_QUERIES = tuple(range(1, 23))
LOCAL_FILES = local_storage()  # table sizes for plan_query in tests (local paths: no JVM)


def local_bytes(path: str) -> int | None:
    return total_bytes(LOCAL_FILES, path)


def strategy_options(strategy: str) -> list[str]:
    """``--ip STRATEGY``; for ``adaptive`` with β low enough that the estimator's path runs on every edge (and
    without the transfer choice, which so low a β would make on every query)."""
    return ["--ip", strategy, *(["--beta", "-1000", "--transfer-choice", "off"] if strategy == "adaptive" else [])]


def run_to_rows(aipq, tmp_path, *args: str) -> list[tuple]:
    """The rows of ``aipq run ARGS`` (written as parquet and read back with DuckDB)."""
    out = tmp_path / "result.parquet"
    result = aipq("run", *args, "--output", str(out), "--force", "--quiet")
    assert result.exit_code == 0, result.output
    return duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()


# Hand-made tables where a wrong rewrite of NULL semantics changes the answer (registered by ``small_tables``).
NULL_TABLES = {
    # k has a NULL; g groups rows for correlated subqueries
    "nulls_a": "SELECT * FROM (VALUES (1, 'a', 10), (2, 'b', 10), (NULL, 'c', 20), (3, 'd', 20), (4, 'e', 30))"
               " t(k, v, g)",
    # holds a NULL key, and matches only some keys of nulls_a
    "nulls_b": "SELECT * FROM (VALUES (1, 10), (NULL, 20), (3, 10), (3, 10), (5, 30)) t(k, g)",
    "empty_c": "SELECT * FROM (VALUES (1, 10)) t(k, g) WHERE k < 0",
}


@pytest.fixture(scope="session")
def small_tables(home, tpch, duck, tmp_path_factory):
    folder = tmp_path_factory.mktemp("small-tables")
    for name, query in NULL_TABLES.items():
        path = folder / f"{name}.parquet"
        duck.execute(f"COPY ({query}) TO '{path}' (FORMAT parquet)")
        add_table(RunContext(home), name, str(path), "parquet")
        duck.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    return duck


def oracle_rows(duck, sql: str, dialect: str = "hive") -> list[tuple]:
    duck_sql = sqlglot.transpile(sql, read=dialect, write="duckdb")[0]
    return duck.execute(duck_sql).fetchall()


def _normal(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime) and value.time() == time():  # DuckDB's date + interval is a timestamp
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _same(a, b) -> bool:
    a, b = _normal(a), _normal(b)
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-6)
    return a == b


def assert_same_rows(actual: list[tuple], expected: list[tuple], ordered: bool) -> None:
    assert len(actual) == len(expected), f"{len(actual)} rows, oracle has {len(expected)}"
    if not ordered:
        key = lambda row: tuple((v is None, str(_normal(v))) for v in row)  # noqa: E731
        actual, expected = sorted(actual, key=key), sorted(expected, key=key)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert len(a) == len(e), f"row {i}: {len(a)} columns, oracle has {len(e)}"
        assert all(_same(x, y) for x, y in zip(a, e)), f"row {i}: {a} != oracle {e}"


def said(result) -> str:
    """A command's output with the console's line wrapping undone."""
    return " ".join(result.output.split())


REPARTITION_JOINS = ("--broadcast-threshold", "0")  # every join a repartition join: the paper's Hive setting


def analyzed(aipq, *args: str) -> dict:
    """What ``aipq explain ARGS --analyze --format json`` shows."""
    result = aipq("explain", *args, "--analyze", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def frame_rows(frame) -> list[tuple]:
    """A Spark DataFrame's rows as sorted tuples (what ``spark.sql`` gives, to compare with aipq's)."""
    return sorted(tuple(row) for row in frame.collect())


def parquet_rows(path) -> list[tuple]:
    """The rows of the parquet file or folder ``path``, read by DuckDB."""
    return duckdb.connect().execute(f"SELECT * FROM read_parquet('{path}')").fetchall()


def free_port() -> int:
    """A TCP port free on this machine now, for a service a test starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

