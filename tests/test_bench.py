"""`aipq bench tpch` end to end at SF 0.01: every strategy runs, rows are checked equal, the JSON is complete."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import SF

from aipq.engine.context import RunContext


@pytest.mark.slow
def test_bench_tpch_smoke_writes_every_field(aipq, tmp_path):
    out = tmp_path / "bench"
    result = aipq("bench", "tpch", "--sf", str(SF), "--queries", "3", "--repeat", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    results = data["results"]
    strategies = {r["strategy"] for r in results}
    assert strategies == {"off", "hip", "always", "adaptive", "oracle", "spark"}
    assert {r["broadcast_threshold"] for r in results} == {0, 10 * 1024 * 1024}
    for r in results:
        for key in ("query", "ratio", "stages", "median_seconds", "min_seconds", "max_seconds", "shuffle_write_bytes",
                    "shuffle_write_records", "runs"):
            assert key in r, key
        run = r["runs"][0]
        assert run["seconds"] > 0
        if r["strategy"] != "spark":
            assert run["detail"]["stages"]
            assert {"planning_seconds", "decision_seconds", "statistics_seconds"} <= set(run)
            stage = next(iter(run["detail"]["stages"].values()))
            assert {"seconds", "shuffle", "rows_written", "bytes_written", "summaries", "probes"} <= set(stage)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(results) and "pruning_efficiency" in rows[0] and "speedup_vs_spark" in rows[0]
    by = {(r["query"], r["broadcast_threshold"], r["strategy"]): r for r in results}
    for row in data["summary"]:
        if row["strategy"] == "spark":
            continue
        threshold = 0 if row["joins"] == "repartition" else 10 * 1024 * 1024
        off, mine = by[(row["query"], threshold, "off")], by[(row["query"], threshold, row["strategy"])]
        expected = off["runs"][0]["seconds"] / mine["runs"][0]["seconds"]  # one round: its only pair
        assert abs(row["speedup_vs_off_paired"] - expected) < 1e-3, row
    slowest = [h for h in data["headlines"] if h["measure"] == "slowest"]
    assert {(h["strategy"], h["joins"]) for h in slowest} == {
        (s, j) for s in ("hip", "always", "adaptive") for j in ("repartition", "broadcast")}
    assert all(h["query"] == "Q3" and h["queries"] == 1 and h["slower"] == int(h["value"] < 0.97) for h in slowest)
    by_joins = {"repartition": 0, "broadcast": 10 * 1024 * 1024}
    for h in slowest:
        mine, off = (by[("Q3", by_joins[h["joins"]], s)] for s in (h["strategy"], "off"))
        same_plan = mine["stages"] == off["stages"] and not any(
            stage["summaries"] or stage["probes"] for stage in mine["runs"][0]["detail"]["stages"].values())
        assert h["slower_on_offs_plan"] == int(same_plan and (h["slower"] or h["slower_paired"])), h
    always_slowest = next(h for h in slowest if h["strategy"] == "always" and h["joins"] == "repartition")
    assert always_slowest["slower_on_offs_plan"] == 0  # always probes every admissible edge of Q3
    assert {r["strategy"] for r in data["summary"] if r["pruning_efficiency"] is not None} >= {"always", "oracle"}
    assert {"hip", "always"} <= {h["strategy"] for h in data["headlines"] if h["measure"] == "pruning efficiency"}
    assert {(h["strategy"], h["baseline"]) for h in data["headlines"] if h["measure"] == "speedup"} >= {
        ("always", "off"), ("always", "spark"), ("hip", "off"), ("off", "spark")}
    for plot in ("time.png", "shuffle.png", "pruning.png"):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot
    report = (out / "report.md").read_text()
    assert "Command: `aipq bench tpch --sf" in report and "geo-mean speedup" in report and "![time.png]" in report
    assert "| vs off, paired |" in report and "paired by round" in report
    assert "CPU time stolen during the 12 runs kept" in report
    assert all(r["rerun_rounds"] in (0, 1, 2) and r["runs"][0]["steal_seconds"] >= 0 for r in results)
    always = next(r for r in results if r["strategy"] == "always" and r["broadcast_threshold"] == 0)
    probes = [p for s in always["runs"][0]["detail"]["stages"].values() for p in s["probes"]]
    assert probes and all(p["rows_out"] <= p["rows_in"] for p in probes if p["rows_in"] is not None)


@pytest.mark.slow
def test_bench_off_again_runs_offs_plan_as_a_control_series(aipq, tmp_path):
    """``off-again`` runs off's own plan as a series of its own: the same stages and rows shuffled, no summary,
    and the report states how far it fell from off, the spread of identical runs in that benchmark."""
    out = tmp_path / "bench"
    result = aipq("bench", "tpch", "--sf", str(SF), "--queries", "3", "--repeat", "1", "--joins", "repartition",
                  "--strategies", "off,adaptive,off-again", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    by = {r["strategy"]: r for r in data["results"]}
    off, again = by["off"], by["off-again"]
    assert again["stages"] == off["stages"] and again["shuffle_write_records"] == off["shuffle_write_records"]
    assert not any(stage["summaries"] or stage["probes"] for stage in again["runs"][0]["detail"]["stages"].values())
    control = next(h for h in data["headlines"] if h["measure"] == "slowest" and h["strategy"] == "off-again")
    assert control["baseline"] == "off" and control["slower_on_offs_plan"] == int(
        control["slower"] > 0 or control["slower_paired"] > 0)
    report = (out / "report.md").read_text()
    assert "off-again vs off (repartition joins): slowest on Q3" in report
    # the warm-up runs collected the tables' statistics: the written stages' estimates are scored
    assert "| off | " in report.split("median q-error")[1]
    assert all("q_error" in stage for stage in off["runs"][0]["detail"]["stages"].values()
               if stage["materialized"])


@pytest.mark.slow
def test_bench_warms_up_each_query_and_join_setting_before_its_timed_rounds(home, tpch):
    """Every series runs WARMUP_ROUNDS untimed rounds, then ``repeat`` timed ones, per query and join setting."""
    from aipq.bench.queries import tpch_workload
    from aipq.bench.runner import WARMUP_ROUNDS, compare_strategies

    runs: list[int] = []
    results = compare_strategies(RunContext(home), tpch_workload([3, 11]), ["off", "adaptive"], [0], 1,
                                 lambda: runs.append(1))
    assert WARMUP_ROUNDS == 2
    assert len(runs) == 2 * 2 * (WARMUP_ROUNDS + 1)
    assert [len(r.runs) for r in results] == [1, 1, 1, 1]


@pytest.mark.slow
def test_a_short_query_runs_back_to_back_within_each_timed_run(home, tpch):
    """--min-run-seconds: every strategy of a query gets the same number of executions per timed run, from the
    warm-up's median; seconds are per execution and the other figures the first execution's."""
    from aipq.bench.queries import tpch_workload
    from aipq.bench.runner import MAX_EXECUTIONS, compare_strategies, executions_for

    assert executions_for(0, 0.5) == 1 and executions_for(4, 3.5) == 1 and executions_for(4, 1.1) == 4
    assert executions_for(4, 0.01) == MAX_EXECUTIONS
    once = compare_strategies(RunContext(home), tpch_workload([11]), ["off", "spark"], [0], 1)
    batched = compare_strategies(RunContext(home), tpch_workload([11]), ["off", "spark"], [0], 1,
                                 min_run_seconds=6)
    counts = {r.strategy: r.runs[0].executions for r in batched}
    assert counts["off"] == counts["spark"] > 1, counts
    assert all(r.runs[0].executions == 1 for r in once)
    for before, after in zip(once, batched):
        assert after.shuffle_write_records == before.shuffle_write_records, after.strategy
        assert after.runs[0].seconds < 6 / 2, "seconds per execution, not per run"


def test_bench_rejects_an_unknown_strategy(aipq):
    result = aipq("bench", "tpch", "--sf", str(SF), "--strategies", "off,magic")
    assert result.exit_code == 2 and "unknown strategy 'magic'" in result.output
    for series in ("adaptive@fast", "spark@none", "adaptive+aipq.nothing=1", "adaptive+aipq.runtime.broadcast=x",
                   "spark+aipq.runtime.broadcast=off"):
        result = aipq("bench", "tpch", "--sf", str(SF), "--strategies", f"off,{series}")
        assert result.exit_code == 2 and f"unknown strategy '{series}'" in result.output


def test_a_series_name_gives_settings_over_the_benchmarks():
    from aipq.bench.series import Series

    name = "adaptive@adaptive/cost+aipq.runtime.broadcast=off+spark.sql.shuffle.partitions=4"
    series = Series.parse(name)
    assert (series.strategy, series.staging, series.plan) == ("adaptive", "adaptive", "cost")
    assert series.settings == (("aipq.runtime.broadcast", "off"), ("spark.sql.shuffle.partitions", "4"))
    assert Series.parse("off@hive").settings == ()
    prior = Series.parse("adaptive/cost+prior=none+aipq.reoptimize.factor=0")
    assert prior.settings == (("aipq.reoptimize.factor", "0"),)
    assert not Series.parse("adaptive/cost+prior=none").prior_statistics and series.prior_statistics
    assert Series.parse("spark-again").is_spark and Series.parse("spark-again").problem() is None
    assert Series.parse("spark@hive").problem() is not None and Series.parse("adaptive@x").problem() is not None


@pytest.mark.slow
def test_a_series_without_prior_statistics_starts_each_run_with_none(tmp_path):
    """``+prior=none``: the run plans with no statistics (from the tables' footers) and collects them in a
    repository of its own: the home's is neither read nor written."""
    import sqlite3

    from aipq.bench.queries import tpch_workload
    from aipq.bench.runner import compare_strategies
    from aipq.data import collect_missing_statistics, generate_tpch

    home = tmp_path / "home"
    generate_tpch(RunContext(home), SF, "default")
    context = RunContext(home)
    collect_missing_statistics(context, "test")

    def stored() -> list:
        with sqlite3.connect(home / "stats.db") as con:
            return sorted(con.execute("SELECT path, column_name, collected_at FROM column_stats").fetchall()
                          + con.execute("SELECT plan_key, '', collected_at FROM stage_stats").fetchall())

    before = stored()
    [result] = compare_strategies(context, tpch_workload([3]), ["adaptive@hive/cost+prior=none"], [0], 1)
    assert stored() == before
    run = result.runs[0]
    assert run.statistics_seconds > 0, "the run collected the statistics it had none of"
    assert all(replan["estimated_rows"] is not None for replan in run.detail["replans"]), "priced from footers"


@pytest.mark.slow
def test_bench_runs_staging_series_and_the_forced_bloom_anchor(home, tpch):
    """``adaptive@adaptive`` and ``off@none`` run aipq with that staging, ``spark-bf`` spark.sql with its runtime
    Bloom filter forced; every series' rows are checked against the first's as the benchmark runs."""
    from aipq.bench.queries import tpch_workload
    from aipq.bench.runner import compare_strategies

    results = compare_strategies(RunContext(home), tpch_workload([9]), ["off", "adaptive@adaptive", "off@none",
                                                                          "spark-bf"], [0], 1)
    assert [r.strategy for r in results] == ["off", "adaptive@adaptive", "off@none", "spark-bf"]
    stages = {r.strategy: r.stages for r in results}
    assert stages["off@none"] == stages["off"]  # the same DAG, its boundaries fused


@pytest.mark.slow
def test_bench_synthetic_prunes_by_reference_ratio_and_splices_the_doc(aipq, tmp_path):
    """Query1's summary prunes TableC down to the matching keys (child-to-parent); Query2's prunes the B ⋈ C
    sibling's inputs; hip, which passes child-to-parent only, still prunes Query2's last join."""
    out = tmp_path / "synthetic"
    result = aipq("bench", "synthetic", "--rows", "4000", "--ratios", "0.01", "--repeat", "1",
                  "--strategies", "off,hip,always,oracle", "--joins", "repartition", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    by = {(r["query"], r["strategy"]): r for r in data["results"]}
    assert set(by) == {(q, s) for q in ("query1 @ 0.01", "query2 @ 0.01") for s in ("off", "hip", "always", "oracle")}
    for query in ("query1 @ 0.01", "query2 @ 0.01"):
        off = by[(query, "off")]["shuffle_write_records"]
        assert off - by[(query, "always")]["shuffle_write_records"] >= 0.9 * 4000, query  # ≥ a table's worth
        assert by[(query, "hip")]["shuffle_write_records"] < off, query
    assert (out / "time.png").exists() and (out / "final_stage.png").exists()

    doc = tmp_path / "docs" / "benchmarks.md"
    doc.parent.mkdir()
    doc.write_text("# Benchmarks\n\nhand-written part\n")
    from aipq.bench.suite import splice_reports

    (out.parent / "tpch").mkdir()
    (out.parent / "tpch" / "report.md").write_text("### TPC-H\n\n![time.png](time.png)\n")
    for _ in range(2):  # replacing the generated section keeps everything else
        splice_reports(doc, out.parent, ["tpch", "synthetic"])
    text = doc.read_text()
    assert text.count("hand-written part") == 1 and text.count("<!-- aipq bench all: begin -->") == 1
    assert "](../tpch/time.png)" in text and "](../synthetic/final_stage.png)" in text


@pytest.mark.slow
def test_bench_all_reruns_only_the_parts_asked_for_and_keeps_the_other_reports(aipq, tmp_path):
    out, doc = tmp_path / "bench", tmp_path / "benchmarks.md"
    bad = aipq("bench", "all", "--only", "tpch,nope", "--out", str(out), "--doc", str(doc))
    assert bad.exit_code == 2 and "unknown benchmark(s) nope" in bad.output
    (out / "tpch").mkdir(parents=True)
    (out / "tpch" / "report.md").write_text("### TPC-H from an earlier run\n")
    result = aipq("bench", "all", "--sf", "0.01", "--only", "stats", "--repeat", "1", "--out", str(out),
                  "--doc", str(doc))
    assert result.exit_code == 0, result.output
    text = doc.read_text()
    assert "TPC-H from an earlier run" in text and "piggybacked statistics" in text
    assert not (out / "synthetic").exists() and not (out / "decisions").exists()


def test_a_rotation_starts_at_the_round_numbers_item_and_wraps_around():
    from aipq.bench.runner import rotated

    strategies = ["off", "hip", "always"]
    orders = [rotated(strategies, n) for n in range(3)]
    assert orders == [["off", "hip", "always"], ["hip", "always", "off"], ["always", "off", "hip"]]
    assert rotated(strategies, 4) == orders[1] and rotated([], 2) == []


def test_the_round_order_favours_no_series_against_the_baseline():
    """Rotation alone ran ``off`` after ``adaptive`` in all three timed rounds of five strategies, so a trend within
    the round (runs getting faster as the JVM compiles the query) favoured ``off``."""
    from aipq.bench.runner import round_order

    for n in range(2, 8):
        items = list(range(n))
        for baseline in {0, n // 2, n - 1}:
            assert round_order(items, 0, baseline) == items  # warm-up
            for rounds in range(1, 7):
                orders = [round_order(items, r, baseline) for r in range(1, rounds + 1)]
                assert all(sorted(order) == items for order in orders)
                assert all(order.index(baseline) == (n - 1) // 2 for order in orders[::2])
                for item in items:
                    places = [order.index(item) for order in orders]
                    if rounds % 2 == 0:  # whole pairs: every item's mean place is the middle
                        assert sum(places) * 2 == rounds * (n - 1), (n, baseline, rounds, item)
                    if item != baseline:
                        before = sum(order.index(item) < order.index(baseline) for order in orders)
                        assert abs(2 * before - rounds) <= 1, (n, baseline, rounds, item)
    assert round_order(["off", "hip", "always", "adaptive", "off-again"], 1) == [
        "hip", "always", "off", "adaptive", "off-again"]


def test_steal_is_read_from_proc_stat_and_a_disturbed_round_runs_again(tmp_path):
    """A round runs again while the hypervisor took more than 5% of the machine's CPU time during one of its
    runs, at most three times in all, and the last attempt counts."""
    import os

    from aipq.bench.runner import Measurement
    from aipq.bench.steal import MAX_ATTEMPTS, disturbed, steal_seconds, undisturbed_round

    stat = tmp_path / "stat"
    stat.write_text("cpu  9804569 0 791697 4281744 12676 0 61543 135021 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert steal_seconds(stat) == 135021 / os.sysconf("SC_CLK_TCK")
    assert steal_seconds(tmp_path / "absent") == 0.0 and steal_seconds() >= 0.0
    assert disturbed(Measurement(10.0, 0, 0, steal_seconds=1.1), cpus=2)
    assert not disturbed(Measurement(10.0, 0, 0, steal_seconds=0.9), cpus=2)
    assert not disturbed(Measurement(0.0, 0, 0), cpus=2)

    stolen_by_attempt = {0: 3.0, 1: 0.0}  # the first attempt lost 3 s of 2 × 10 s
    attempts = []

    def run_round(attempt):
        attempts.append(attempt)
        return [("off", Measurement(10.0, 0, 0)), ("adaptive", Measurement(10.0, 0, 0,
                                                                           steal_seconds=stolen_by_attempt[attempt]))]

    kept, discarded = undisturbed_round(run_round, lambda run: disturbed(run, cpus=2))
    assert (attempts, discarded) == ([0, 1], 1) and kept[1][1].steal_seconds == 0.0
    attempts.clear()
    always = undisturbed_round(lambda attempt: attempts.append(attempt) or [("off", Measurement(1.0, 0, 0,
                                                                                               steal_seconds=1.0))],
                               lambda run: disturbed(run, cpus=2))
    assert attempts == list(range(MAX_ATTEMPTS)) and always[1] == MAX_ATTEMPTS - 1


def test_a_disturbed_single_run_runs_again_alone_and_the_tally_counts_it():
    """bench decisions reruns one run, not its round of up to 18; the report states how many and the steal kept."""
    from aipq.bench.runner import Measurement
    from aipq.bench.steal import StealTally, disturbed, steal_line, undisturbed_run

    stolen = iter([4.0, 0.5])  # the first attempt lost 4 s of 2 × 10 s

    def run():
        return Measurement(10.0, 0, 0, steal_seconds=next(stolen))

    kept, discarded = undisturbed_run(run, lambda m: disturbed(m, cpus=2))
    assert (kept.steal_seconds, discarded) == (0.5, 1)
    tally = StealTally()
    tally.add(kept, discarded)
    tally.add(Measurement(5.0, 0, 0), 0)
    assert (tally.rerun, tally.runs, tally.stolen_seconds) == (1, 2, 0.5)
    line = steal_line(tally.rerun, tally.stolen_seconds, tally.runs, unit="runs")
    assert line.startswith("runs run again") and "during them (steal): 1;" in line and "2 runs kept: 0.5 s" in line


def test_a_batch_benchmark_process_gets_the_benchmarks_settings_back_from_its_options():
    """The separate ``aipq`` processes of ``bench batch`` run with the benchmark's settings: every knob off its
    default, Spark's settings and the master survive the trip through the command line."""
    from pathlib import Path

    import click
    from click.testing import CliRunner

    from aipq.bench.batch import command_options
    from aipq.cli.options import planning_options
    from aipq.config import Settings

    given = Settings(ip="hip", bloom_size=512 * 1024, stats_columns=("l_tax", "o_comment"), beta=0.5,
                     reoptimize_factor=0.0, spark_conf={"spark.executor.cores": "1"}, master="local[1]")
    seen = []

    @click.command()
    @planning_options
    def capture(settings):
        seen.append(settings)

    options = command_options(Path("/some/home"), given)
    assert options[:2] == ["--home", "/some/home"]
    result = CliRunner().invoke(capture, options[2:], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen == [given]


@pytest.mark.slow
def test_bench_batch_times_the_batch_in_the_session_and_as_separate_commands(aipq, tmp_path):
    """Every mode runs, the separate processes included, and each mode's rows were checked against one by one's;
    a process mode is compared with one by one as processes."""
    out = tmp_path / "bench"
    result = aipq("bench", "batch", "--sf", str(SF), "--queries", "3,6", "--repeat", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    modes = {m["mode"]: m for m in json.loads((out / "results.json").read_text())["modes"]}
    assert set(modes) == {"one by one", "batch, own scans", "batch, shared scans", "one by one, again",
                          "one by one, separate commands", "batch, one command"}
    assert modes["one by one"]["input_bytes"] > 0
    assert modes["batch, one command"]["input_bytes"] is None and modes["batch, one command"]["median_seconds"] > 0
    report = (out / "report.md").read_text()
    separate = modes["one by one, separate commands"]["median_seconds"]
    ratio = separate / modes["batch, one command"]["median_seconds"]
    row = next(line for line in report.splitlines() if line.startswith("| batch, one command |"))
    seconds, speedup = (cell.strip().rstrip("×") for cell in row.split("|")[2:4])
    # results.json keeps milliseconds, the report two decimals: compare within that rounding.
    assert float(seconds) == pytest.approx(modes["batch, one command"]["median_seconds"], abs=0.006)
    assert float(speedup) == pytest.approx(ratio, abs=0.011)


@pytest.mark.slow
def test_bench_estimates_reports_each_written_stages_q_error(aipq):
    result = aipq("bench", "estimates", "--sf", str(SF), "--queries", "1,9,18")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Q18" in text and "median" in text and "90th percentile" in text


@pytest.mark.slow
def test_bench_api_times_aipq_sql_against_spark_sql_on_one_user_session(aipq, tmp_path):
    """``aipq bench api``: a user's program (its own process and session) times both sides and their A/A
    controls until the rows are read; the report gives the fixed cost per call and the workload's totals."""
    out = tmp_path / "api"
    result = aipq("bench", "api", "--sf", str(SF), "--queries", "3", "--repeat", "1", "--warmup", "1",
                  "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["session"]["shuffle_partitions"] == "200" and data["session"]["adaptive"] == "true"
    found = {(r["query"], r["strategy"]) for r in data["results"]}
    assert found == {(q, s) for q in ("select 1", "count nation", "count supplier", "nation of region 1", "Q3")
                     for s in ("aipq", "aipq-again", "spark", "spark-again")}
    aipq_q3 = next(r for r in data["results"] if (r["query"], r["strategy"]) == ("Q3", "aipq"))
    run = aipq_q3["runs"][0]
    assert run["detail"]["result_rows"] == 10 and run["planning_seconds"] < run["seconds"]
    assert {w["series"] for w in data["workload"]} == {"aipq", "aipq-again", "spark-again"}
    report = (out / "report.md").read_text()
    assert "A call's fixed cost, aipq.sql's median less spark.sql's: select 1" in report
    assert "| aipq | broadcast | 5 |" in report and "![ratios.png](ratios.png)" in report
    assert (out / "ratios.png").exists() and (out / "time.png").exists()
