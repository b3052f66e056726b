"""Corrective re-optimization between stages (``--reoptimize-factor``, issue 42): with ``--plan cost``, a finished
join whose rows differ from its estimate has the stages not yet run planned again around its output; DuckDB's
rows for every re-planned query, queries written in a bad order and planned without statistics included."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pytest
from conftest import LOCAL_FILES, analyzed, assert_same_rows, oracle_rows, run_to_rows
from test_join_order import worst_text

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.engine.footers import FooterStatistics, footer_statistics
from aipq.estimator.join_estimates import JoinEstimates, KnownTables, join_costing
from aipq.estimator.parameters import load_calibration
from aipq.pipeline import plan_query, replan_dag
from aipq.planner.reoptimize import references_resolve
from aipq.planner.stages import StageRead
from aipq.tpch.queries import query_text, without_date_filters

REPARTITION = ("--broadcast-threshold", "0")
NO_STATISTICS = ("--plan", "cost", "--statistics", "off", *REPARTITION)

Q5_BAD = """select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from lineitem, orders, customer, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey and s_nationkey = n_nationkey and n_regionkey = r_regionkey
  and r_name = 'ASIA' and o_orderdate >= date '1994-01-01' and o_orderdate < date '1995-01-01'
group by n_name order by revenue desc"""


def test_a_finished_join_stands_in_its_block_and_the_rest_is_planned_again(home, tpch):
    """Pure: Q5 written in a bad order, its first join done; the re-plan reads that join's output and keeps its
    finished stage first, with new stages after it that read only columns their inputs have. (No scan is cut
    into a stage of its own: the join alone is marked finished here, as if it had read its tables itself.)"""
    settings = Settings(plan="linear", broadcast_threshold=0, scan_summaries=0, cut_scans="off")
    planned = plan_query(Q5_BAD, Catalog(home), settings, LOCAL_FILES)
    dag = planned.dag
    first = next(s for s in dag.stages if s.operator == "JOIN")
    footers = {"lineitem": 60_175, "orders": 15_000, "customer": 1_500, "supplier": 100, "nation": 25, "region": 5}
    estimates = JoinEstimates(KnownTables(None, LOCAL_FILES), dag, {first.id: 9_284.0},
                              footers=lambda scan: FooterStatistics(footers[scan.table.name], {}))
    costing = join_costing(settings, KnownTables(None, LOCAL_FILES), load_calibration(home), 2, estimates)
    replanned = replan_dag(planned, dag, {first.id}, replace(settings, plan="cost"), LOCAL_FILES, costing)
    assert replanned is not None
    new, used = replanned
    assert used == [first.id]
    assert new.stages[0].plan is first.plan
    assert all(s.id > first.id for s in new.stages[1:])
    readers = [s for s in new.stages[1:] if any(isinstance(n, StageRead) and n.stage_id == first.id
                                                 for n in s.plan.walk())]
    assert len(readers) == 1 and readers[0].operator == "JOIN"
    assert references_resolve(new.plan.root)
    assert new.plan.root.output == dag.plan.root.output
    assert new.plan.join_order[0].startswith("cost-based (dynamic programming over 5 relations)")


def test_a_finished_join_that_read_a_cut_scan_stands_in_its_block_with_it(home, tpch):
    """Q5 written in a bad order with its large filtered scan (orders) cut into a stage of its own
    (``ip/written_scans.py``): the first join and the stages it read are finished, as the executor marks them
    (run or fused); the re-plan keeps them all first and reads the join's output."""
    settings = Settings(plan="linear", broadcast_threshold=0, scan_summaries=0)
    planned = plan_query(Q5_BAD, Catalog(home), settings, LOCAL_FILES)
    dag = planned.dag
    first = next(s for s in dag.stages if s.operator == "JOIN" and s.input_stages)
    assert any(dag.stage(i).operator == "MAP" for i in first.input_stages)
    finished = {first.id, *first.input_stages}
    footers = {"lineitem": 60_175, "orders": 15_000, "customer": 1_500, "supplier": 100, "nation": 25, "region": 5}
    estimates = JoinEstimates(KnownTables(None, LOCAL_FILES), dag, {first.id: 9_284.0},
                              footers=lambda scan: FooterStatistics(footers[scan.table.name], {}))
    costing = join_costing(settings, KnownTables(None, LOCAL_FILES), load_calibration(home), 2, estimates)
    replanned = replan_dag(planned, dag, finished, replace(settings, plan="cost"), LOCAL_FILES, costing)
    assert replanned is not None
    new, used = replanned
    assert used == [first.id]
    assert {s.id for s in new.stages[:len(finished)]} == finished
    assert references_resolve(new.plan.root) and new.plan.root.output == dag.plan.root.output


def test_a_finished_stage_above_the_joins_is_never_planned_again(home, tpch):
    """Once a GROUP-BY has run, a re-plan would run it again: none is made."""
    settings = Settings(plan="linear", broadcast_threshold=0, scan_summaries=0)
    planned = plan_query(Q5_BAD, Catalog(home), settings, LOCAL_FILES)
    dag = planned.dag
    done = {s.id for s in dag.stages if s.operator in ("JOIN", "GROUP-BY")}
    costing = join_costing(settings, KnownTables(None, LOCAL_FILES), load_calibration(home), 2,
                           JoinEstimates(KnownTables(None, LOCAL_FILES), dag,
                                         footers=lambda scan: FooterStatistics(1000, {})))
    assert replan_dag(planned, dag, done, settings, LOCAL_FILES, costing) is None


