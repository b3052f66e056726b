"""What ``aipq.sql`` gives back is read lazily (issue 80, item 13): nothing of the result is collected into Python
until ``Result.rows`` is read, ``Result.dataframe`` reads the result's files, and those files stay until the
Result is closed (or the process ends)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from pyspark.sql import DataFrame

import aipq
from aipq.api import Result


@pytest.fixture
def collected(spark, monkeypatch) -> list[int]:
    """The number of rows each ``DataFrame.collect`` of this test returned (the classic session's DataFrame class,
    which has its own ``collect``)."""
    counts: list[int] = []
    frames = type(spark.range(0))
    assert issubclass(frames, DataFrame)
    collect = frames.collect

    def counting(self):
        rows = collect(self)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(frames, "collect", counting)
    return counts


# The result files these tests check are aipq's plan's (a query handed to Spark hands back Spark's DataFrame, no
# files: tests/test_handoff.py), so they run aipq's plan, over more rows than it collects with its run
# (``workflow.query.COLLECTED_ROWS``; a small result comes back as rows: tests/test_api.py).
LINES = "select l_orderkey, l_linenumber from lineitem"

def test_the_rows_are_collected_only_when_read(spark, home, tpch, collected):
    result = aipq.sql(LINES, spark=spark, home=home, handoff="off")
    total = result.run["result_rows"]
    assert total > 1000 and max(collected, default=0) < total, "the result went through Python"
    assert result.dataframe.inputFiles(), "the DataFrame reads the result's files"
    assert result.dataframe.count() == total and max(collected, default=0) < total
    assert len(result.rows) == total and max(collected) == total
    result.close()


def test_the_results_files_stay_until_it_is_closed(spark, home, tpch):
    result = aipq.sql(LINES, spark=spark, home=home, handoff="off")
    derived = result.dataframe.where("l_linenumber = 1")
    aipq.sql("select 1 as one", spark=spark, home=home).close()  # another run: it cleans stale work directories
    firsts = derived.count()
    assert 0 < firsts < len(result.rows) == result.run["result_rows"]
    result.close()
    assert len(result.rows) == result.run["result_rows"], "rows read before close stay"
    with pytest.raises(Exception):  # noqa: B017, PT011 — Spark's error for files that are gone
        result.dataframe.collect()
    with aipq.sql(LINES, spark=spark, home=home, handoff="off") as scoped:
        files = scoped.dataframe.inputFiles()
    from pathlib import Path

    assert files and not any(Path(f.removeprefix("file:")).exists() for f in files)


def test_a_result_wraps_any_dataframe_lazily(spark, collected):
    wrapped = Result(("a",), spark.range(3).toDF("a"), {})
    assert not collected
    assert wrapped.rows == [(0,), (1,), (2,)] and collected == [3]


_SMALL_DRIVER_SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import aipq

    folder = sys.argv[1]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config(map={**aipq.spark_conf(), "spark.driver.maxResultSize": "64k"}).getOrCreate())
    spark.range(20000).selectExpr("id", "sha2(cast(id as string), 256) as note") \\
        .write.parquet(folder + "/padded")
    spark.read.parquet(folder + "/padded").createOrReplaceTempView("padded")
    result = aipq.sql("select id, note from padded order by id limit 5000", spark=spark, home=folder + "/home",
                      handoff="off")
    last = list(result.run["stages"].values())[-1]
    print(json.dumps({"bytes_written": last["bytes_written"], "rows_written": last["rows_written"],
                      "counted": result.dataframe.count()}))
""")


@pytest.mark.slow
def test_a_result_past_the_drivers_limit_is_written_instead_of_collected(tmp_path):
    """A LIMIT 5000 result is small enough to collect by its bound, but its 5,000 rows pass the session's
    ``spark.driver.maxResultSize`` (64 KB, set when the session starts, so in a process of its own): Spark fails the
    collect, and the last stage runs again, written, as a larger result would be."""
    ran = subprocess.run([sys.executable, "-c", _SMALL_DRIVER_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    assert said["rows_written"] == said["counted"] == 5000 and said["bytes_written"] > 0, said
