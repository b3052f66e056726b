"""A PySpark program's temporary views over parquet files (``spark.read.parquet(path).createOrReplaceTempView``):
read by their names as ``spark.sql`` reads them, and known by their files (their size, statistics and cache
fingerprints those files') only while the files Spark listed for the view are the files there
(``engine/session_tables.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import frame_rows

import aipq
from aipq.api import _context
from aipq.config import Settings
from aipq.errors import BadInputError
from aipq.tpch.queries import query_text

Q2_TABLES = ("part", "supplier", "partsupp", "nation", "region")


def resolved(spark, home: Path, name: str):
    context, _ = _context(spark, home, Settings())
    return context.catalog.lookup(f"default.{name}")


@pytest.fixture
def folder_view(spark, tmp_path):
    """A view ``sv_keys`` over a folder of two parquet files of (k int, v string); dropped after the test."""
    folder = str(tmp_path / "keys")
    spark.createDataFrame([(i, f"v{i % 3}") for i in range(20)], "k int, v string").repartition(2) \
        .write.parquet(folder)
    spark.read.parquet(folder).createOrReplaceTempView("sv_keys")
    yield folder
    spark.catalog.dropTempView("sv_keys")


def test_a_view_of_parquet_files_is_read_by_name_and_known_by_its_files(spark, home, folder_view):
    entry = resolved(spark, home, "sv_keys")
    assert entry.source == "view" and entry.path == folder_view and entry.spark_name == "sv_keys"
    query = "select v, count(*) as n, sum(k) as s from sv_keys where k > 3 group by v"
    assert sorted(aipq.sql(query, spark=spark, home=home).rows) == frame_rows(spark.sql(query))


def test_a_global_view_of_parquet_files_is_read_as_global_temp_name(spark, home, folder_view):
    spark.read.parquet(folder_view).createOrReplaceGlobalTempView("sv_global")
    try:
        context, _ = _context(spark, home, Settings())
        entry = context.catalog.lookup("global_temp.sv_global")
        assert entry.source == "view" and entry.path == folder_view and entry.spark_name == "global_temp.sv_global"
        query = "select v, count(*) as n from global_temp.sv_global group by v"
        assert sorted(aipq.sql(query, spark=spark, home=home).rows) == frame_rows(spark.sql(query))
    finally:
        spark.catalog.dropGlobalTempView("sv_global")


def test_a_view_whose_files_changed_since_it_was_made_is_a_name_alone(spark, home, folder_view):
    spark.createDataFrame([(100, "new")], "k int, v string").write.mode("append").parquet(folder_view)
    entry = resolved(spark, home, "sv_keys")
    assert entry.source == "spark" and entry.spark_name == "sv_keys"
    query = "select count(*) as n, max(k) as top from sv_keys"
    assert aipq.sql(query, spark=spark, home=home).rows == frame_rows(spark.sql(query)) == [(20, 19)]


def test_a_view_that_does_more_than_read_files_is_a_name_alone(spark, home, folder_view):
    spark.read.parquet(folder_view).where("k < 5").createOrReplaceTempView("sv_some")
    spark.read.option("mergeSchema", "true").parquet(folder_view).createOrReplaceTempView("sv_merged")
    try:
        assert resolved(spark, home, "sv_some").source == "spark"
        assert resolved(spark, home, "sv_merged").source == "spark"
        assert aipq.sql("select count(*) from sv_some", spark=spark, home=home).rows == [(5,)]
    finally:
        spark.catalog.dropTempView("sv_some")
        spark.catalog.dropTempView("sv_merged")


def test_writing_into_a_view_of_files_is_refused_clearly(spark, home, folder_view):
    with pytest.raises(BadInputError) as raised:
        aipq.sql("insert into sv_keys select 1, 'x'", spark=spark, home=home)
    assert "sv_keys is a temporary view of the session" in raised.value.message
    assert frame_rows(spark.sql("select count(*) from sv_keys")) == [(20,)]


def test_views_over_the_catalogs_files_plan_as_its_tables(spark, home, tpch, tpch_statistics):
    """A user's views named as the TPC-H tables, over the same files: aipq plans as it does for the catalog's
    tables, from their statistics, rather than for tables it knows nothing of."""
    for name in Q2_TABLES:  # another test's views of these names would hide the catalog's tables
        spark.catalog.dropTempView(name)
    with_tables = plan_facts(spark, home)
    expected = aipq.sql(query_text(2), spark=spark, home=home).rows
    for name in Q2_TABLES:
        spark.read.parquet(tpch.lookup(f"default.{name}").path).createOrReplaceTempView(name)
    try:
        assert plan_facts(spark, home) == with_tables
        assert aipq.sql(query_text(2), spark=spark, home=home).rows == expected
    finally:
        for name in Q2_TABLES:
            spark.catalog.dropTempView(name)


def plan_facts(spark, home: Path) -> tuple:
    """What Q2's plan knows and decides: each table's statistics, each stage's estimated rows and summaries, and
    whether it is handed to Spark."""
    found = aipq.explain(query_text(2), spark=spark, home=home, format="json")
    known = sorted((t["table"], t["path"], t["table_statistics"]) for t in found["statistics"])
    stages = [(s["estimated_rows"], s["estimated_from"], len(s["information_passing"]["builds"]))
              for s in found["stages"]]
    return known, stages, (found["handoff"] or {}).get("chosen")
