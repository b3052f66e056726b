"""The stage-output cache serves an output only when everything that decides its rows is the same (issue 55): for
each input of a stage's rows — table files, partition locations, how a table is read (format, options, schema),
the session's settings, the query text, aipq's own code — changing that one input makes ``--reuse`` compute the
stage again, with the rows a run without the cache gives. A damaged entry is computed again, not served, and
``aipq cache clear`` leaves the entries a running command uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import Aipq, said

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.engine import stage_cache
from aipq.engine.processes import process_start
from aipq.engine.stage_cache import USED_FILE, StageCache
from aipq.engine.storage import local_storage
from aipq.pipeline import plan_query

REUSE = ("--staging", "hive", "--broadcast-threshold", "0", "--reuse", "--analyze")
REUSED = "reused from the stage-output cache"


class CachedRuns:
    """Runs one query through the CLI with ``--reuse`` in a work directory of its own, and without the cache."""

    def __init__(self, aipq: Aipq, tmp_path: Path, sql: str, *options: str):
        self.aipq, self.tmp_path, self.sql, self.options = aipq, tmp_path, sql, options
        self.work = tmp_path / "work"
        self.runs = 0

    def run(self, *more: str, cache: bool = True) -> tuple[list[tuple], bool]:
        """The rows (as DuckDB reads the parquet written) and whether a stage came from the cache."""
        self.runs += 1
        out = self.tmp_path / f"out-{self.runs}.parquet"
        cache_options = ("--work-dir", str(self.work), *REUSE) if cache else ("--cache-size", "0")
        result = self.aipq("run", "--sql", self.sql, "--output", str(out), *cache_options, *self.options, *more)
        assert result.exit_code == 0, result.output
        rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
        return rows, REUSED in said(result)

    def entries(self) -> list[Path]:
        return [p for p in (self.work / "stage-cache").iterdir() if p.is_dir()]


def _reused_then_changed(runs: CachedRuns, change) -> None:
    """The query twice (the second served from the cache), then ``change()`` and once more: computed again,
    with the rows of a run without the cache."""
    first, _ = runs.run()
    again, reused = runs.run()
    assert reused and again == first, "the unchanged rerun reads the cache"
    change()
    after, reused = runs.run()
    assert not reused, "a changed input computes the stage again"
    assert after == runs.run(cache=False)[0]


@pytest.mark.slow
def test_a_text_tables_delimiter_is_part_of_the_key(aipq, tmp_path):
    folder = tmp_path / "e"
    folder.mkdir()
    (folder / "part-0").write_text("1,2|3\n1,5|6\n4,2|3\n")
    create = ("create external table {name} (a string, b string) row format delimited fields terminated by '{sep}' "
              "stored as textfile location '{folder}'")
    assert aipq("run", "--sql", "create database if not exists trust").exit_code == 0
    assert aipq("run", "--sql", create.format(name="trust.ct_text", sep=",", folder=folder)).exit_code == 0
    runs = CachedRuns(aipq, tmp_path, "select a, count(*) as n from trust.ct_text group by a order by a")

    def new_delimiter():
        assert aipq("run", "--sql", "drop table trust.ct_text", "--allow-overwrite").exit_code == 0
        assert aipq("run", "--sql", create.format(name="trust.ct_text", sep="|", folder=folder)).exit_code == 0

    assert runs.run(cache=False)[0] == [("1", 2), ("4", 1)]
    _reused_then_changed(runs, new_delimiter)
    assert runs.run(cache=False)[0] == [("1,2", 1), ("1,5", 1), ("4,2", 1)]


def test_a_tables_schema_is_part_of_the_key(aipq, tmp_path):
    data = tmp_path / "s.parquet"
    duckdb.connect().execute(f"COPY (SELECT range % 3 AS k, CAST(range AS INTEGER) AS v FROM range(10)) TO '{data}'")
    assert aipq("table", "add", "trust.ct_schema", str(data)).exit_code == 0
    runs = CachedRuns(aipq, tmp_path, "select k, sum(v) as s from trust.ct_schema group by k order by k")

    def new_schema():
        entry = Catalog(aipq.home).lookup("trust.ct_schema")
        columns = tuple((name, "bigint" if name == "v" else kind) for name, kind in entry.columns)
        Catalog(aipq.home).register(entry.__class__(**{**entry.__dict__, "columns": columns}))

    _reused_then_changed(runs, new_schema)


@pytest.mark.slow
def test_a_partition_outside_the_tables_folder_is_fingerprinted(aipq, tmp_path):
    """ALTER TABLE … ADD PARTITION … LOCATION elsewhere: the query reads it (whole-table queries too), and
    rewriting its file makes the cached stage stale."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 7 AS a, 'x' AS b) TO '{elsewhere}/f.parquet'")
    assert aipq("run", "--sql", "create database if not exists trust").exit_code == 0
    script = tmp_path / "ep.sql"
    script.write_text(f"""
        create table trust.ct_ep (a int, b string) partitioned by (d int) stored as parquet;
        insert into trust.ct_ep partition (d = 1) select 1, 'one';
        alter table trust.ct_ep add partition (d = 2) location '{elsewhere}';
    """)
    assert aipq("run", str(script)).exit_code == 0
    runs = CachedRuns(aipq, tmp_path, "select d, count(*) as n, sum(a) as s from trust.ct_ep group by d order by d")
    assert runs.run(cache=False)[0] == [(1, 1, 1), (2, 1, 7)]

    def rewrite_the_outside_partition():
        time.sleep(0.01)
        con.execute(f"COPY (SELECT * FROM (VALUES (8, 'y'), (9, 'z')) t(a, b)) TO '{elsewhere}/f.parquet'")

    _reused_then_changed(runs, rewrite_the_outside_partition)
    assert runs.run(cache=False)[0] == [(1, 1, 1), (2, 2, 17)]


