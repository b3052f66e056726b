"""Pre-aggregation below a repartition join (``--preaggregate auto``, issue 42): applied where the statistics say
it pays, shown in explain, never where it would change a result, and DuckDB's rows wherever it is applied."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.engine.footers import FooterStatistics
from aipq.estimator.join_estimates import JoinEstimates, KnownTables, join_costing
from aipq.estimator.parameters import load_calibration
from aipq.pipeline import plan_query
from aipq.stats.repository import ColumnStats
from aipq.tpch.queries import query_text

REPARTITION = ("--broadcast-threshold", "0")

# Aggregates of lineitem's columns only, grouped by columns of both inputs: lineitem is pre-aggregated by
# l_orderkey (about four lines an order).
BOTH_SIDES_GROUPED = """
select o_orderpriority, l_returnflag, count(*) as lines, count(l_comment) as commented, sum(l_quantity) as qty,
       min(l_shipdate) as first_ship, max(l_extendedprice) as dearest
from lineitem join orders on l_orderkey = o_orderkey
where o_orderdate >= date '1995-01-01'
group by o_orderpriority, l_returnflag
"""
ORDERS_GROUPED = """
select o_orderpriority, count(*) as lines, sum(l_quantity) as qty
from lineitem join orders on l_orderkey = o_orderkey group by o_orderpriority
"""
# No row survives the join: COUNT of nothing is 0 and SUM of nothing NULL, with or without the partial step.
NOTHING_JOINS = """
select count(*), count(l_quantity), sum(l_quantity), max(l_quantity)
from lineitem join orders on l_orderkey = o_orderkey where o_orderdate < date '1900-01-01'
"""
NOT_DECOMPOSABLE = {
    "distinct": "select o_orderpriority, count(distinct l_suppkey) from lineitem join orders "
                "on l_orderkey = o_orderkey group by o_orderpriority",
    "both inputs": "select o_orderpriority, sum(l_quantity * o_totalprice) from lineitem join orders "
                   "on l_orderkey = o_orderkey group by o_orderpriority",
    "average": "select o_orderpriority, avg(l_quantity) from lineitem join orders "
               "on l_orderkey = o_orderkey group by o_orderpriority",
}


def preaggregations(aipq, *args: str) -> list[str]:
    result = aipq("explain", "--format", "json", "--preaggregate", "auto", *REPARTITION, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["preaggregation"]


@pytest.mark.parametrize("strategy", ["off", "adaptive"])
@pytest.mark.parametrize("staging", ["hive", "adaptive"])
def test_preaggregated_queries_give_the_oracles_rows(aipq, duck, tmp_path, strategy, staging):
    for sql in (BOTH_SIDES_GROUPED, NOTHING_JOINS, query_text(3), query_text(18)):
        args = ("--ip", strategy, "--staging", staging, "--preaggregate", "always", *REPARTITION)
        assert preaggregations(aipq, "--sql", sql, *args), sql
        actual = run_to_rows(aipq, tmp_path, "--sql", sql, *args)
        assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())
        assert actual, sql


def test_the_statistics_decide_where_and_explain_says_so(aipq, tpch_statistics):
    # at SF 0.01 a partial aggregate's stage costs more than the shuffle it saves
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--staging", "adaptive", "--ip", "off") == []
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--preaggregate", "off") == []
    default = aipq("explain", "--format", "json", *REPARTITION, "--sql", ORDERS_GROUPED)
    assert json.loads(default.output)["preaggregation"] == []  # off unless asked for


def sf1_costing(home, settings: Settings, orders_date_days: int = 2400) -> object:
    """Join costing with TPC-H SF 1's rows and keys (lineitem's 6 million lines of 1.5 million orders), from
    footers made up for it: what pre-aggregation is priced with at that scale."""
    def column(name: str, rows: int, ndv: float, low: str | None = None, high: str | None = None) -> ColumnStats:
        return ColumnStats(name, "date" if low else "bigint", rows, 0, ndv, 0, 8.0, low, high)

    end = (date(1992, 1, 1) + timedelta(days=orders_date_days)).isoformat()
    tables = {"lineitem": FooterStatistics(6_000_000, {"l_orderkey": column("l_orderkey", 6_000_000, 1_500_000)}),
              "orders": FooterStatistics(1_500_000, {
                  "o_orderkey": column("o_orderkey", 1_500_000, 1_500_000),
                  "o_orderpriority": column("o_orderpriority", 1_500_000, 5),
                  "o_custkey": column("o_custkey", 1_500_000, 100_000),
                  "o_orderdate": column("o_orderdate", 1_500_000, 2_400, "1992-01-01", end)}),
              "customer": FooterStatistics(150_000, {"c_custkey": column("c_custkey", 150_000, 150_000),
                                                     "c_mktsegment": column("c_mktsegment", 150_000, 5)})}
    estimates = JoinEstimates(KnownTables(None, LOCAL_FILES), footers=lambda scan: tables[scan.table.name])
    return join_costing(settings, KnownTables(None, LOCAL_FILES), load_calibration(home), 2, estimates)


@pytest.mark.parametrize("staging, ip, applied", [
    ("adaptive", "off", True),  # 1.5 million groups shuffled once instead of 6 million lines
    ("hive", "off", False),  # written, read back and shuffled again: more than half the lines' cost
    ("adaptive", "adaptive", True),  # orders' summary keeps every line: nothing to prune first
])
def test_at_scale_the_partial_groups_pay_only_where_they_are_shuffled_once(home, tpch, staging, ip, applied):
    settings = Settings(preaggregate="auto", staging=staging, ip=ip, broadcast_threshold=0)
    planned = plan_query(ORDERS_GROUPED, Catalog(home), settings, LOCAL_FILES,
                         costing=sf1_costing(home, settings))
    notes = planned.dag.plan.preaggregations
    assert (notes and "lineitem grouped by l_orderkey, about 1,500,000 groups" in notes[0]) if applied else not notes


def test_a_summary_that_prunes_the_input_first_leaves_little_to_save(home, tpch):
    """Orders of one month keep about 1 line in 80 after their summary: the partial stage's fixed cost is then
    more than half of shuffling what is left, though without information passing it pays."""
    sql = ORDERS_GROUPED.replace("group by", "where o_orderdate < date '1992-02-01' group by")
    for ip, applied in (("off", True), ("adaptive", False)):
        settings = Settings(preaggregate="auto", staging="adaptive", ip=ip, broadcast_threshold=0)
        planned = plan_query(sql, Catalog(home), settings, LOCAL_FILES, costing=sf1_costing(home, settings))
        assert bool(planned.dag.plan.preaggregations) == applied, ip


def test_an_input_that_is_a_join_is_not_pre_aggregated(home, tpch):
    """Its rows are an estimate built on estimates (TPC-H Q5's five-table input was estimated 50× too large):
    lineitem ⋈ orders grouped by o_custkey would look like 6 million rows in 100,000 groups."""
    sql = ("select c_mktsegment, sum(l_quantity) as qty from lineitem join orders on l_orderkey = o_orderkey "
           "join customer on o_custkey = c_custkey group by c_mktsegment")
    settings = Settings(preaggregate="auto", staging="adaptive", ip="off", broadcast_threshold=0)
    planned = plan_query(sql, Catalog(home), settings, LOCAL_FILES, costing=sf1_costing(home, settings))
    assert planned.dag.plan.preaggregations == ()
    forced = plan_query(sql, Catalog(home), replace(settings, preaggregate="always"), LOCAL_FILES,
                        costing=sf1_costing(home, settings))
    assert any("lineitem ⋈ orders grouped by o_custkey" in note for note in forced.dag.plan.preaggregations)


@pytest.mark.parametrize("kind", sorted(NOT_DECOMPOSABLE))
def test_aggregates_that_do_not_decompose_are_not_preaggregated(aipq, kind):
    assert preaggregations(aipq, "--sql", NOT_DECOMPOSABLE[kind], "--preaggregate", "always") == []


def test_without_statistics_nothing_is_preaggregated_unless_asked(aipq):
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--statistics", "off") == []
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--statistics", "off", "--preaggregate", "always")
