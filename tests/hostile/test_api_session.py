"""The Python API on a user's SparkSession, used as a hostile user would (issue 80, items 3, 6 and 11): names resolve
as ``spark.sql`` resolves them on that session, calls from many threads leave the session's settings as they were
(and never show aipq's settings to the user's other threads while they run), and a session aipq cannot run on is
refused in one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import frame_rows

import aipq
from aipq.catalog import Catalog, TableEntry
from aipq.errors import AipqError, BadInputError

# settings aipq's stages set for themselves (``engine/session.stage_sql_conf``), and one the user set
WATCHED = ("spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.enabled",
           "spark.sql.ansi.enabled", "spark.sql.optimizer.runtime.bloomFilter.enabled",
           "spark.sql.optimizer.dynamicPartitionPruning.enabled")


def settings_of(spark) -> dict[str, str | None]:
    return {key: spark.conf.get(key, None) for key in WATCHED}


def registered_table(spark, home: Path, name: str, rows: list[tuple]) -> None:
    """A parquet table in aipq's catalog (not in Spark's), holding ``rows`` of (k int, v string)."""
    path = str(home / "api-tables" / name)
    spark.createDataFrame(rows, "k int, v string").write.mode("overwrite").parquet(path)
    Catalog(home).register(TableEntry("default", name, path, "parquet", (("k", "int"), ("v", "string"))))


# ---- item 3: names resolve as spark.sql resolves them ------------------------------------------------------------

def test_a_temporary_view_shadows_a_catalog_table_of_the_same_name(spark, home):
    registered_table(spark, home, "api_shadowed", [(1, "table")])
    spark.createDataFrame([(2, "view"), (3, "view")], "k int, v string").createOrReplaceTempView("api_shadowed")
    try:
        result = aipq.sql("select k, v from api_shadowed", spark=spark, home=home)
        assert sorted(result.rows) == [(2, "view"), (3, "view")]
        # the catalog table is still aipq's when no view hides it
    finally:
        spark.catalog.dropTempView("api_shadowed")
    assert aipq.sql("select k, v from api_shadowed", spark=spark, home=home).rows == [(1, "table")]


def test_a_global_temporary_view_is_read_as_global_temp_name(spark, home):
    spark.createDataFrame([(7, "g")], "k int, v string").createOrReplaceGlobalTempView("api_gv")
    try:
        query = "select v, count(*) as n from global_temp.api_gv group by v"
        assert aipq.sql(query, spark=spark, home=home).rows == frame_rows(spark.sql(query))
    finally:
        spark.catalog.dropGlobalTempView("api_gv")


def test_unqualified_names_are_in_the_sessions_current_database(spark, home):
    """A table of Spark's own catalog (``saveAsTable``) in the database the session uses, and a temporary view
    beside it: both as ``spark.sql`` reads them."""
    spark.sql("create database if not exists api_db")
    spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string").write.mode("overwrite").saveAsTable("api_db.api_t")
    spark.createDataFrame([(2, "z")], "k int, w string").createOrReplaceTempView("api_beside")
    query = "select t.k, t.v, b.w from api_t t left join api_beside b on t.k = b.k"
    spark.catalog.setCurrentDatabase("api_db")
    try:
        expected = frame_rows(spark.sql(query))
        assert sorted(aipq.sql(query, spark=spark, home=home).rows) == expected == [(1, "a", None), (2, "b", "z")]
    finally:
        spark.catalog.setCurrentDatabase("default")
        spark.catalog.dropTempView("api_beside")
        spark.sql("drop table if exists api_db.api_t")


def test_a_table_of_the_sessions_catalog_is_read(spark, home):
    spark.createDataFrame([(5, "s")], "k int, v string").write.mode("overwrite").saveAsTable("api_saved")
    try:
        assert aipq.sql("select k, v from api_saved", spark=spark, home=home).rows == [(5, "s")]
    finally:
        spark.sql("drop table if exists api_saved")


# ---- item 6: threads never see each other's settings, and the session's stay --------------------------------

def run_from_threads(spark, home: Path, threads: int, calls: int) -> None:
    """``threads`` threads each run ``calls`` queries over a view of their own, the user's own ``spark.sql`` runs
    in another and a reader watches the session's settings: each gets its own rows, the reader never sees a
    setting change, and the settings are as before after."""
    for i in range(threads):
        spark.createDataFrame([(i, j) for j in range(i + 1)], "t int, j int").createOrReplaceTempView(f"api_th{i}")
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # the user's own value, which aipq's stages change
    before = settings_of(spark)
    wrong: list[str] = []
    done = threading.Event()

    def caller(i: int) -> None:
        for _ in range(calls):
            with aipq.sql(f"select t, count(*) as n from api_th{i} group by t", spark=spark, home=home) as result:
                if result.rows != [(i, i + 1)]:
                    wrong.append(f"thread {i} got {result.rows}")

    def users_own() -> None:
        while not done.is_set():
            if frame_rows(spark.sql("select t, count(*) from api_th0 group by t")) != [(0, 1)]:
                wrong.append("the user's spark.sql got other rows")

    def reader() -> None:
        while not done.is_set():
            seen = settings_of(spark)
            if seen != before:
                wrong.append(f"a reader saw {seen}")
                return

    others = [threading.Thread(target=users_own), threading.Thread(target=reader)]
    callers = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    try:
        for thread in others + callers:
            thread.start()
        for thread in callers:
            thread.join()
    finally:
        done.set()
        for thread in others:
            thread.join()
        spark.conf.unset("spark.sql.shuffle.partitions")
        for i in range(threads):
            spark.catalog.dropTempView(f"api_th{i}")
    assert not wrong, wrong[:5]
    assert {**settings_of(spark), "spark.sql.shuffle.partitions": "3"} == before


def test_two_threads_calls_leave_the_sessions_settings(spark, home):
    run_from_threads(spark, home, threads=2, calls=2)


@pytest.mark.slow
def test_four_threads_of_twenty_calls_leave_the_sessions_settings(spark, home):
    run_from_threads(spark, home, threads=4, calls=20)


def test_the_calling_threads_job_group_is_given_back(spark, home):
    context = spark.sparkContext
    context.setJobGroup("users-group", "the user's jobs")
    try:
        assert aipq.sql("select 1 as one", spark=spark, home=home).rows == [(1,)]
        assert context.getLocalProperty("spark.jobGroup.id") == "users-group"
        assert context.getLocalProperty("spark.job.description") == "the user's jobs"
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


# ---- item 11: a session or home aipq cannot use is refused in one line ----------------------------------------

def test_a_home_that_is_a_file_is_refused(spark, tmp_path):
    home = tmp_path / "home"
    home.write_text("not a folder")
    with pytest.raises(BadInputError) as raised:
        aipq.sql("select 1", spark=spark, home=home)
    assert "is a file, not a folder" in raised.value.message


def test_something_else_given_as_the_session_is_refused(home):
    with pytest.raises(BadInputError) as raised:
        aipq.sql("select 1", spark="local[2]", home=home)
    assert "must be a SparkSession, not str" in raised.value.message


_SESSIONS_SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import aipq
    from aipq.errors import AipqError

    home = sys.argv[1]
    said = {}

    def attempt(name, **kwargs):
        try:
            said[name] = ["rows", aipq.sql("select 1 as one", home=home, **kwargs).rows]
        except AipqError as error:
            said[name] = [type(error).__name__, error.message, error.hint]
        except Exception as error:
            said[name] = ["unclear", f"{type(error).__name__}: {error}"]

    plain = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    attempt("running without aipq's jar")
    attempt("given without aipq's jar", spark=plain)
    plain.stop()
    attempt("given and stopped", spark=plain)
    print(json.dumps(said))
""")


@pytest.mark.slow
def test_a_session_without_aipqs_jar_or_stopped_is_refused_clearly(tmp_path):
    """In a process of its own (its Spark session has no aipq jar): no TypeError 'JavaPackage' or AttributeError,
    but one line that says what to do."""
    ran = subprocess.run([sys.executable, "-c", _SESSIONS_SCRIPT, str(tmp_path / "home")], capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    for case in ("running without aipq's jar", "given without aipq's jar"):
        kind, message, hint = said[case]
        assert kind == "EnvironmentProblem" and "without aipq's jar" in message, said
        assert "aipq.spark_conf()" in hint
    kind, message, _ = said["given and stopped"]
    assert kind == "BadInputError" and "was stopped" in message, said
    assert issubclass(BadInputError, AipqError)