# Q3, Q9 and Q21 in the quick lane (a chain, the widest join graph, self-joins under semi and anti joins)
@pytest.mark.parametrize("number", [3, 9, 21] + [pytest.param(n, marks=pytest.mark.slow) for n in (5, 7, 8, 10, 18)])
def test_bad_order_variants_re_planned_without_statistics_give_the_oracles_rows(aipq, duck, tpch_statistics,
                                                                               tmp_path, number):
    query = tmp_path / f"q{number}-worst.sql"
    query.write_text(worst_text(aipq, number))
    actual = run_to_rows(aipq, tmp_path, str(query), *NO_STATISTICS, "--staging", "hive")
    sql = query_text(number)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


@pytest.mark.parametrize("number", [3, 10])
def test_adps_variants_without_date_predicates_give_the_oracles_rows(aipq, duck, tpch_statistics, tmp_path, number):
    text = without_date_filters(number)
    assert "date" not in text.lower().split("*/", 1)[1].replace("o_orderdate", "")
    query = tmp_path / f"q{number}-no-dates.sql"
    query.write_text(text)
    for args in (NO_STATISTICS, ("--plan", "cost", *REPARTITION)):
        actual = run_to_rows(aipq, tmp_path, str(query), *args, "--staging", "hive")
        assert_same_rows(actual, oracle_rows(duck, text), ordered=False)


@pytest.mark.parametrize("number", [9, 21] + [pytest.param(n, marks=pytest.mark.matrix) for n in (2, 5)])
def test_re_planning_at_every_deviation_with_statistics_gives_the_oracles_rows(aipq, duck, tpch_statistics,
                                                                              tmp_path, number):
    """Factor 1: every written join whose rows are not exactly its estimate re-plans (Hive staging writes every
    stage; information passing on)."""
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--plan", "cost", "--reoptimize-factor", "1",
                         "--staging", "hive", *REPARTITION)
    sql = query_text(number)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_analyze_lists_each_re_plan_and_the_stages_as_they_ran(aipq, duck, tmp_path):
    query = tmp_path / "q5-bad.sql"
    query.write_text(Q5_BAD)
    info = analyzed(aipq, str(query), *NO_STATISTICS, "--staging", "hive")
    replans = info["run"]["replans"]
    assert replans, "a plan made from the footers alone is re-planned where its estimates miss"
    assert all(r["estimated_rows"] is not None and r["q_error"] > 2 for r in replans), replans
    changed = next(r for r in replans if r["changed"])
    ran = {stage["id"] for stage in info["stages"]}
    assert set(changed["stages"]) & ran, "the re-planned stages are the ones that ran"
    assert info["run"]["result_rows"] == len(oracle_rows(duck, Q5_BAD))
    shown = aipq("run", str(query), *NO_STATISTICS, "--staging", "hive", "--analyze", "--quiet")
    assert shown.exit_code == 0, shown.output
    assert f"after S{changed['after_stage']}: estimated" in shown.output and "replace the rest" in shown.output


def test_factor_zero_never_re_plans(aipq, tmp_path):
    query = tmp_path / "q5-bad.sql"
    query.write_text(Q5_BAD)
    info = analyzed(aipq, str(query), *NO_STATISTICS, "--staging", "hive", "--reoptimize-factor", "0")
    assert info["run"]["replans"] == []


def test_a_re_planned_table_write_holds_the_oracles_rows(aipq, duck, tmp_path, home):
    script = tmp_path / "reopt.sql"
    script.write_text(f"drop table if exists reopt_q5;\ncreate table reopt_q5 as {Q5_BAD};\n")
    made = aipq("run", str(script), *NO_STATISTICS, "--staging", "hive", "--quiet")
    assert made.exit_code == 0, made.output
    entry = Catalog(home).lookup("default.reopt_q5")
    rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{entry.path}/**/*.parquet')").fetchall()
    assert_same_rows(rows, oracle_rows(duck, Q5_BAD), ordered=False)


def test_footers_bound_an_integral_keys_distinct_values_for_tables_without_statistics(spark, home, tpch):
    """Re-planning over tables without statistics: an integral column's footer range bounds its distinct values
    (TPC-H's lineitem.l_suppkey holds SF × 10,000 suppliers' keys), others stay unknown; min and max are the
    footers'."""
    from aipq.engine.storage import local_storage

    entry = Catalog(home).lookup("default.lineitem")
    rows = duckdb.connect().execute(f"SELECT count(*), count(DISTINCT l_suppkey), min(l_shipdate) "
                                    f"FROM read_parquet('{entry.path}')").fetchone()
    footers = footer_statistics(spark, local_storage(), entry)
    assert footers.rows == rows[0]
    found = footers.columns
    assert found["l_suppkey"].ndv == rows[1] == 100
    assert found["l_comment"].ndv == 0 and found["l_shipdate"].min_value == rows[2].isoformat()
    assert found["l_orderkey"].ndv <= rows[0]
