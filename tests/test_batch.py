"""Batches (issue 43 item 3): several files, or a directory, run as one command; a stage they have in common is
computed once and read by the others, and each file's rows are the ones it gives alone (DuckDB's)."""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows, parquet_rows, said

from aipq.tpch.queries import query_text


def test_a_batch_computes_a_common_stage_once_and_each_file_gets_its_own_rows(aipq, duck, tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    result = aipq("run", "tpch:3", "tpch:3", "tpch:10", "--output-dir", str(out), "--staging", "hive",
                  "--work-dir", str(work))
    assert result.exit_code == 0, result.output
    text = said(result)
    assert "tpch-q3-2: 10 row(s)" in text and "1 read from the batch's shared outputs" in text
    assert "stage(s) read instead of computed" in text and "batch: 3 file(s)" in text
    for name, number in (("tpch-q3", 3), ("tpch-q3-2", 3), ("tpch-q10", 10)):
        assert_same_rows(parquet_rows(out / f"{name}.parquet"), oracle_rows(duck, query_text(number)), ordered=True)
    assert not (work / "stage-cache").exists(), "the batch's shared outputs go when it completes"


def test_a_batch_query_takes_the_bloom_filter_another_built_on_the_stage_they_share(aipq, duck, tmp_path):
    """Q3 and a Q3 reading other lineitem rows share customer–orders: the second reads it from the batch's
    cache with the Bloom filter of its o_orderkey the first built while writing it, and its lineitem stage
    probes that filter; each file's rows are DuckDB's."""
    later = tmp_path / "q3-later.sql"
    later.write_text(query_text(3).replace("l_shipdate > date '1995-03-15'", "l_shipdate > date '1995-03-20'"))
    out = tmp_path / "out"
    result = aipq("run", "tpch:3", str(later), "--output-dir", str(out), "--staging", "hive", "--ip", "always",
                  "--scan-summaries", "0", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    assert "1 stage(s) read instead of computed with 1 Bloom filter(s) built where they were written" in said(result)
    assert_same_rows(parquet_rows(out / "tpch-q3.parquet"), oracle_rows(duck, query_text(3)), ordered=True)
    assert_same_rows(parquet_rows(out / "q3-later.parquet"), oracle_rows(duck, later.read_text()), ordered=True)


@pytest.mark.slow
def test_a_directory_batch_runs_workflows_and_queries_in_name_order(aipq, duck, tmp_path):
    folder, out = tmp_path / "nightly", tmp_path / "out"
    folder.mkdir()
    (folder / "a_regions.sql").write_text(
        "create or replace table bt_regions as select r_regionkey, r_name from region;\n"
        "select r_name from bt_regions where r_regionkey < 2 order by r_name;\n")
    (folder / "b_count.sql").write_text("select count(*) as n from nation")
    (folder / "notes.txt").write_text("not sql")
    result = aipq("run", str(folder), "--output-dir", str(out), "--format", "csv", "--allow-overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["a_regions.csv", "b_count.csv"]
    assert (out / "a_regions.csv").read_text().split() == ["r_name", "AFRICA", "AMERICA"]
    assert (out / "b_count.csv").read_text().split() == ["n", "25"]


def test_a_batch_refuses_what_does_not_apply_before_running(aipq, tmp_path):
    out = tmp_path / "out"
    missing = aipq("run", "tpch:1", "tpch:6")
    assert missing.exit_code == 2 and "a batch of files needs --output-dir DIR" in said(missing)
    single = aipq("run", "tpch:1", "tpch:6", "--output", str(tmp_path / "x.csv"))
    assert single.exit_code == 2 and "--output does not apply to a batch of files" in said(single)
    out.mkdir()
    (out / "tpch-q6.parquet").write_text("mine")
    exists = aipq("run", "tpch:1", "tpch:6", "--output-dir", str(out))
    assert exists.exit_code == 2 and "tpch-q6.parquet" in said(exists)
    assert (out / "tpch-q6.parquet").read_text() == "mine" and not (out / "tpch-q1.parquet").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = aipq("run", str(empty), "--output-dir", str(out))
    assert nothing.exit_code == 2 and "holds no .sql file" in said(nothing)


@pytest.mark.slow
def test_the_22_tpch_queries_as_one_batch_give_duckdbs_rows(aipq, duck, tmp_path):
    """Shared scans (the tables several queries read, read once and cached) and hive staging's written stages:
    every query's rows are DuckDB's."""
    out = tmp_path / "out"
    result = aipq("run", *(f"tpch:{n}" for n in range(1, 23)), "--output-dir", str(out), "--staging", "hive",
                  "--shared-scans", "on")
    assert result.exit_code == 0, result.output
    assert "table(s) read once for several files" in said(result) and " 0 table(s) read once" not in said(result)
    for number in range(1, 23):
        assert_same_rows(parquet_rows(out / f"tpch-q{number}.parquet"), oracle_rows(duck, query_text(number)),
                         ordered=True)
