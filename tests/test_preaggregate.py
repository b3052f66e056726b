"""Pre-aggregation below a repartition join (``--preaggregate auto``, issue 42): applied where the statistics say
it pays, shown in explain, never where it would change a result, and DuckDB's rows wherever it is applied."""

from __future__ import annotations

import json

import pytest
from conftest import assert_same_rows, oracle_rows, run_to_rows

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
    # about four lines an order: grouping lineitem by l_orderkey pays where the partial stage is fused ...
    applied = preaggregations(aipq, "--sql", ORDERS_GROUPED, "--staging", "adaptive")
    assert len(applied) == 1 and "lineitem grouped by l_orderkey, about" in applied[0]
    # ... but not where it is a stage of its own, written and read back (a stage's fixed cost at SF 0.01)
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--staging", "hive") == []
    # l_returnflag's three values times the orders: about as many groups as lines
    assert preaggregations(aipq, "--sql", BOTH_SIDES_GROUPED, "--staging", "adaptive") == []
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--preaggregate", "off") == []
    default = aipq("explain", "--format", "json", *REPARTITION, "--sql", ORDERS_GROUPED)
    assert json.loads(default.output)["preaggregation"] == []  # off unless asked for


@pytest.mark.parametrize("kind", sorted(NOT_DECOMPOSABLE))
def test_aggregates_that_do_not_decompose_are_not_preaggregated(aipq, kind):
    assert preaggregations(aipq, "--sql", NOT_DECOMPOSABLE[kind], "--preaggregate", "always") == []


def test_without_statistics_nothing_is_preaggregated_unless_asked(aipq):
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--statistics", "off") == []
    assert preaggregations(aipq, "--sql", ORDERS_GROUPED, "--statistics", "off", "--preaggregate", "always")
