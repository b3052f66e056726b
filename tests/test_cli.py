"""The commands users run: tables, outputs, and a real separate process on separate executor JVMs."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import duckdb
import pytest
from conftest import assert_same_rows, oracle_rows

from aipq.tpch.queries import query_text


def test_table_add_csv_and_query_it(aipq, duck, tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("id,name,nation\n1,ann,7\n2,bob,3\n3,cy,7\n")
    added = aipq("table", "add", "people", str(path), "--format", "csv")
    assert added.exit_code == 0, added.output
    listing = json.loads(aipq("table", "list", "--json").output)
    assert any(t["name"] == "people" and t["format"] == "csv" for t in listing)
    out = tmp_path / "r.csv"
    result = aipq("run", "--quiet", "--output", str(out), "--sql",
                  "select p.name, n.n_name from people p join nation n on p.nation = n.n_nationkey order by p.name")
    assert result.exit_code == 0, result.output
    with out.open() as handle:
        rows = list(csv.reader(handle))
    assert rows == [["name", "n_name"], ["ann", "GERMANY"], ["bob", "CANADA"], ["cy", "GERMANY"]]
    assert aipq("table", "drop", "people").exit_code == 0
    assert aipq("table", "drop", "people").exit_code == 2


def test_tables_are_read_with_the_catalogs_schema_not_one_inferred_again(spark, tmp_path):
    """Reading a registered table hands Spark the catalog's schema, so it infers nothing per query (a parquet
    footer read on the driver; a CSV's whole data): catalog types that differ from what inference would give
    show through."""
    from aipq.catalog import TableEntry
    from aipq.engine.session import read_table

    spark.range(3).selectExpr("CAST(id AS INT) AS k").write.parquet(str(tmp_path / "t.parquet"))
    (tmp_path / "t.csv").write_text("k,v\n1,2\n3,4\n")
    as_bigint = TableEntry("default", "t", str(tmp_path / "t.parquet"), "parquet", (("k", "bigint"),))
    assert read_table(spark, as_bigint).schema.simpleString() == "struct<k:bigint>"
    assert sorted(r.k for r in read_table(spark, as_bigint).collect()) == [0, 1, 2]
    as_text = TableEntry("default", "c", str(tmp_path / "t.csv"), "csv", (("k", "string"), ("v", "bigint")))
    assert [tuple(r) for r in read_table(spark, as_text).collect()] == [("1", 2), ("3", 4)]
    unknown = TableEntry("default", "u", str(tmp_path / "t.csv"), "csv", ())  # registering: inferred
    assert read_table(spark, unknown).schema.simpleString() == "struct<k:int,v:int>"


def test_table_add_rejects_missing_data(aipq, tmp_path):
    result = aipq("table", "add", "ghost", str(tmp_path / "none.parquet"))
    assert result.exit_code == 2 and "no data" in result.output


def test_failed_run_leaves_existing_output_untouched(aipq, tmp_path):
    out = tmp_path / "keep.csv"
    out.write_text("precious\n")
    result = aipq("run", "--quiet", "--output", str(out), "--sql", "select nope from nation")
    assert result.exit_code == 2
    assert out.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.csv"], "no temporary files left behind"


def test_json_and_csv_to_stdout(aipq):
    result = aipq("run", "--quiet", "--format", "json", "--sql", "select r_name from region order by r_name")
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows[0] == {"r_name": "AFRICA"} and len(rows) == 5
    table = aipq("run", "--quiet", "--limit", "2", "--sql", "select n_name from nation order by n_name")
    assert "ALGERIA" in table.output and "first 2 of 25 rows" in table.output


def test_tpch_query_prints_standard_text(aipq):
    assert "c_mktsegment = 'BUILDING'" in aipq("tpch", "query", "3").output


def _run_folders(home) -> set[str]:
    runs = home / "runs"
    return {p.name for p in runs.iterdir()} if runs.exists() else set()


def test_work_directory_is_removed_after_a_run(aipq, home):
    """The run leaves no folder of its own (earlier tests' API results may still hold theirs: the session lives)."""
    before = _run_folders(home)
    aipq("run", "--quiet", "tpch:6")
    assert _run_folders(home) <= before


@pytest.mark.slow
def test_separate_executor_jvms_give_the_same_rows(home, tpch, duck, tmp_path):
    """A real `aipq` process on local-cluster: executors are separate JVMs from the driver."""
    out = tmp_path / "q3.parquet"
    env = {**os.environ, "AIPQ_HOME": str(home)}
    command = [sys.executable, "-m", "aipq.cli.main", "run", "tpch:3", "--quiet", "--broadcast-threshold", "0",
               "--master", "local-cluster[2,1,1024]", "--output", str(out), "--format", "parquet"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    actual = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    assert_same_rows(actual, oracle_rows(duck, query_text(3)), ordered=True)


def test_output_columns_keep_the_names_as_written(aipq):
    result = aipq("run", "--quiet", "--format", "csv", "--sql",
                  "select n_regionkey, COUNT(*), Max(n_name) AS MaxName, min(n_name) AS maxname "
                  "from nation group by n_regionkey order by n_regionkey")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "n_regionkey,COUNT(*),MaxName,maxname_2"


def test_work_directory_is_removed_after_a_failed_run(aipq, home):
    before = _run_folders(home)
    result = aipq("run", "--quiet", "--sql", "select r_regionkey, (select n_name from nation) from region")
    assert result.exit_code == 1
    assert _run_folders(home) <= before


def test_settings_fixed_at_session_start_that_differ_are_an_error(aipq, spark):
    """One process runs one Spark session: asking it for another master or driver memory fails clearly instead
    of being ignored."""
    master = aipq("run", "--master", "local[1]", "--sql", "SELECT r_name FROM region")
    assert master.exit_code == 2 and "already runs on local[2]" in master.output
    memory = aipq("run", "--conf", "spark.driver.memory=1g", "--sql", "SELECT r_name FROM region")
    assert memory.exit_code == 2 and "cannot change while it runs" in memory.output


def test_a_spark_connect_session_is_refused_clearly(aipq):
    """aipq drives the classic driver's JVM; a Spark Connect master gets a clear input error, not py4j's."""
    for args in (("--master", "sc://localhost:15002"), ("--conf", "spark.remote=sc://localhost:15002")):
        result = aipq("run", *args, "--sql", "SELECT r_name FROM region")
        assert result.exit_code == 2, result.output
        assert "needs the classic Spark driver, not a Spark Connect session" in result.output
        assert "Traceback" not in result.output


def test_output_on_a_cluster_store_is_refused_before_the_query_runs(aipq):
    result = aipq("run", "--sql", "SELECT r_name FROM region", "--output", "hdfs://nn/out.csv")
    assert result.exit_code == 2 and "the result file is written on this machine" in result.output
