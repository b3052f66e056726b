"""A semi join whose preserved side fits is broadcast from that side (``physical._semi_join_preserved_side``):
the preserved rows numbered, the large input joined to them where it is read, each number kept once. DuckDB's
rows, duplicates of preserved rows, NULL keys and residual conditions included."""

from __future__ import annotations

import json

import pytest
from conftest import assert_same_rows, oracle_rows, run_to_rows

from aipq.tpch.queries import query_text

# lineitem's columns read are above it at SF 0.01, a quarter of orders' and nation's below it
THRESHOLD = ("--broadcast-threshold", "100KB")

CASES = {
    "TPC-H Q4": query_text(4),
    "NULL keys on the preserved side": """select k from (select case when n_nationkey % 3 = 0 then null
        else n_nationkey end as k from nation) t where exists (select 1 from lineitem where l_suppkey = t.k)""",
    "a residual condition": """select o_orderkey, o_totalprice from orders where o_orderdate < date '1992-03-01'
        and exists (select 1 from lineitem where l_orderkey = o_orderkey and l_extendedprice * 4 > o_totalprice)""",
    "IN over the large input": """select n_name from nation where n_nationkey in
        (select l_suppkey from lineitem where l_quantity > 5)""",
}


def _semi_joins(aipq, *args: str) -> list[dict]:
    result = aipq("explain", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return [join for stage in json.loads(result.output)["stages"] for join in stage.get("broadcast_joins", [])
            if join.get("kind") == "semi"]


def test_q4s_orders_are_broadcast_and_lineitem_is_not_shuffled(aipq):
    [semi] = _semi_joins(aipq, "tpch:4", *THRESHOLD)
    assert semi["broadcast_side"] == "left"
    assert not _semi_joins(aipq, "tpch:4", "--broadcast-threshold", "0")  # repartition joins only: as before


@pytest.mark.parametrize("strategy", ["adaptive", "always"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_semi_join_broadcast_from_its_preserved_side_gives_the_oracles_rows(aipq, duck, tmp_path, case,
                                                                             strategy):
    sql = CASES[case]
    if case != "TPC-H Q4":  # the plan is the one under test
        assert any(j["broadcast_side"] == "left" for j in _semi_joins(aipq, "--sql", sql, *THRESHOLD)), case
    rows = run_to_rows(aipq, tmp_path, "--sql", sql, *THRESHOLD, "--ip", strategy)
    assert_same_rows(rows, oracle_rows(duck, sql), ordered=False)


def test_duplicate_preserved_rows_are_each_kept(aipq, duck, tmp_path):
    """Each copy of a preserved row that matches is kept: the row numbers, not the values, are made distinct."""
    workflow = tmp_path / "dups.sql"
    workflow.write_text("DROP TABLE IF EXISTS semi_dups;\n"
                        "CREATE TABLE semi_dups AS SELECT n_nationkey, n_name FROM nation "
                        "UNION ALL SELECT n_nationkey, n_name FROM nation WHERE n_nationkey < 10;\n"
                        "SELECT n_nationkey, n_name FROM semi_dups WHERE EXISTS "
                        "(SELECT 1 FROM lineitem WHERE l_suppkey = n_nationkey + 1);\n")
    rows = run_to_rows(aipq, tmp_path, str(workflow), *THRESHOLD, "--allow-overwrite")
    expected = oracle_rows(duck, "SELECT n_nationkey, n_name FROM (SELECT n_nationkey, n_name FROM nation UNION ALL "
                                 "SELECT n_nationkey, n_name FROM nation WHERE n_nationkey < 10) d WHERE EXISTS "
                                 "(SELECT 1 FROM lineitem WHERE l_suppkey = n_nationkey + 1)")
    assert len(expected) > 25  # the duplicates are in the answer
    assert_same_rows(rows, expected, ordered=False)


def test_a_table_semi_joined_with_itself_keeps_its_sides_apart(aipq, duck, tmp_path):
    """Both sides read orders: the numbered preserved rows and the joined ones must not be confused."""
    sql = """select o_orderkey, o_custkey from orders where o_orderdate < date '1992-02-01'
        and o_custkey in (select o_custkey from orders where o_totalprice > 1000)"""
    threshold = ("--broadcast-threshold", "20KB")  # the other side's one column fits 100 KB at SF 0.01
    assert any(j["broadcast_side"] == "left" for j in _semi_joins(aipq, "--sql", sql, *threshold))
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql, *threshold), oracle_rows(duck, sql), ordered=False)
