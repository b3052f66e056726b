"""What a hostile probe of the CLI found (issue 55), each as the user met it: Ctrl-C, a relative --warehouse,
an --output-dir that cannot be made, a batch whose middle file fails, the mode of output files, a table whose
files vanish while a command counts its rows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from conftest import said

from aipq.catalog import Catalog, TableEntry
from aipq.engine.session import table_rows
from aipq.engine.storage import local_storage
from aipq.errors import ExecutionError

LONG_QUERY = "select count(*) from lineitem a cross join lineitem b where a.l_quantity + b.l_quantity > 49"


def _java_children(pid: int) -> bool:
    found = subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True)
    return bool(found.stdout.strip())


@pytest.mark.slow
@pytest.mark.parametrize("to", ["process", "group"])
def test_ctrl_c_exits_130_and_says_interrupted(home, tpch, tmp_path, to):
    """SIGINT while a stage runs, to aipq alone or to its whole process group as a terminal's Ctrl-C sends it:
    exit 130, "interrupted", and no output file."""
    out = tmp_path / "never.parquet"
    env = {**os.environ, "AIPQ_HOME": str(home)}
    command = [sys.executable, "-m", "aipq.cli.main", "run", "--sql", LONG_QUERY, "--output", str(out),
               "--staging", "hive", "--quiet"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.time() + 120
    while not _java_children(process.pid) and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(8)  # the session started and the cross join's stage runs
    assert process.poll() is None, process.communicate()
    if to == "group":
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert not out.exists()


def test_a_relative_warehouse_is_stored_absolute(aipq, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert aipq("run", "--sql", "create database if not exists hostile").exit_code == 0
    created = aipq("run", "--sql", "create table hostile.hi_relwh as select 1 as a", "--warehouse", "relwh")
    assert created.exit_code == 0, created.output
    path = Catalog(aipq.home).lookup("hostile.hi_relwh").path
    assert path == str(tmp_path / "relwh" / "hostile.db" / "hi_relwh"), path
    monkeypatch.chdir(tmp_path.parent)
    found = aipq("run", "--sql", "select a from hostile.hi_relwh", "--format", "csv")
    assert found.exit_code == 0 and found.stdout.split() == ["a", "1"], found.output


def test_an_output_dir_that_cannot_be_created_is_the_users_error(aipq, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    refused = aipq("run", "tpch:6", "tpch:1", "--output-dir", str(blocker / "below"))
    assert refused.exit_code == 2, refused.output
    assert "--output-dir" in said(refused) and "cannot be created" in said(refused)
    assert "internal error" not in refused.output


def test_a_batch_names_the_file_that_failed_and_those_it_did_not_run(aipq, tmp_path):
    files = []
    for name, sql in [("a", "select count(*) from nation"),
                      ("b", "select assert_true(n_nationkey < 0) from nation"),
                      ("c", "select count(*) from region")]:
        path = tmp_path / f"{name}.sql"
        path.write_text(sql)
        files.append(str(path))
    failed = aipq("run", *files, "--output-dir", str(tmp_path / "out"))
    assert failed.exit_code == 1, failed.output
    text = said(failed)
    assert f"{files[1]}:" in text and f"not run: {files[2]}" in text, text
    exists = aipq("run", *files, "--output-dir", str(tmp_path / "out"))
    assert exists.exit_code == 2 and "--output-dir" in said(exists) and "exists" in said(exists)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_output_files_get_the_umasks_mode(aipq, tmp_path, fmt):
    out = tmp_path / f"rows.{fmt}"
    previous = os.umask(0o022)
    try:
        result = aipq("run", "--sql", "select count(*) from nation", "--output", str(out))
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o644


def test_a_parquet_tables_rows_are_read_from_its_footers_without_a_spark_job(spark, tmp_path):
    """Sizing a Bloom filter asks a table's rows on every run: the footers answer without a Spark job."""
    folder = tmp_path / "t"
    spark.range(0, 12345, numPartitions=3).write.parquet(str(folder))
    entry = TableEntry("default", "counted", str(folder), "parquet", (("id", "bigint"),))
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("aipq-test-rows", "table rows")
    try:
        assert table_rows(spark, local_storage(), entry) == 12345
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert list(tracker.getJobIdsForGroup("aipq-test-rows")) == []
    csv_folder = tmp_path / "c"
    spark.range(0, 7).write.option("header", "true").csv(str(csv_folder))
    csv_entry = TableEntry("default", "c", str(csv_folder), "csv", (("id", "string"),))
    assert table_rows(spark, local_storage(), csv_entry) == 7  # not parquet: counted by Spark


def test_a_table_whose_files_vanish_while_counted_is_a_clear_runtime_error(spark, tmp_path):
    """The planning-time row count of a table another command just overwrote (its folder renamed away)."""
    folder = tmp_path / "t"
    folder.mkdir()
    duckdb.connect().execute(f"COPY (SELECT 1 AS a) TO '{folder}/part-0.parquet'")
    entry = TableEntry("default", "vanishing", str(folder), "parquet", (("a", "int"),))
    folder.rename(tmp_path / "t-old")
    with pytest.raises(ExecutionError) as raised:
        table_rows(spark, local_storage(), entry)
    assert "default.vanishing" in raised.value.message and "another command" in (raised.value.hint or "")
