"""Piggybacked statistics and the repository: real runs on fresh TPC-H data, exact counts from DuckDB."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import Aipq

from aipq.catalog import Catalog
from aipq.estimator.selectivity import like_share
from aipq.stats import sketches
from aipq.stats.repository import APPLICATION_ID, SCHEMA, StatsRepository

# Every join and filter column of TPC-H Q5, by table
Q5_COLUMNS = {
    "default.customer": {"c_custkey", "c_nationkey"},
    "default.orders": {"o_custkey", "o_orderkey", "o_orderdate"},
    "default.lineitem": {"l_orderkey", "l_suppkey"},
    "default.supplier": {"s_suppkey", "s_nationkey"},
    "default.nation": {"n_nationkey", "n_regionkey"},
    "default.region": {"r_regionkey", "r_name"},
}


@pytest.fixture()
def fresh(tmp_path, spark) -> Aipq:
    """A home of its own with freshly generated SF 0.01 data and no statistics."""
    runner = Aipq(tmp_path / "home")
    result = runner("tpch", "gen", "--sf", "0.01")
    assert result.exit_code == 0, result.output
    return runner


def show(runner: Aipq) -> dict:
    result = runner("stats", "show", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def by_table(payload: dict) -> dict[str, dict]:
    return {t["name"]: t for t in payload["tables"]}


def exact_distinct(path: str, column: str) -> int:
    return duckdb.execute(f"SELECT count(DISTINCT {column}) FROM read_parquet('{path}')").fetchone()[0]


def test_q5_collects_its_join_and_filter_columns_once_and_data_changes_invalidate(fresh):
    assert fresh("run", "tpch:5", "--quiet").exit_code == 0
    tables = by_table(show(fresh))
    assert set(tables) == set(Q5_COLUMNS)
    for name, columns in Q5_COLUMNS.items():
        table = tables[name]
        assert table["current"] and table["rows"] == duckdb.execute(
            f"SELECT count(*) FROM read_parquet('{table['path']}')").fetchone()[0]
        assert columns <= set(table["columns"]), name
        assert table["splits"] >= 1 and table["bytes"] == os.path.getsize(table["path"])
        for column in columns:
            stats = table["columns"][column]
            exact = exact_distinct(table["path"], column)
            assert abs(stats["ndv"] - exact) <= 3 * stats["rse"] * exact, (name, column, stats["ndv"], exact)
            low, high, nulls = duckdb.execute(f"SELECT min({column})::VARCHAR, max({column})::VARCHAR, "
                                              f"count(*) - count({column}) FROM read_parquet('{table['path']}')"
                                              ).fetchone()
            assert (stats["min_value"], stats["max_value"], stats["nulls"]) == (low, high, nulls), (name, column)
            assert stats["width"] > 0
    first = {name: t["collected_at"] for name, t in tables.items()}

    assert fresh("run", "tpch:5", "--quiet").exit_code == 0  # again: nothing new is collected
    assert {name: t["collected_at"] for name, t in by_table(show(fresh)).items()} == first
    explained = fresh("explain", "tpch:5", "--format", "json")
    needs = json.loads(explained.output)["statistics"]
    assert needs and all(not n["collect"] and n["table_statistics"] == "known" for n in needs)

    region = Path(tables["default.region"]["path"])
    os.utime(region, ns=(region.stat().st_atime_ns, region.stat().st_mtime_ns + 10**9))  # "touch"
    assert not by_table(show(fresh))["default.region"]["current"]
    needs = {n["table"]: n for n in json.loads(fresh("explain", "tpch:5", "--format", "json").output)["statistics"]}
    assert set(needs["default.region"]["collect"]) == Q5_COLUMNS["default.region"]
    assert not needs["default.orders"]["collect"]
    assert fresh("run", "tpch:5", "--quiet").exit_code == 0
    after = by_table(show(fresh))
    assert after["default.region"]["current"] and after["default.region"]["collected_at"] > first["default.region"]
    assert after["default.orders"]["collected_at"] == first["default.orders"]


@pytest.mark.slow  # generates its own TPC-H and runs Q20
def test_text_columns_keep_a_sample_that_estimates_like(fresh):
    """Q20 filters part on p_name LIKE 'forest%': the scan that collects p_name's statistics keeps a uniform
    sample of its distinct values (the 256 of least hash), and the estimate of the filter is read from it."""
    assert fresh("run", "tpch:20", "--quiet").exit_code == 0
    repository = StatsRepository(fresh.home)
    [part] = [t for t in repository.tables() if t.name == "default.part"]
    sample = part.columns["p_name"].sample
    names = {row[0] for row in duckdb.execute(f"SELECT DISTINCT p_name FROM read_parquet('{part.path}')").fetchall()}
    assert len(sample) == 256 and len(set(sample)) == 256 and set(sample) <= names
    assert part.columns["p_partkey"].sample is None  # not text
    matching = sum(name.startswith("forest") for name in names) / len(names)
    assert like_share("forest%", sample) == pytest.approx(matching, abs=0.02)


def test_a_repository_of_the_previous_schema_gains_the_sample_column(tmp_path):
    """Statistics stored by the previous schema stay (no sample: collected again when a query needs the column)."""
    con = sqlite3.connect(tmp_path / "stats.db")
    con.executescript(f"""{SCHEMA.replace("sample TEXT, ", "")}
        INSERT INTO table_stats VALUES ('/t', 'default.t', 'f1', 10, 100, 1, 1, 0, 'test');
        INSERT INTO column_stats VALUES ('/t', 'name', 'f1', 'string', 10, 0, 10, 12, NULL, 5, 'a', 'z', 0, 'test');
        PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;""")
    con.close()
    repository = StatsRepository(tmp_path, notice=pytest.fail)
    name = repository.table("/t").columns["name"]
    assert (name.ndv, name.sample) == (10, None)


def test_a_repository_replaced_after_its_check_is_checked_again(tmp_path):
    """The check a process remembers stands only for the files it checked: a foreign file put in its place is
    found (and moved aside) by the next repository opened on it."""
    StatsRepository(tmp_path, notice=pytest.fail)
    StatsRepository(tmp_path, notice=pytest.fail)  # the same files: not checked again
    (tmp_path / "stats.db").unlink()
    con = sqlite3.connect(tmp_path / "stats.db")
    con.execute("CREATE TABLE foreign_data (x INTEGER)")
    con.close()
    notices = []
    StatsRepository(tmp_path, notice=notices.append)
    assert len(notices) == 1 and "not usable" in notices[0]
    assert list(tmp_path.glob("stats.db.unreadable-*"))


def test_a_repository_reads_the_database_its_path_names_now(tmp_path):
    """Reads reuse one connection per thread; once the file is replaced (moved aside and made anew, here by
    another repository as a second process would), they read the new one, not the file the connection opened."""
    from aipq.stats.repository import ColumnStats, TableStats

    reader = StatsRepository(tmp_path, notice=pytest.fail)
    column = ColumnStats("k", "bigint", 10, 0, 10, 12, 8, "1", "10")
    StatsRepository(tmp_path).save_table(TableStats("/t", "default.t", "f1", 10, 100, 1, 1, columns={"k": column}))
    assert reader.table("/t").rows == 10 and reader.table("/t").rows == 10
    (tmp_path / "stats.db").replace(tmp_path / "stats.db.aside")
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"stats.db{suffix}").unlink(missing_ok=True)
    StatsRepository(tmp_path).save_table(TableStats("/t", "default.t", "f2", 20, 200, 1, 1))
    assert reader.table("/t").rows == 20


def test_stage_outputs_are_known_by_their_subplan(fresh):
    hive = ("--broadcast-threshold", "0", "--staging", "hive", "--ip", "off")  # every stage written, unpruned
    assert fresh("run", "tpch:3", "--quiet", *hive).exit_code == 0
    stages = show(fresh)["stages"]
    assert stages and all(s["rows"] >= 0 and s["bytes"] > 0 for s in stages)
    keys = {s["plan_key"]: s["rows"] for s in stages}
    # S1 (BUILDING customers' orders before the date) is sketched on o_orderkey, the key S2 joins it on
    joined = [s for s in stages if "o_orderkey" in s["columns"]]
    assert len(joined) == 1
    data = fresh.home / "warehouse" / "tpch" / "sf0_01"
    exact = duckdb.execute(
        f"SELECT count(DISTINCT o_orderkey) FROM read_parquet('{data / 'customer.parquet'}') c "
        f"JOIN read_parquet('{data / 'orders.parquet'}') o ON c.c_custkey = o.o_custkey "
        "WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15'").fetchone()[0]
    assert joined[0]["rows"] == exact  # o_orderkey is unique
    assert abs(joined[0]["columns"]["o_orderkey"] - exact) <= 3 * sketches.relative_standard_error(12) * exact
    assert fresh("run", "tpch:3", "--quiet", *hive).exit_code == 0
    assert {s["plan_key"]: s["rows"] for s in show(fresh)["stages"]} == keys  # same subplans, same keys
    explained = json.loads(fresh("explain", "tpch:3", *hive, "--format", "json").output)
    known = [s["known_output"] for s in explained["stages"]]
    assert all(k is not None for k in known) and {k["rows"] for k in known} <= set(keys.values())


def test_sibling_pruned_stage_outputs_are_not_recorded_as_their_subplans_size(fresh):
    assert fresh("run", "tpch:5", "--quiet", "--broadcast-threshold", "0", "--plan", "bushy").exit_code == 0
    unpruned = {s["plan_key"]: s["rows"] for s in show(fresh)["stages"]}
    assert fresh("stats", "clear").exit_code == 0
    assert fresh("run", "tpch:5", "--quiet", "--broadcast-threshold", "0", "--plan", "bushy",
                 "--ip", "always").exit_code == 0
    for stage in show(fresh)["stages"]:  # whatever was recorded under pruning has its true, unpruned size
        assert unpruned.get(stage["plan_key"], stage["rows"]) == stage["rows"], stage["description"]


def test_a_scan_stopped_by_limit_is_not_taken_for_the_table(fresh):
    result = fresh("run", "--sql", "SELECT l_orderkey FROM lineitem WHERE l_quantity > 10 LIMIT 3", "--quiet")
    assert result.exit_code == 0, result.output
    lineitem = by_table(show(fresh)).get("default.lineitem")
    if lineitem is not None:  # stored only if the scan happened to read every row
        assert lineitem["rows"] == 60175


def test_explicit_collect_show_and_clear(fresh):
    result = fresh("stats", "collect", "nation", "--columns", "n_name,n_regionkey", "--stats-lg-k", "10")
    assert result.exit_code == 0, result.output
    nation = by_table(show(fresh))["default.nation"]
    assert set(nation["columns"]) == {"n_name", "n_regionkey"}
    assert nation["columns"]["n_name"]["lg_k"] == 10 and nation["columns"]["n_name"]["ndv"] == pytest.approx(25, 0.1)
    assert nation["columns"]["n_name"]["min_value"] == "ALGERIA"
    table = fresh("stats", "show", "nation")
    assert table.exit_code == 0 and "default.nation: 25 rows" in table.output
    bad = fresh("stats", "collect", "nation", "--columns", "n_nope")
    assert bad.exit_code == 2 and "no column 'n_nope'" in bad.output
    assert fresh("stats", "clear", "nation").exit_code == 0
    assert "default.nation" not in by_table(show(fresh))


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, "foreign"])
def test_a_corrupt_or_foreign_repository_is_moved_aside_and_rebuilt(fresh, content):
    path = fresh.home / "stats.db"
    if content == "foreign":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE customers (id INTEGER)")
        con.commit()
        con.close()
    else:
        path.write_bytes(content)
    result = fresh("stats", "show")
    assert result.exit_code == 0 and "was not usable" in result.output and "moved it to" in result.output
    assert list(fresh.home.glob("stats.db.unreadable-*"))
    assert fresh("run", "tpch:6", "--quiet").exit_code == 0
    assert "default.lineitem" in by_table(show(fresh))


def test_sketch_union_and_intersection_from_spark(spark):
    rows = spark.sql("SELECT hll_sketch_agg(id, 12) AS a FROM range(0, 60000)").first()["a"]
    other = spark.sql("SELECT hll_sketch_agg(id, 12) AS b FROM range(40000, 100000)").first()["b"]
    rse = sketches.relative_standard_error(12)
    assert sketches.estimate(bytes(rows)) == pytest.approx(60000, rel=3 * rse)
    assert sketches.union_estimate([bytes(rows), bytes(other)]) == pytest.approx(100000, rel=3 * rse)
    # the intersection's error is that of the three estimates it combines
    assert sketches.intersection_estimate(bytes(rows), bytes(other)) == pytest.approx(20000, abs=3 * rse * 220000)


@pytest.mark.slow
def test_two_concurrent_runs_share_one_repository(fresh, tmp_path):
    """Two real aipq processes (two JVMs) recollect statistics into the same repository at once."""
    aipq = shutil.which("aipq", path=str(Path(sys.executable).parent)) or "aipq"
    env = {**os.environ, "AIPQ_HOME": str(fresh.home)}
    command = [aipq, "run", "tpch:5", "--quiet", "--statistics", "recollect", "--broadcast-threshold", "0",
               "--conf", "spark.ui.enabled=false"]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    outcomes = [p.communicate(timeout=600) for p in processes]
    for process, (_, err) in zip(processes, outcomes):
        assert process.returncode == 0, err
    repository = StatsRepository(fresh.home)
    tables = {t.name: t for t in repository.tables()}
    assert set(tables) == set(Q5_COLUMNS)
    for name, columns in Q5_COLUMNS.items():
        table = tables[name]
        assert columns <= set(table.columns)
        assert all(c.rows == table.rows for c in table.columns.values())  # each column from a whole collection
        assert table.rows == duckdb.execute(f"SELECT count(*) FROM read_parquet('{table.path}')").fetchone()[0]


@pytest.mark.slow
def test_bench_stats_reports_overhead_and_ndv_error(aipq, tmp_path):
    out = tmp_path / "stats"
    result = aipq("bench", "stats", "--sf", "0.01", "--queries", "3", "--lg-k", "10", "--repeat", "1",
                  "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert [row["lg_k"] for row in data["overhead"]] == [10]
    assert {"slowdown", "paired_slowdown", "off_seconds", "median_seconds", "storing_seconds"} <= set(
        data["overhead"][0])
    runs = {run["lg_k"]: run["seconds"] for run in data["runs"]}
    assert data["overhead"][0]["paired_slowdown"] == pytest.approx(runs[10][0] / runs[None][0] - 1, abs=1e-4)
    errors = data["ndv_errors"]
    assert errors and all(e["lg_k"] == 10 and e["exact"] > 0 for e in errors)
    assert all(e["error"] <= 5 * e["rse"] for e in errors)  # well inside what lg_k 10 promises
    assert (out / "statistics.png").read_bytes()[:4] == b"\x89PNG" and "slowdown" in (out / "report.md").read_text()
    assert all(len(run["steal_seconds"]) == 1 and run["rerun_rounds"] in (0, 1, 2) for run in data["runs"])
    assert "the hypervisor took more than 5%" in (out / "report.md").read_text()


def test_paired_slowdown_compares_each_round_with_itself():
    from aipq.bench.stats import paired_slowdown

    off = [1.0, 1.0, 1.0, 2.0, 2.0]  # the machine slowed down for the last two rounds
    collecting = [1.05, 1.05, 2.1, 2.1, 2.1]
    assert paired_slowdown(collecting, off) == pytest.approx(0.05)
    assert statistics.median(collecting) / statistics.median(off) - 1 == pytest.approx(1.1)  # what medians say


def test_adaptive_decides_without_waiting_for_its_own_stages_statistics(fresh, monkeypatch):
    """Before deciding a stage's edges the executor waits for the table statistics collected so far (the
    estimator reads them from the repository), not for this run's stage statistics, which it knows from the run.
    Stage stores held until every stage has run would block a decision that waited for them."""
    import threading

    from aipq.engine import executor
    from aipq.engine.statistics import StatisticsCollector

    released = threading.Event()
    store_stage, run_stages = StatisticsCollector._store_stage, executor._run_stages

    def held_store_stage(self, *arguments):
        if not released.wait(20):
            raise OSError("a decision waited for this run's stage statistics")
        store_stage(self, *arguments)

    def run_then_release(*arguments, **keywords):
        run_stages(*arguments, **keywords)
        released.set()

    monkeypatch.setattr(StatisticsCollector, "_store_stage", held_store_stage)
    monkeypatch.setattr(executor, "_run_stages", run_then_release)
    result = fresh("run", "tpch:5", "--quiet", "--ip", "adaptive", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    assert set(by_table(show(fresh))) == set(Q5_COLUMNS), "tables' statistics are stored before decisions"
    assert show(fresh)["stages"], "the held stage statistics are stored by the end of the run"


def test_a_run_ends_only_once_its_statistics_are_stored(fresh, monkeypatch):
    """Statistics are stored on a thread beside later stages; a run must not return before they are stored
    (a slow store makes the race sure to show), and a store that fails is a warning: the result still comes."""
    import time

    from aipq.engine.statistics import StatisticsCollector

    store = StatisticsCollector._store_table

    def slow_store(self, pending):
        time.sleep(0.5)
        store(self, pending)

    monkeypatch.setattr(StatisticsCollector, "_store_table", slow_store)
    assert fresh("run", "tpch:5", "--quiet").exit_code == 0
    assert set(by_table(show(fresh))) == set(Q5_COLUMNS)

    def failing_store(self, pending):
        raise OSError("disk full")

    monkeypatch.setattr(StatisticsCollector, "_store_table", failing_store)
    failed = fresh("run", "tpch:5", "--quiet", "--statistics", "recollect")
    assert failed.exit_code == 0 and "warning: statistics were not stored (OSError: disk full)" in failed.output
    assert "revenue" in failed.output  # the result


def test_analyze_table_in_a_workflow_collects_like_stats_collect(fresh, tmp_path):
    script = tmp_path / "analyze.sql"
    script.write_text("CREATE TABLE an_orders AS SELECT o_orderkey, o_custkey FROM orders\n"
                      "WHERE o_totalprice > 100000;\n"
                      "ANALYZE TABLE an_orders COMPUTE STATISTICS FOR COLUMNS o_custkey;\n"
                      "ANALYZE TABLE nation COMPUTE STATISTICS;\n"
                      "ANALYZE TABLE region COMPUTE STATISTICS NOSCAN;\n"
                      "SELECT count(*) FROM an_orders;\n")
    result = fresh("run", str(script), "--statistics", "off")  # only ANALYZE collects
    assert result.exit_code == 0, result.output
    tables = by_table(show(fresh))
    assert set(tables) == {"default.an_orders", "default.nation"}
    custkey = tables["default.an_orders"]["columns"]["o_custkey"]
    assert set(tables["default.an_orders"]["columns"]) == {"o_custkey"} and custkey["collected_by"] == "ANALYZE TABLE"
    path = Catalog(fresh.home).lookup("an_orders").path
    exact = exact_distinct(f"{path}/*.parquet", "o_custkey")
    assert abs(custkey["ndv"] - exact) <= 3 * sketches.relative_standard_error(12) * exact
    assert set(tables["default.nation"]["columns"]) == {"n_nationkey", "n_name", "n_regionkey", "n_comment"}
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT n_name FROM nation;\nANALYZE TABLE nation COMPUTE STATISTICS FOR COLUMNS n_name, n_nope;\n")
    refused = fresh("explain", str(bad))
    assert refused.exit_code == 2 and "no column 'n_nope'" in refused.output and ":2:" in refused.output
