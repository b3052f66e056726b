"""A scan's filter conjuncts run cheap and selective first, and never move a conjunct that could fail ahead of
one the query wrote before it."""

from __future__ import annotations

import sqlglot
from conftest import LOCAL_FILES, oracle_rows, run_to_rows

from aipq.config import Settings
from aipq.pipeline import plan_query
from aipq.planner.logical import Scan, render
from aipq.planner.predicate_order import conjunct_rank
from aipq.tpch.queries import query_text


def scan_filters(tpch, sql: str, table: str, **settings) -> list[str]:
    dag = plan_query(sql, tpch, Settings(**settings), LOCAL_FILES).dag
    scans = [n for s in dag.stages for n in s.plan.walk() if isinstance(n, Scan) and n.table.name == table]
    return [render(c).replace("`", "") for c in scans[0].filters]


def test_q6_evaluates_its_date_range_before_the_decimal_comparisons(tpch):
    filters = scan_filters(tpch, query_text(6), "lineitem")
    assert all("l_shipdate" in f for f in filters[:2]), filters
    assert all("l_shipdate" not in f for f in filters[2:]), filters


def test_a_conjunct_that_could_fail_keeps_its_place_behind_its_guard(tpch):
    sql = ("select count(*) from customer where c_phone rlike '^[0-9]+$' and cast(c_phone as int) > 5 "
           "and c_nationkey = 3")
    filters = scan_filters(tpch, sql, "customer")
    assert "c_nationkey = 3" in filters[0]
    assert filters.index(next(f for f in filters if "RLIKE" in f.upper())) < filters.index(
        next(f for f in filters if "CAST" in f.upper()))


def test_ranks_cost_over_rows_removed():
    types = {"d": "date", "x": "decimal(15,2)", "s": "string", "i": "int"}

    def rank(sql: str) -> float:
        return conjunct_rank(sqlglot.parse_one(sql, read="spark"), types)

    assert rank("i = 3") < rank("i > 3") < rank("i <> 3")
    assert rank("d >= CAST('1994-01-01' AS DATE)") < rank("x >= 0.05") < rank("s LIKE '%x%'")
    assert rank("x <= 0.06 + 0.01") == rank("x <= 0.07")  # arithmetic over literals is a constant
    assert rank("s = 5") == float("inf")  # a string compared with a number is cast row by row: may fail
    assert rank("upper(s) = 'A'") == float("inf")


def test_reordered_scans_give_the_oracles_rows_under_ansi(aipq, duck, tmp_path):
    sql = ("select count(*) from customer where c_phone rlike '^[0-9]+$' and cast(c_phone as int) > 5 "
           "and c_nationkey = 3 and c_acctbal > 0")
    assert run_to_rows(aipq, tmp_path, "--sql", sql, "--dialect", "spark") == oracle_rows(duck, sql, "spark")
    q6 = query_text(6)
    assert run_to_rows(aipq, tmp_path, "--sql", q6) == oracle_rows(duck, q6)
