"""The Python API (issue 58): ``aipq.sql`` and ``aipq.explain`` on the caller's own SparkSession, over the run path
of ``aipq run``: its temporary views and UDFs are what the query reads, and its settings are as they were after."""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows

import aipq
from aipq.errors import BadInputError
from aipq.tpch.queries import query_text

WATCHED = ("spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.enabled",
           "spark.sql.ansi.enabled", "spark.sql.optimizer.runtime.bloomFilter.enabled")


def test_a_query_reads_the_sessions_temporary_view_and_udf_and_leaves_its_settings(spark, home, tpch):
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "k int, v string").createOrReplaceTempView("api_tv")
    spark.udf.register("api_plus_one", lambda x: x + 1, "int")
    before = {key: spark.conf.get(key, None) for key in WATCHED}
    finished = []
    result = aipq.sql("select v, sum(api_plus_one(k)) as s from api_tv group by v order by v", spark=spark,
                      home=home, staging="hive", progress=finished.append)
    assert result.columns == ("v", "s") and result.rows == [("a", 6), ("b", 3)]
    assert [tuple(r) for r in result.dataframe.collect()] == result.rows
    assert list(result.to_pandas()["s"]) == [6, 3]
    assert result.run["result_rows"] == 2 and len(finished) == len(result.run["stages"]) >= 2
    # Spark's shuffle figures are read once when the run ends, into the metrics progress was told of
    assert any(m.shuffle.shuffle_write_records > 0 for m in finished)
    assert any(s["shuffle"]["shuffle_write_records"] > 0 for s in result.run["stages"].values())
    assert {key: spark.conf.get(key, None) for key in WATCHED} == before


@pytest.mark.slow
def test_a_tpch_query_gives_duckdbs_rows_through_the_api(spark, home, duck):
    result = aipq.sql(query_text(3), spark=spark, home=home, ip="always", broadcast_threshold="0")
    assert_same_rows(result.rows, oracle_rows(duck, query_text(3)), ordered=True)
    assert any(stage["probes"] for stage in result.run["stages"].values()), "information passing ran"


def test_a_small_result_of_aipqs_plan_comes_back_as_rows_not_files(spark, home, duck):
    """Q3's LIMIT 10 bounds its result: its last stage sends the rows to the driver and writes no files, and
    the DataFrame made from them has the result's names and Spark's types."""
    result = aipq.sql(query_text(3), spark=spark, home=home, ip="always", broadcast_threshold="0")
    assert result.run["handoff"] is None
    final = list(result.run["stages"].values())[-1]
    assert final["rows_written"] == 10 and final["bytes_written"] == 0
    assert_same_rows(result.rows, oracle_rows(duck, query_text(3)), ordered=True)
    frame = result.dataframe
    with aipq.sql(query_text(3), spark=spark, home=home, ip="always", broadcast_threshold="0",
                  keep_work=True) as written:  # kept work: its result is written, read back from its files
        assert list(written.run["stages"].values())[-1]["bytes_written"] > 0
        assert frame.schema == written.dataframe.schema
    assert frame.columns == list(result.columns)
    assert [tuple(row) for row in frame.collect()] == result.rows
    result.close()
    assert result.dataframe.count() == 10, "made from the rows: no files to lose"


def test_a_result_larger_than_the_driver_takes_is_written_after_all(spark, home, tpch, monkeypatch):
    """Spark fails a job whose results pass ``spark.driver.maxResultSize``; a result aipq chose to collect is
    then written and read back as any other. Injected (``AIPQ_FAIL_AT``): a running session's limit is fixed."""
    monkeypatch.setenv("AIPQ_FAIL_AT", "result-size")
    monkeypatch.setattr("aipq.faults._reached", {})
    result = aipq.sql(query_text(3), spark=spark, home=home, ip="always", broadcast_threshold="0")
    final = list(result.run["stages"].values())[-1]
    assert final["rows_written"] == 10 and final["bytes_written"] > 0
    assert len(result.rows) == 10 and result.dataframe.count() == 10


def test_a_run_frees_its_bloom_filters_broadcasts_when_it_ends(spark, home, tpch, monkeypatch):
    from aipq.engine import jvm

    made = []
    broadcast = jvm.bloom_broadcast
    monkeypatch.setattr(jvm, "bloom_broadcast", lambda *args: made.append(broadcast(*args)) or made[-1])
    result = aipq.sql(query_text(3), spark=spark, home=home, ip="always", broadcast_threshold="0")
    assert any(stage["probes"] for stage in result.run["stages"].values()) and made
    assert not any(b.isValid() for b in made)  # destroyed: their blocks gone from the driver and the executors


def test_a_workflow_text_runs_and_its_last_select_is_the_result(spark, home, tpch):
    result = aipq.sql("create temporary view api_eu as select n_nationkey from nation where n_regionkey = 3;\n"
                      "select count(*) as n from api_eu", spark=spark, home=home)
    assert result.rows == [(5,)]
    assert aipq.sql("create temporary view api_x as select 1 as a", spark=spark, home=home) is None


@pytest.mark.slow
def test_explain_gives_the_tree_or_its_json(spark, home, tpch):
    tree = aipq.explain(query_text(5), spark=spark, home=home, ip="hip", broadcast_threshold="0")
    assert "S1" in tree and "stage(s)" in tree
    info = aipq.explain(query_text(5), spark=spark, home=home, format="json", ip="hip")
    assert info["settings"]["ip"]["value"] == "hip" and info["stages"]


@pytest.mark.parametrize(("options", "said"), [
    ({"ipp": "x"}, "unknown option 'ipp'"), ({"ip": "magic"}, "is not one of"),
    ({"broadcast_threshold": "lots"}, "is not a size"),
])
def test_options_are_checked_as_the_command_line_checks_them(spark, home, options, said):
    with pytest.raises(BadInputError) as raised:
        aipq.sql("select 1", spark=spark, home=home, **options)
    assert said in raised.value.message


def test_the_settings_a_session_needs_name_aipqs_jar_and_extension():
    conf = aipq.spark_conf()
    assert conf["spark.jars"].endswith(".jar") and "SketchBatches" in conf["spark.sql.extensions"]


@pytest.mark.slow
def test_a_scheduler_reads_the_runs_report(aipq, tmp_path):
    """``aipq run --report FILE``: each statement's outcome with its query's stages and the table it wrote, and
    the last SELECT's run, as JSON a scheduler can log and check."""
    import json

    script = tmp_path / "nightly.sql"
    script.write_text("drop table if exists api_nightly;\n"
                      "create table api_nightly as\n"
                      "  select n_regionkey, count(*) as n from nation group by n_regionkey;\n"
                      "select sum(n) as total from api_nightly;\n")
    report = tmp_path / "run.json"
    done = aipq("run", str(script), "--report", str(report), "--quiet", "--format", "csv")
    assert done.exit_code == 0, done.output
    found = json.loads(report.read_text())
    written = [s["written"] for s in found["statements"] if s["written"]]
    assert written == [{"table": "default.api_nightly", "mode": "create", "rows": 5}]
    assert found["result"]["result_rows"] == 1 and found["result"]["stages"]
    stage = next(iter(found["result"]["stages"].values()))
    assert {"rows_written", "bytes_written", "seconds"} <= set(stage)
    refused = aipq("run", str(script), "--report", str(tmp_path / "missing" / "run.json"))
    assert refused.exit_code == 2 and "--report" in refused.output
