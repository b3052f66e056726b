"""The stage-output cache (issue 43 item 1): an exact stage output kept under its subplan and the fingerprints of
the files under it is read instead of computed — by the command that kept it, by later commands with --reuse,
and by --resume after a kill — with the rows of a run that computes everything; changed files invalidate it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import Aipq, assert_same_rows, oracle_rows, said

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.engine.stage_cache import StageCache
from aipq.engine.storage import local_storage
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text

HIVE = ("--staging", "hive")


def cached(aipq, work: Path) -> list[dict]:
    shown = aipq("cache", "show", "--json", "--work-dir", str(work))
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)["entries"]


def csv_rows(result) -> list[tuple]:
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()[1:]
    return [tuple(line.split(",")) for line in lines]


def as_text(rows: list[tuple]) -> list[tuple]:
    return [tuple(str(v) if isinstance(v, int) else v for v in row) for row in rows]


def test_a_rerun_with_reuse_reads_the_kept_stages_and_gives_the_same_rows(aipq, duck, tmp_path):
    work = tmp_path / "work"
    options = ("--format", "csv", "--work-dir", str(work), "--reuse", *HIVE)
    first = aipq("run", "tpch:3", *options)
    kept = cached(aipq, work)
    assert kept and all(e["rows"] > 0 and e["tables"] for e in kept), kept
    again = aipq("run", "tpch:3", "--analyze", *options)
    assert "reused from the stage-output cache" in said(again)
    expected = as_text(oracle_rows(duck, query_text(3)))
    assert_same_rows(csv_rows(first), expected, ordered=True)
    assert_same_rows(csv_rows(again), expected, ordered=True)
    assert {e["key"] for e in cached(aipq, work)} == {e["key"] for e in kept}, "--reuse keeps them for later"
    cleared = aipq("cache", "clear", "--work-dir", str(work))
    assert cleared.exit_code == 0 and f"removed {len(kept)} cached stage output(s)" in said(cleared)
    assert cached(aipq, work) == []


@pytest.mark.slow
@pytest.mark.parametrize(("ip", "later_bloom"), [("always", None), ("always", "512KB"), ("hip", None)],
                         ids=["offered", "other-size", "hash-list"])
def test_a_reused_stage_has_the_summary_a_later_stage_probes_with(aipq, duck, tmp_path, ip, later_bloom):
    """Q3's customer–orders stage, kept by one query and reused by another that reads lineitem differently: the
    Bloom filter of its o_orderkey that the first query built is taken from the cache entry, or, asked for at a
    size far from the kept one's (or as HIP's hash list), built again from the cached output; the new lineitem
    stage probes it."""
    work = tmp_path / "work"
    options = ("--work-dir", str(work), "--reuse", "--ip", ip, "--scan-summaries", "0",
               "--broadcast-threshold", "0", *HIVE)
    assert aipq("run", "tpch:3", "--format", "csv", *options).exit_code == 0
    later = tmp_path / "q3-later.sql"
    later.write_text(query_text(3).replace("l_shipdate > date '1995-03-15'", "l_shipdate > date '1995-03-20'"))
    sized = ("--bloom-size", later_bloom) if later_bloom else ()
    result = aipq("explain", str(later), "--analyze", "--format", "json", *options, *sized)
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    measured = [stage["measured"] for stage in info["stages"]]
    reused = [stage for stage in measured if stage["reused"]]
    assert reused and any(stage["summaries"] for stage in reused), reused
    offered = {summary["offered"] for stage in reused for summary in stage["summaries"]}
    assert offered == {ip == "always" and later_bloom is None}, reused
    probed = [probe for stage in measured if not stage["reused"] for probe in stage["probes"]]
    producers = {summary["stage"] for stage in reused for summary in stage["summaries"]}
    assert any(probe["producer"] in producers and probe["rows_out"] < probe["rows_in"] for probe in probed), probed
    assert info["run"]["result_rows"] == len(oracle_rows(duck, later.read_text()))


def test_keep_work_keeps_the_outputs_moved_into_the_cache_too(aipq, tmp_path):
    work = tmp_path / "work"
    result = aipq("run", "tpch:3", "--quiet", "--keep-work", "--work-dir", str(work), *HIVE)
    assert result.exit_code == 0, result.output
    kept = cached(aipq, work)
    assert kept and "in the stage-output cache" in said(result), said(result)
    assert all(Path(entry["path"]).is_dir() for entry in kept)
    assert aipq("cache", "clear", "--work-dir", str(work)).exit_code == 0


def test_without_reuse_a_command_reads_only_what_it_kept_and_removes_it(aipq, duck, tmp_path):
    work = tmp_path / "work"
    earlier = aipq("run", "tpch:3", "--quiet", "--work-dir", str(work), "--reuse", *HIVE)
    assert earlier.exit_code == 0, earlier.output
    left = cached(aipq, work)
    alone = aipq("run", "tpch:3", "--analyze", "--work-dir", str(work), *HIVE)
    assert alone.exit_code == 0 and "reused from the stage-output cache" not in said(alone)
    assert cached(aipq, work) == left, "another command's entries are neither read nor removed"

    own = tmp_path / "own"
    script = tmp_path / "twice.sql"
    script.write_text(f"set aipq.staging=hive;\n{query_text(3).rstrip().rstrip(';')};\n"
                      f"{query_text(3).rstrip().rstrip(';')};\n")
    out = tmp_path / "twice.csv"
    workflow = aipq("run", str(script), "--work-dir", str(own), "--output", str(out))
    assert workflow.exit_code == 0, workflow.output
    assert cached(aipq, own) == [] and not (own / "stage-cache").exists(), "a completed command removes its own"
    rows = [tuple(line.split(",")) for line in out.read_text().strip().splitlines()[1:]]
    assert_same_rows(rows, as_text(oracle_rows(duck, query_text(3))), ordered=True)


@pytest.mark.slow
def test_a_workflows_later_statement_reads_the_stage_an_earlier_one_kept(aipq, tmp_path):
    work = tmp_path / "work"
    script = tmp_path / "twice.sql"
    select = query_text(3).rstrip().rstrip(";")
    script.write_text(f"set aipq.staging=hive;\ncreate or replace table sc_first as {select};\n"
                      f"create or replace table sc_second as {select};\n")
    done = aipq("run", str(script), "--work-dir", str(work), "--reuse", "--allow-overwrite")
    assert done.exit_code == 0, done.output
    entries = cached(aipq, work)
    assert entries and all(e["used"] > e["created"] for e in entries), "the second statement read each one"
    first, second = (duckdb.connect().execute(f"SELECT * FROM read_parquet('{Catalog(aipq.home).lookup(name).path}"
                                              "/**/*.parquet')").fetchall()
                     for name in ("default.sc_first", "default.sc_second"))
    assert sorted(first) == sorted(second) and first


@pytest.mark.slow
def test_a_changed_table_file_invalidates_the_outputs_built_on_it(tmp_path, home, tpch):
    aipq = Aipq(tmp_path / "fresh")
    work = tmp_path / "work"
    data = tmp_path / "data"
    data.mkdir()
    con = duckdb.connect()
    for name in ("nation", "region"):
        source = Catalog(home).lookup(f"default.{name}").path
        con.execute(f"COPY (SELECT * FROM read_parquet('{source}')) TO '{data / name}.parquet'")
        assert aipq("table", "add", name, str(data / f"{name}.parquet")).exit_code == 0
    sql = ("select r_name, count(*) as n from nation join region on n_regionkey = r_regionkey "
           "group by r_name order by r_name")
    options = ("--format", "csv", "--work-dir", str(work), "--reuse", "--broadcast-threshold", "0", *HIVE)
    assert csv_rows(aipq("run", "--sql", sql, *options))[0] == ("AFRICA", "5")
    kept = cached(aipq, work)
    assert kept
    con.execute(f"COPY (SELECT * FROM read_parquet('{data}/nation.parquet') WHERE n_nationkey <> 0) "
                f"TO '{data}/nation2.parquet'")
    os.replace(data / "nation2.parquet", data / "nation.parquet")  # ALGERIA (AFRICA) is gone
    changed = aipq("run", "--sql", sql, "--analyze", *options)
    assert "reused from the stage-output cache" not in said(changed)
    assert csv_rows(changed)[0] == ("AFRICA", "4")
    now = cached(aipq, work)
    assert not {e["key"] for e in kept} & {e["key"] for e in now}, "entries over the old file are gone"
    assert len(now) == len(kept)


def test_a_subplan_with_a_non_deterministic_function_is_never_cached(tpch, tmp_path):
    storage = local_storage()
    cache = StageCache(storage, str(tmp_path / "cache"), 1 << 30)
    settings = Settings(staging="hive", broadcast_threshold=0)
    for sql, cacheable in [("select n_name, count(*) from nation join region on n_regionkey = r_regionkey "
                            "where rand() < 2 group by n_name", False),
                           ("select n_name, count(*) from nation join region on n_regionkey = r_regionkey "
                            "group by n_name", True)]:
        dag = plan_query(sql, tpch, settings, storage).dag
        below = [s for s in dag.stages if s is not dag.final and s.operator != "SCAN"]
        assert below, sql
        assert all((cache.key(dag, s.id, settings) is not None) == cacheable for s in below), sql


@pytest.mark.slow
def test_resume_reads_the_stages_a_killed_statement_finished(aipq, home, tmp_path, duck):
    """Killed between two stages of a statement: --resume reads the finished stage from the cache (the entry the
    killed command kept is read, then removed with the resumed command's) and gives the uninterrupted rows."""
    work = tmp_path / "work"
    select = query_text(3).rstrip().rstrip(";")
    script = tmp_path / "killed.sql"
    script.write_text(f"set aipq.staging=hive;\ncreate or replace table sc_killed as {select};\n")
    env = {**os.environ, "AIPQ_HOME": str(home), "AIPQ_KILL_AT": "between-stages@2"}
    killed = subprocess.run([sys.executable, "-m", "aipq.cli.main", "run", str(script), "--quiet", "--work-dir",
                             str(work), "--allow-overwrite"], env=env, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = cached(aipq, work)
    assert left, "the killed command's finished stages stay for --resume"
    resumed = aipq("run", str(script), "--resume", "--work-dir", str(work), "--allow-overwrite")
    assert resumed.exit_code == 0, resumed.output
    assert cached(aipq, work) == [], "read by the resumed command, and removed with its own when it completed"
    path = Catalog(home).lookup("default.sc_killed").path
    rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{path}/**/*.parquet')").fetchall()
    assert_same_rows(rows, oracle_rows(duck, query_text(3)), ordered=False)
