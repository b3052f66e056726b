"""Regressions for wrong answers, lost data and unclear failures found by trying aipq as a new user would
(issue 37); the hostile-input corpus (test_corpus.py) covers the rest by input."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pytest
import sqlglot
from conftest import Aipq, assert_same_rows, oracle_rows
from pyspark.sql import functions as F
from sqlglot.optimizer.annotate_types import annotate_types

from aipq.engine import jvm
from aipq.engine.storage import local_storage
from aipq.engine.work_dirs import OWNER_FILE, remove_stale_work_dirs
from aipq.planner.normalize import canonicalize, simplify

AIPQ = str(Path(sys.executable).with_name("aipq"))


def rows_of(result) -> list[list[str]]:
    assert result.exit_code == 0, result.output
    return list(csv.reader(io.StringIO(result.stdout)))


# ---- 1. no optimizer rule changes what Spark computes ------------------------------------------------------
@pytest.mark.parametrize(("sql", "kept"), [
    ("SELECT '10' + '10' FROM t", "'10' + '10'"),
    ("SELECT 2147483647 + 1 FROM t", "2147483647 + 1"),
    ("SELECT 1e308 * 10 FROM t", "1e308 * 10"),
    ("SELECT x FROM t WHERE x + 1 = 3", "x + 1 = 3"),
    ("SELECT 5 / 2 FROM t", "5 / 2"),
])
def test_normalization_keeps_what_spark_would_compute(sql, kept):
    expression = annotate_types(sqlglot.parse_one(sql, read="hive"), dialect="hive")
    assert kept in simplify(canonicalize(expression, "hive"), "hive").sql("spark")


def test_normalization_still_folds_dates_and_true():
    sql = "SELECT x FROM t WHERE d > DATE '1998-12-01' - INTERVAL '90' DAY AND TRUE AND 1 + 2 = y"
    expression = annotate_types(sqlglot.parse_one(sql, read="hive"), dialect="hive")
    text = simplify(canonicalize(expression, "hive"), "hive").sql("spark")
    assert "CAST('1998-09-02' AS DATE)" in text and "TRUE" not in text and "y = 3" in text


def test_strings_added_as_numbers_as_in_hive(aipq):
    rows = rows_of(aipq("run", "--quiet", "--format", "csv", "--sql",
                        "SELECT r_regionkey, '10' + '10' AS twenty, r_regionkey + '1.5' AS k FROM region "
                        "WHERE r_regionkey = 1"))
    assert rows == [["r_regionkey", "twenty", "k"], ["1", "20.0", "2.5"]]


# ---- 2 and 19. output files hold exactly the rows ----------------------------------------------------------
TYPES_SQL = """
SELECT r_regionkey AS id,
       CASE r_regionkey WHEN 0 THEN ' lead' WHEN 1 THEN 'trail ' WHEN 2 THEN 'q"uote' WHEN 3 THEN 'com,ma'
            ELSE concat('new', chr(10), 'line') END AS text,
       CASE WHEN r_regionkey = 1 THEN NULL WHEN r_regionkey = 2 THEN '' ELSE 'üñí 中' END AS maybe,
       CASE WHEN r_regionkey = 3 THEN NULL ELSE DATE '2020-01-02' END AS day,
       CASE WHEN r_regionkey = 4 THEN NULL ELSE TIMESTAMP '2020-01-02 03:04:05.5' END AS at,
       CAST(r_regionkey AS DECIMAL(10, 2)) / 4 AS amount, r_regionkey * 1.5D AS ratio, r_regionkey > 2 AS big
