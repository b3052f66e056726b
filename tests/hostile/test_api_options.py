"""``aipq.sql`` and ``aipq.run_file`` take what ``aipq run`` takes (issue 80, item 12): a workflow given as text is
known by its text (a rerun may replace the tables it created, ``resume=True`` continues it), ``allow_overwrite``,
``output`` and ``report`` work, a ``conf`` entry that disagrees with an option is refused, and CREATE OR REPLACE
TABLE (Spark's syntax) replaces a table with the query's columns."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

import aipq
from aipq.catalog import Catalog, TableEntry
from aipq.errors import AipqError, BadInputError


@pytest.fixture
def source_table(spark, home, tmp_path) -> Path:
    """``api_src`` (id bigint: 0 … 4) in aipq's catalog; its folder, to move away and back."""
    path = tmp_path / "api_src"
    spark.range(5).write.parquet(str(path))
    Catalog(home).register(TableEntry("default", "api_src", str(path), "parquet", (("id", "bigint"),)))
    return path


def test_a_conf_entry_that_disagrees_with_an_option_is_refused(spark, home):
    with pytest.raises(BadInputError) as raised:
        aipq.sql("select 1", spark=spark, home=home, shuffle_partitions=16,
                 conf={"spark.sql.shuffle.partitions": "8"})
    assert "disagree" in raised.value.message
    agreeing = aipq.sql("select 1 as one", spark=spark, home=home, shuffle_partitions=8,
                        conf={"spark.sql.shuffle.partitions": "8"})
    assert agreeing.rows == [(1,)]


def test_a_workflow_text_reruns_dropping_and_creating_its_own_tables(spark, home, source_table):
    text = ("drop table if exists api_own;\n"
            "create table api_own as select id from api_src where id < 3;\n"
            "select count(*) as n from api_own")
    assert aipq.sql(text, spark=spark, home=home).rows == [(3,)]
    assert aipq.sql(text, spark=spark, home=home).rows == [(3,)], "the same text again: its own table"
    other = "insert overwrite table api_own select id from api_src;\nselect count(*) as n from api_own"
    with pytest.raises(BadInputError) as raised:
        aipq.sql(other, spark=spark, home=home)
    assert "did not create" in raised.value.message
    assert aipq.sql(other, spark=spark, home=home, allow_overwrite=True).rows == [(5,)]


def test_a_failed_workflow_text_resumes_after_what_it_committed(spark, home, source_table, tmp_path):
    spark.range(2).write.parquet(str(tmp_path / "api_late"))
    Catalog(home).register(TableEntry("default", "api_late", str(tmp_path / "api_late"), "parquet",
                                      (("id", "bigint"),)))
    text = ("create table api_first as select id from api_src;\n"
            "select count(*) as n from api_first join api_late using (id)")
    away = tmp_path / "api_late.away"
    shutil.move(str(tmp_path / "api_late"), str(away))
    try:
        with pytest.raises(AipqError):
            aipq.sql(text, spark=spark, home=home)
    finally:
        shutil.move(str(away), str(tmp_path / "api_late"))
    assert Catalog(home).lookup("default.api_first") is not None, "the first statement committed"
    assert aipq.sql(text, spark=spark, home=home, resume=True).rows == [(2,)]


def test_create_or_replace_table_takes_the_querys_columns(spark, home, source_table):
    text = ("create or replace table api_cor as select id from api_src;\n"
            "create or replace table api_cor as select id, id * 2 as twice from api_src where id < 2;\n"
            "select id, twice from api_cor order by id")
    assert aipq.sql(text, spark=spark, home=home).rows == [(0, 0), (1, 2)]
    again = "create or replace table api_cor as select 7 as seven;\nselect * from api_cor"
    with pytest.raises(BadInputError) as raised:  # another workflow's table, as DROP TABLE would be
        aipq.sql(again, spark=spark, home=home)
    assert "CREATE OR REPLACE TABLE" in raised.value.message and "INSERT OVERWRITE" not in raised.value.message
    result = aipq.sql(again, spark=spark, home=home, allow_overwrite=True)
    assert result.columns == ("seven",) and result.rows == [(7,)]


def test_run_file_writes_the_output_and_the_report(spark, home, source_table, tmp_path):
    script = tmp_path / "api_job.sql"
    script.write_text("drop table if exists api_job;\ncreate table api_job as select id from api_src;\n"
                      "select count(*) as n from api_job")
    out, report = tmp_path / "rows.csv", tmp_path / "report.json"
    result = aipq.run_file(script, spark=spark, home=home, output=str(out), report=str(report))
    assert result.rows == [(5,)]
    assert list(csv.reader(out.open())) == [["n"], ["5"]]
    said = json.loads(report.read_text())
    written = [s["written"] for s in said["statements"] if s["written"]]
    assert said["status"] == "succeeded" and written == [{"table": "default.api_job", "mode": "create", "rows": 5}]
    with pytest.raises(BadInputError) as raised:  # the report over the workflow file it runs
        aipq.run_file(script, spark=spark, home=home, report=str(script), force=True)
    assert "same file" in raised.value.message
    with pytest.raises(BadInputError) as raised:  # an existing output needs force, as --output needs --force
        aipq.run_file(script, spark=spark, home=home, output=str(out))
    assert "exists" in raised.value.message
    assert aipq.run_file(script, spark=spark, home=home, output=str(out), force=True).rows == [(5,)]


@pytest.mark.parametrize(("options", "said"), [
    ({"limit": 5}, "display option"), ({"resume": "yes"}, "give True or False"),
    ({"output": "/tmp/x.unknown"}, "cannot tell the format"),
])
def test_run_options_are_checked(spark, home, options, said):
    with pytest.raises(BadInputError) as raised:
        aipq.sql("select 1", spark=spark, home=home, **options)
    assert said in raised.value.message + (raised.value.hint or "")