def test_the_sessions_time_zone_is_part_of_the_key(aipq, tmp_path, spark):
    """The session's time zone (by default the JVM's, from TZ) changes what hour(from_unixtime(…)) gives."""
    runs = CachedRuns(aipq, tmp_path, "select hour(from_unixtime(o_orderkey * 3600)) as h, count(*) as n "
                                      "from orders where o_orderkey < 10 "
                                      "group by hour(from_unixtime(o_orderkey * 3600)) order by h")
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        _reused_then_changed(runs, lambda: spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata"))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_a_setting_that_changes_results_is_part_of_the_key(aipq, tmp_path):
    runs = CachedRuns(aipq, tmp_path, "select n_regionkey, count(*) as n from nation group by n_regionkey "
                                      "order by n_regionkey")
    first, _ = runs.run()
    assert runs.run()[1]
    assert runs.run("--conf", "spark.sql.shuffle.partitions=3")[1], "a setting of speed only keeps the key"
    assert not runs.run("--conf", "spark.sql.legacy.timeParserPolicy=LEGACY")[1]


def test_the_query_text_and_aipqs_code_are_part_of_the_key(tpch, tmp_path, monkeypatch):
    storage = local_storage()
    cache = StageCache(storage, str(tmp_path / "cache"), 1 << 30)
    settings = Settings(staging="hive", broadcast_threshold=0)

    def key(sql: str) -> str:
        dag = plan_query(sql, tpch, settings, storage).dag
        stage = next(s for s in dag.stages if s is not dag.final and s.operator != "SCAN")
        found = cache.key(dag, stage.id, settings)
        assert found is not None
        return found.key

    sql = "select n_regionkey, count(*) from nation where n_nationkey > {} group by n_regionkey order by 1"
    assert key(sql.format(3)) == key(sql.format(3))
    assert key(sql.format(3)) != key(sql.format(4))
    before = key(sql.format(3))
    monkeypatch.setattr(stage_cache, "code_version", lambda: "another aipq")
    assert key(sql.format(3)) != before


@pytest.mark.parametrize("damage", ["deleted", pytest.param("garbled", marks=pytest.mark.slow)])
def test_a_damaged_entry_is_computed_again(aipq, tmp_path, damage):
    runs = CachedRuns(aipq, tmp_path, "select l_orderkey % 25 as k, count(*) as n from lineitem "
                                      "group by l_orderkey % 25 order by k", "--shuffle-partitions", "4",
                      "--reducer-bytes", "0")
    expected, _ = runs.run()
    parts = sorted(p for entry in runs.entries() for p in entry.glob("part-*.parquet"))
    assert len(parts) > 1
    if damage == "deleted":
        parts[0].unlink()
    else:
        size = parts[0].stat().st_size
        parts[0].write_bytes(b"\0" * size)  # the same size, unreadable
    out = tmp_path / "after.parquet"
    result = aipq("run", "--sql", runs.sql, "--output", str(out), "--work-dir", str(runs.work), *REUSE,
                  *runs.options)
    assert result.exit_code == 0, result.output
    assert "is damaged" in said(result) and REUSED not in said(result), said(result)
    assert duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall() == expected


def test_clear_leaves_the_entries_a_running_command_uses(aipq, tmp_path):
    runs = CachedRuns(aipq, tmp_path, "select n_regionkey, count(*) as n from nation group by n_regionkey "
                                      "order by n_regionkey")
    runs.run()
    entry = runs.entries()[0]
    user = subprocess.Popen(["sleep", "60"])
    try:
        (entry / USED_FILE).write_text(f"{time.time()} another-command {stage_cache.socket.gethostname()} "
                                       f"{user.pid} {process_start(user.pid)}\n")
        cleared = aipq("cache", "clear", "--work-dir", str(runs.work))
        assert cleared.exit_code == 0 and "kept 1 that a running command uses" in said(cleared), said(cleared)
        assert entry.is_dir()
    finally:
        user.kill()
        user.wait()
    cleared = aipq("cache", "clear", "--work-dir", str(runs.work))
    assert cleared.exit_code == 0 and "removed 1 cached" in said(cleared) and not entry.exists()


@pytest.mark.slow
def test_a_completed_reuse_run_leaves_its_entries_unmarked(aipq, tmp_path):
    runs = CachedRuns(aipq, tmp_path, "select n_regionkey, count(*) as n from nation group by n_regionkey "
                                      "order by n_regionkey")
    runs.run()
    marks = [(entry / USED_FILE).read_text().split() for entry in runs.entries()]
    assert marks and all(len(mark) == 2 for mark in marks), marks
    shown = aipq("cache", "show", "--json", "--work-dir", str(runs.work))
    assert all(e["files"] for e in json.loads(shown.stdout)["entries"])


@pytest.mark.parametrize(("expression", "cacheable"), [
    ("unix_timestamp()", False), ("current_user()", False), ("uuid()", False), ("rand() < 2", False),
    ("input_file_block_start() >= 0", False), ("unix_timestamp(n_comment) is null", True),
])
def test_a_value_that_differs_from_run_to_run_is_never_cached(tpch, tmp_path, expression, cacheable):
    storage = local_storage()
    cache = StageCache(storage, str(tmp_path / "cache"), 1 << 30)
    settings = Settings(staging="hive", broadcast_threshold=0)
    sql = (f"select n_regionkey, count(*) from nation where {expression} or n_nationkey >= 0 "
           "group by n_regionkey order by 1")
    dag = plan_query(sql, tpch, settings, storage).dag
    stage = next(s for s in dag.stages if s is not dag.final and s.operator != "SCAN")
    assert (cache.key(dag, stage.id, settings) is not None) == cacheable


@pytest.mark.slow
def test_the_jvms_time_zone_from_tz_is_part_of_the_key(home, tpch, tmp_path):
    """The probe's case: the same query with --reuse under TZ=UTC, then TZ=Asia/Kolkata, as separate commands."""
    sql = ("select hour(from_unixtime(o_orderkey * 3600)) as h, count(*) as n from orders where o_orderkey < 10 "
           "group by hour(from_unixtime(o_orderkey * 3600)) order by h")
    work = tmp_path / "work"
    found = {}
    for zone in ("UTC", "Asia/Kolkata"):
        out = tmp_path / f"{zone.replace('/', '-')}.csv"
        env = {**os.environ, "AIPQ_HOME": str(home), "TZ": zone}
        done = subprocess.run([sys.executable, "-m", "aipq.cli.main", "run", "--sql", sql, "--output", str(out),
                               "--work-dir", str(work), *REUSE], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        found[zone] = (out.read_text(), REUSED in " ".join(done.stderr.split()))
    assert not found["Asia/Kolkata"][1], "another time zone computes the stage again"
    assert found["UTC"][0] != found["Asia/Kolkata"][0]