FROM region
"""


def expected_types_rows(duck) -> list[tuple]:
    return oracle_rows(duck, TYPES_SQL)


def test_csv_output_round_trips_through_python_and_duckdb(aipq, duck, tmp_path):
    target = tmp_path / "out.csv"
    result = aipq("run", "--quiet", "--output", str(target), "--sql", TYPES_SQL)
    assert result.exit_code == 0, result.output
    parsed = list(csv.reader(target.open(newline="")))
    assert parsed[0] == ["id", "text", "maybe", "day", "at", "amount", "ratio", "big"]
    by_id = {row[0]: row for row in parsed[1:]}
    assert by_id["0"][1] == " lead" and by_id["1"][1] == "trail " and by_id["2"][1] == 'q"uote'
    assert by_id["3"][1] == "com,ma" and by_id["4"][1] == "new\nline"
    assert by_id["1"][2] == "" and by_id["0"][2] == "üñí 中"
    assert by_id["2"][2] == "" and ',"",' in next(line for line in target.read_text().splitlines()
                                                   if line.startswith("2,"))  # the empty string is quoted
    read_back = duck.execute(f"SELECT * FROM read_csv('{target}', header=true, allow_quoted_nulls=false)").fetchall()
    expected = expected_types_rows(duck)
    assert_same_rows([r[:3] + r[5:] for r in read_back], [r[:3] + r[5:] for r in expected], ordered=False)
    assert sorted(str(r[3]) for r in read_back) == sorted(str(r[3]) for r in expected)


def test_json_output_keeps_nulls_and_values(aipq, duck, tmp_path):
    target = tmp_path / "out.json"
    assert aipq("run", "--quiet", "--output", str(target), "--sql", TYPES_SQL).exit_code == 0
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert all(len(line) == 8 for line in lines)  # every key, NULLs too
    by_id = {line["id"]: line for line in lines}
    assert by_id[1]["maybe"] is None and by_id[2]["maybe"] == "" and by_id[4]["text"] == "new\nline"
    read_back = duck.execute(f"SELECT id, text, maybe FROM read_json('{target}', format='newline_delimited')"
                             ).fetchall()
    assert sorted(read_back, key=str) == sorted([r[:3] for r in expected_types_rows(duck)], key=str)


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_a_single_null_row_is_a_row(aipq, tmp_path, suffix):
    target = tmp_path / f"null{suffix}"
    sql = "SELECT avg(l_quantity) AS avg_yearly FROM lineitem WHERE l_quantity < 0"
    assert aipq("run", "--quiet", "--output", str(target), "--sql", sql).exit_code == 0
    reader = {".csv": "read_csv", ".json": "read_json", ".parquet": "read_parquet"}[suffix]
    assert duckdb.connect().execute(f"SELECT * FROM {reader}('{target}')").fetchall() == [(None,)]
    if suffix == ".csv":
        assert target.read_text() == "avg_yearly\n\n"


def test_stdout_csv_is_the_file_format(aipq, tmp_path):
    sql = "SELECT n_name, NULL AS x, '' AS e FROM nation WHERE n_nationkey < 2"
    printed = aipq("run", "--quiet", "--format", "csv", "--sql", sql)
    target = tmp_path / "same.csv"
    assert aipq("run", "--quiet", "--output", str(target), "--sql", sql).exit_code == 0
    assert sorted(printed.stdout.splitlines()) == sorted(target.read_text().splitlines())
    assert 'ALGERIA,,""' in printed.stdout


def test_output_is_not_replaced_without_force_and_format_comes_from_the_extension(aipq, tmp_path):
    existing = tmp_path / "kept.csv"
    existing.write_text("precious\n")
    sql = "SELECT r_name FROM region"
    refused = aipq("run", "--quiet", "--output", str(existing), "--sql", sql)
    assert refused.exit_code == 2 and "--force" in refused.output and existing.read_text() == "precious\n"
    assert aipq("run", "--quiet", "--force", "--output", str(existing), "--sql", sql).exit_code == 0
    assert existing.read_text().startswith("r_name\n")
    unknown = aipq("run", "--quiet", "--output", str(tmp_path / "x.txt"), "--sql", sql)
    assert unknown.exit_code == 2 and "extension" in unknown.output and not (tmp_path / "x.txt").exists()
    assert aipq("run", "--quiet", "--format", "json", "--output", str(tmp_path / "x.txt"), "--sql",
                sql).exit_code == 0
    assert json.loads((tmp_path / "x.txt").read_text().splitlines()[0]) == {"r_name": "AFRICA"}
    existing.chmod(0o444)
    read_only = aipq("run", "--quiet", "--force", "--output", str(existing), "--sql", sql)
    if os.geteuid() != 0:  # root may write anyway
        assert read_only.exit_code == 2 and "read-only" in read_only.output


def test_output_folder_is_checked_before_the_query_runs(aipq, tmp_path):
    result = aipq("run", "--output", str(tmp_path / "no" / "such" / "x.csv"), "--sql", "SELECT r_name FROM region")
    assert result.exit_code == 2 and "does not exist" in result.output and "run " not in result.output


# ---- 3. statistics count each row once -----------------------------------------------------------------------
def test_a_sorted_first_read_records_the_true_row_count(tmp_path, home, tpch):
    aipq = Aipq(tmp_path / "fresh")
    source = next((home / "warehouse" / "tpch").rglob("region.parquet"))
    assert aipq("table", "add", "region", str(source)).exit_code == 0
    sql = "SELECT r_name FROM region ORDER BY r_name"
    assert aipq("run", "--handoff", "off", "--quiet", "--sql", sql).exit_code == 0
    shown = aipq("stats", "show", "region", "--json")
    assert json.loads(shown.output)["tables"][0]["rows"] == 5, shown.output


# ---- 4. a folder of parquet files with different columns -----------------------------------------------------
def test_parquet_files_with_different_columns_are_merged(aipq, spark, duck, tmp_path):
    folder = tmp_path / "mixed"
    spark.sql("SELECT 1 AS id, 'a' AS name").write.parquet(str(folder / "one"))
    spark.sql("SELECT 2 AS id, 10.5D AS price").write.parquet(str(folder / "two"))
    flat = tmp_path / "flat"
    flat.mkdir()
    for i, part in enumerate(sorted(folder.rglob("part-*.parquet"))):
        shutil.copy(part, flat / f"part-{i}.parquet")
    assert aipq("table", "add", "mixed_t", str(flat)).exit_code == 0
    rows = rows_of(aipq("run", "--quiet", "--format", "csv", "--sql",
                        "SELECT id, name, price FROM mixed_t ORDER BY id"))
    assert rows == [["id", "name", "price"], ["1", "a", ""], ["2", "", "10.5"]]


def test_parquet_files_whose_types_disagree_are_refused_by_name(aipq, spark, tmp_path):
    folder = tmp_path / "clash"
    spark.sql("SELECT 1 AS id").write.parquet(str(tmp_path / "a"))
    spark.sql("SELECT 'x' AS id").write.parquet(str(tmp_path / "b"))
    folder.mkdir()
    shutil.copy(next((tmp_path / "a").glob("part-*.parquet")), folder / "first.parquet")
    shutil.copy(next((tmp_path / "b").glob("part-*.parquet")), folder / "second.parquet")
    result = aipq("table", "add", "clash_t", str(folder))
    assert result.exit_code == 2 and "first.parquet" in result.output and "second.parquet" in result.output


def test_a_damaged_parquet_file_is_named_when_added(aipq, tmp_path):
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1 not really parquet at all")
    result = aipq("table", "add", "damaged_t", str(damaged))
    assert result.exit_code == 2 and "damaged.parquet" in result.output and "o5" not in result.output


# ---- 5. statistics never fail a query ----------------------------------------------------------------------------
def test_a_failing_statistics_pass_is_a_warning_and_the_result_comes(tmp_path, home, tpch, monkeypatch):
    aipq = Aipq(tmp_path / "fresh")
    source = next((home / "warehouse" / "tpch").rglob("nation.parquet"))
    assert aipq("table", "add", "nation", str(source)).exit_code == 0
    original = jvm.ColumnSketcher.observe

    def failing(self, df):  # the sketches' plan fails when it runs, as a broken JVM extension would
        return original(self, df).where(F.expr("raise_error('sketch failure') IS NULL"))

    monkeypatch.setattr(jvm.ColumnSketcher, "observe", failing)
    result = aipq("run", "--handoff", "off", "--quiet", "--format", "csv", "--sql", "SELECT count(*) AS n FROM nation")
    assert result.exit_code == 0, result.output
    assert "warning: collecting statistics failed" in result.output and result.stdout.splitlines() == ["n", "25"]


# ---- 6 and 11. plans of any depth --------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_500_term_union_all_runs(aipq, tmp_path):
    query = tmp_path / "u500.sql"
    query.write_text(" UNION ALL ".join(f"SELECT r_regionkey + {i} AS k FROM region" for i in range(500)))
    rows = rows_of(aipq("run", "--quiet", "--format", "csv", "--statistics", "off", str(query)))
    assert len(rows) == 1 + 2500 and sorted(int(r[0]) for r in rows[1:])[-1] == 503


# ---- 7. a byte-order mark ------------------------------------------------------------------------------------------
def test_a_file_with_a_byte_order_mark_runs_and_errors_keep_their_columns(aipq, tmp_path):
    good = tmp_path / "bom.sql"
    good.write_bytes("\ufeffSELECT r_name FROM region WHERE r_regionkey = 1".encode())
    assert rows_of(aipq("run", "--quiet", "--format", "csv", str(good))) == [["r_name"], ["AMERICA"]]
    bad = tmp_path / "bad.sql"
    bad.write_bytes("\ufeffSELECT r_nmae FROM region".encode())
    assert "bad.sql:1:8" in aipq("explain", str(bad)).output


# ---- 7b. ORDER BY an expression over a selected column ---------------------------------------------------------
def test_order_by_an_expression_over_an_output_column(aipq, duck):
    sql = "SELECT n_name FROM nation ORDER BY upper(n_name) DESC, length(n_name) LIMIT 5"
    rows = rows_of(aipq("run", "--quiet", "--format", "csv", "--sql", sql))[1:]
    assert_same_rows([tuple(r) for r in rows], oracle_rows(duck, sql), ordered=True)


# ---- 12. a runtime failure is one message ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_runtime_failure_while_writing_prints_no_java_stack(tpch, home, tmp_path):
    workflow = tmp_path / "ansi.sql"
    workflow.write_text("SET spark.sql.ansi.enabled=true;\n"
                        "CREATE TABLE ansi_t AS SELECT element_at(array(1, 2), CAST(r_regionkey + 5 AS INT)) AS v "
                        "FROM region;\n")
    done = subprocess.run([AIPQ, "--home", str(home), "run", str(workflow)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "AIPQ_CLASS_ARCHIVE": "off"})
    assert done.returncode == 1, done.stderr
    assert "INVALID_ARRAY_INDEX_IN_ELEMENT_AT" in done.stderr
    assert "\tat " not in done.stderr and "Traceback" not in done.stderr and "ERROR" not in done.stderr


# ---- 13 and 15. homes aipq cannot write --------------------------------------------------------------------------
def test_a_home_that_is_a_file_is_named(tmp_path):
    home_file = tmp_path / "home-file"
    home_file.write_text("")
    result = Aipq(home_file)("table", "list")
    assert result.exit_code == 2 and "is a file" in result.output


@pytest.mark.skipif(not shutil.which("setpriv") or os.geteuid() != 0, reason="needs root to act as another user")
def test_a_read_only_home_serves_read_only_commands(aipq, home):
    shared = Path(tempfile.mkdtemp(prefix="aipq-ro-"))  # pytest's own temporary folders are private to root
    shared.chmod(0o755)
    read_only = shared / "ro-home"
    read_only.mkdir()
    source = shared / "region.parquet"
    shutil.copy(next((home / "warehouse" / "tpch").rglob("region.parquet")), source)
    source.chmod(0o644)
    assert Aipq(read_only)("table", "add", "region", str(source)).exit_code == 0
    for path in read_only.iterdir():
        path.chmod(0o444 if path.is_file() else 0o555)
    read_only.chmod(0o555)
    tmp_path = shared
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", AIPQ, "--home", str(read_only)]
    env = {**os.environ, "AIPQ_CLASS_ARCHIVE": "off", "HOME": str(tmp_path)}
    listed = subprocess.run([*as_nobody, "table", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert listed.returncode == 0 and "region" in listed.stdout, listed.stderr
    explained = subprocess.run([*as_nobody, "explain", "--sql", "SELECT r_name FROM region"], capture_output=True,
                               text=True, env=env, timeout=60)
    assert explained.returncode == 0, explained.stderr
    refused = subprocess.run([*as_nobody, "table", "add", "x", str(source)], capture_output=True, text=True,
                             env=env, timeout=120)
    assert refused.returncode == 2 and "read-only" in refused.stderr and "move it aside" not in refused.stderr
    output = subprocess.run([*as_nobody, "run", "--output", str(read_only / "x.csv"), "--sql",
                             "SELECT r_name FROM region"], capture_output=True, text=True, env=env, timeout=60)
    assert output.returncode == 2 and "cannot write --output" in output.stderr


# ---- 17. two runs writing one table ------------------------------------------------------------------------------
@pytest.mark.slow
def test_concurrent_create_or_replace_of_a_new_table_both_succeed(tpch, home, tmp_path):
    workflow = tmp_path / "replace.sql"
    workflow.write_text("CREATE OR REPLACE TABLE raced_t AS SELECT r_regionkey, r_name FROM region;\n")
    env = {**os.environ, "AIPQ_CLASS_ARCHIVE": "off"}
    runs = [subprocess.Popen([AIPQ, "--home", str(home), "run", str(workflow)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outcomes = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outcomes
    assert rows_of(Aipq(home)("run", "--quiet", "--format", "csv", "--sql", "SELECT count(*) FROM raced_t"))[1] \
        == ["5"]


# ---- 18. work directories of killed runs ------------------------------------------------------------------------
def test_work_directories_of_dead_runs_are_removed(tmp_path):
    root = tmp_path / "runs"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    for name, owner in (("dead", f"{host} {dead.pid} 1"), ("alive", f"{host} {os.getpid()}"), ("kept", f"{host} 1 1")):
        (root / name / "stage-1" / "_temporary").mkdir(parents=True)
        (root / name / OWNER_FILE).write_text(owner)
    (root / "kept" / "_kept").touch()
    (root / "unmarked-old").mkdir()
    os.utime(root / "unmarked-old", (time.time() - 2 * 86400,) * 2)
    remove_stale_work_dirs(local_storage(), str(root))
    assert sorted(p.name for p in root.iterdir()) == ["alive", "kept"]


# ---- a broadcast the driver has not the memory for -----------------------------------------------------------------
def test_a_broadcast_the_driver_cannot_hold_runs_again_with_repartition_joins(aipq, duck, monkeypatch):
    """Spark fails a job whose broadcast table does not fit the driver's memory (reproduced at TPC-H SF 1 with a
    700 MB driver: a lineitem self-join broadcast); aipq chose the broadcast, so the stage runs again with
    repartition joins and the query gives its rows. Injected here (``AIPQ_FAIL_AT``): a test's session has one
    driver, too large to run out."""
    from aipq.tpch.queries import query_text

    monkeypatch.setenv("AIPQ_FAIL_AT", "broadcast")
    monkeypatch.setattr("aipq.faults._reached", {})
    result = aipq("run", "--quiet", "--format", "csv", "--broadcast-threshold", "10MB", "--staging", "hive",
                  "tpch:3")
    assert result.exit_code == 0, result.output
    assert "the driver had not the memory to broadcast a join input" in result.output
    assert "runs again with repartition joins" in result.output
    rows = [tuple(r) for r in rows_of(result)[1:]]
    expected = [tuple(str(v) if isinstance(v, int) else v for v in row) for row in oracle_rows(duck, query_text(3))]
    assert_same_rows(rows, expected, ordered=True)


def test_a_hash_join_a_task_cannot_hold_runs_again_sorted(aipq, duck, monkeypatch):
    """A shuffled hash join (``--hash-joins auto``) whose table does not fit its task's execution memory fails
    the job; aipq chose it, so the stage runs again with sort-merge joins and the query gives its rows.
    Injected here (``AIPQ_FAIL_AT``)."""
    from aipq.tpch.queries import query_text

    monkeypatch.setenv("AIPQ_FAIL_AT", "hash-join")
    monkeypatch.setattr("aipq.faults._reached", {})
    result = aipq("run", "--quiet", "--format", "csv", "--broadcast-threshold", "0", "--staging", "none", "tpch:5")
    assert result.exit_code == 0, result.output
    assert "runs again with sort-merge joins" in result.output
    rows = [tuple(r) for r in rows_of(result)[1:]]
    expected = [tuple(str(v) if isinstance(v, int) else v for v in row) for row in oracle_rows(duck, query_text(5))]
    assert_same_rows(rows, expected, ordered=True)
