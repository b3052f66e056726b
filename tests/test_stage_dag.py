"""Stage DAG shapes: the paper's job plans, linear and bushy, with both graphs and consumer keys."""

from __future__ import annotations

import json

import pytest
from conftest import LOCAL_FILES, local_bytes

from aipq.config import Settings
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text

REPARTITION = dict(broadcast_threshold=0)


def dag_of(tpch, number: int, **settings):
    """The DAG of the paper's job plan: hive staging, no summary pre-pass stages unless asked for."""
    settings = {"ip": "off", "staging": "hive", **settings}
    return plan_query(query_text(number), tpch, Settings(**settings), LOCAL_FILES).dag


def test_linear_q5_is_a_chain_of_join_stages(tpch):
    dag = dag_of(tpch, 5, plan="linear", **REPARTITION)
    assert [s.operator for s in dag.stages] == ["JOIN"] * 5 + ["GROUP-BY", "SORT"]
    for earlier, later in zip(dag.stages, dag.stages[1:]):
        assert dag.dependency[later.id] == [earlier.id]
        assert dag.dataflow[earlier.id] == [later.id]
    assert dag.stage(1).consumer_keys == ("o_orderkey",)


def test_bushy_q5_has_sibling_stages_joined_later(tpch):
    dag = dag_of(tpch, 5, plan="bushy", **REPARTITION)
    three = dag.stage(3)
    assert three.operator == "JOIN" and sorted(three.input_stages) == [1, 2]
    assert dag.siblings(1) == [2] and dag.siblings(2) == [1]
    # c_nationkey = s_nationkey travels with o_orderkey = l_orderkey: a two-column join of intermediates.
    assert set(dag.stage(1).consumer_keys) == {"o_orderkey", "c_nationkey"}


def test_broadcast_joins_small_tables_map_side(tpch):
    dag = dag_of(tpch, 5, plan="linear")  # SF 0.01: every table is under 10 MB
    assert [s.operator for s in dag.stages] == ["GROUP-BY", "SORT"]
    assert dag.stages[0].broadcast_joins == 5


def _broadcast_tables(dag) -> set[str]:
    from aipq.planner.logical import Join, Scan

    found = set()
    for stage in dag.stages:
        for node in stage.plan.walk():
            if isinstance(node, Join) and node.physical == "broadcast":
                side = node.left if node.broadcast_side == "left" else node.right
                found |= {n.table.name for n in side.walk() if isinstance(n, Scan)}
    return found


def test_a_table_input_is_sized_for_broadcast_by_the_columns_it_reads(tpch):
    """As Spark's planner sizes a pruned scan: Q3 reads two of customer's eight columns, so half its files'
    bytes as the threshold is enough to broadcast it by its estimated size, not by its files."""
    from aipq.planner.logical import Scan
    from aipq.planner.physical import read_share

    half = local_bytes(tpch.lookup("customer").path) // 2
    estimated = dag_of(tpch, 3, broadcast_threshold=half, broadcast_sizes="estimated")
    assert "customer" in _broadcast_tables(estimated)
    assert "customer" not in _broadcast_tables(dag_of(tpch, 3, broadcast_threshold=half, broadcast_sizes="files"))
    [scan] = [n for s in estimated.stages for n in s.plan.walk() if isinstance(n, Scan) and n.table.name == "customer"]
    assert 0.1 < read_share(scan) < 0.25  # (8 + c_custkey's 8) / (8 + the 124 of customer's columns)


def test_a_filtered_table_is_sized_by_the_rows_its_filters_keep():
    from dataclasses import replace

    from sqlglot import exp

    from aipq.catalog import TableEntry
    from aipq.planner.logical import Scan
    from aipq.planner.physical import estimated_pipeline_bytes

    table = TableEntry("default", "t", "/t", "parquet", (("k", "bigint"), ("v", "bigint")))
    scan = Scan(table, "t", (("k", "k"), ("v", "v")))
    filtered = replace(scan, filters=(exp.condition("k < 10"),))
    sizes = {"/t": 1000}.get
    assert estimated_pipeline_bytes(scan, sizes) == 1000
    rows = {id(filtered): 25.0}.get
    assert estimated_pipeline_bytes(filtered, sizes, lambda node: rows(id(node), 100.0)) == 250
    assert estimated_pipeline_bytes(filtered, sizes, lambda node: None) == 1000  # no statistics: its files


@pytest.mark.parametrize("kept, files_sized, estimated_sized, cautious_sized", [
    (25.0, 1000, 250, 1000),  # a quarter of its rows: eight times the estimate is more than its files
    (1.0, 1000, 10, 80),  # a hundredth: eight times the estimate
])
def test_cautious_sizing_takes_the_files_or_eight_times_the_estimate_whichever_is_less(
        kept, files_sized, estimated_sized, cautious_sized):
    from dataclasses import replace

    from sqlglot import exp

    from aipq.catalog import TableEntry
    from aipq.planner.logical import Scan
    from aipq.planner.physical import broadcast_size

    table = TableEntry("default", "t", "/t", "parquet", (("k", "bigint"), ("v", "bigint")))
    scan = replace(Scan(table, "t", (("k", "k"), ("v", "v"))), filters=(exp.condition("k < 10"),))
    sizes, rows = {"/t": 1000}.get, (lambda node: kept if node is scan else 100.0)
    assert [broadcast_size(scan, sizes, rows, how) for how in ("files", "estimated", "cautious")] == \
        [files_sized, estimated_sized, cautious_sized]
    assert broadcast_size(scan, sizes, None, "cautious") == 1000  # no statistics: its files


def test_cautious_sizing_takes_the_columns_share_of_the_files_without_a_margin():
    """The columns' share is Spark's own sizing: an unfiltered table whose columns read fit is broadcast as
    ``spark.sql`` broadcasts it (TPC-H Q8's customer at SF 1: two of eight columns, 14 MB of files); only the
    filters' share of the rows, an estimate, takes the margin."""
    from dataclasses import replace

    from sqlglot import exp

    from aipq.catalog import TableEntry
    from aipq.planner.logical import Scan
    from aipq.planner.physical import broadcast_size, read_share

    columns = (("k", "bigint"), ("v", "bigint"), ("a", "string"), ("b", "string"))
    scan = Scan(TableEntry("default", "t", "/t", "parquet", columns), "t", (("k", "k"),))
    sizes, share = {"/t": 1000}.get, read_share(scan)
    assert 0 < share < 0.5
    assert broadcast_size(scan, sizes, None, "cautious") == pytest.approx(1000 * share)
    filtered = replace(scan, filters=(exp.condition("k < 10"),))

    def rows(kept: float):
        return lambda node: kept if node is filtered else 100.0

    assert broadcast_size(filtered, sizes, rows(1.0), "cautious") == pytest.approx(1000 * share * 8 / 100)
    assert broadcast_size(filtered, sizes, rows(50.0), "cautious") == pytest.approx(1000 * share)


def test_dependency_graph_is_the_reverse_of_the_dataflow_graph(tpch):
    for number in (3, 5, 7, 8, 9, 10):
        for plan in ("linear", "bushy"):
            dag = dag_of(tpch, number, plan=plan, **REPARTITION)
            forward = {(p, c) for p, cs in dag.dataflow.items() for c in cs}
            backward = {(p, c) for c, ps in dag.dependency.items() for p in ps}
            assert forward == backward
            assert [s.id for s in dag.stages] == sorted(s.id for s in dag.stages)
            assert all(p < c for p, c in forward), "stages run after their inputs"


def test_joins_on_one_key_share_a_stage(tpch):
    sql = ("select count(*) from lineitem l1 join lineitem l2 on l1.l_orderkey = l2.l_orderkey "
           "join orders on o_orderkey = l1.l_orderkey")
    dag = plan_query(sql, tpch, Settings(**REPARTITION), LOCAL_FILES).dag
    assert [s.operator for s in dag.stages] == ["JOIN", "GROUP-BY"]
    assert len(dag.stages[0].merged_joins()) == 2


def test_stage_outputs_hold_only_what_consumers_read(tpch):
    dag = dag_of(tpch, 3, plan="linear", **REPARTITION)
    assert dag.stage(1).output_columns == ("o_orderkey", "o_orderdate", "o_shippriority")


def test_explain_formats(aipq):
    tree = aipq("explain", "tpch:9", "--plan", "bushy", "--broadcast-threshold", "0")
    assert tree.exit_code == 0 and "S1" in tree.output and "JOIN" in tree.output
    info = json.loads(aipq("explain", "tpch:9", "--format", "json", "--broadcast-threshold", "0", "--ip", "off").output)
    assert info["stages"][0]["reduce"]["joins"][0]["keys"]
    assert info["settings"]["broadcast_threshold"]["value"] == 0
    assert info["dependency_graph"] and info["dataflow_graph"]
    dot = aipq("explain", "tpch:3", "--format", "dot", "--broadcast-threshold", "0").output
    assert dot.startswith("digraph") and "S1 -> S2" in dot


def _explained(aipq, number: int) -> list[dict]:
    result = aipq("explain", f"tpch:{number}", "--format", "json", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["stages"]


def _joins(stages: list[dict]) -> list[dict]:
    return [j for s in stages for j in s["reduce"].get("joins", [])]


def test_explain_shows_q21_exists_and_not_exists_as_semi_and_anti_join_stages(aipq):
    stages = _explained(aipq, 21)
    kinds = [j["kind"] for j in _joins(stages)]
    assert "semi" in kinds and "anti" in kinds
    anti = next(j for j in _joins(stages) if j["kind"] == "anti")
    assert anti["residual"] and "<>" in anti["residual"]  # l3.l_suppkey <> l1.l_suppkey stays a join condition


def test_explain_shows_correlated_scalar_subqueries_as_grouped_stages_joined_back(aipq):
    for number in (2, 17):
        stages = _explained(aipq, number)
        grouped = [s for s in stages if s["operator"] == "GROUP-BY" and s["reduce"]["group_by"]]
        consumers = {i["stage"] for s in stages for i in s["inputs"] if i["kind"] == "stage"
                     and s["operator"] == "JOIN"}
        assert any(g["id"] in consumers for g in grouped), number


def test_explain_shows_q20_in_subqueries_as_semi_joins_over_an_aggregate(aipq):
    stages = _explained(aipq, 20)
    assert [j["kind"] for j in _joins(stages)].count("semi") == 2
    assert any(s["operator"] == "GROUP-BY" and s["reduce"]["group_by"] for s in stages)


def test_a_disjunction_over_two_tables_filters_each_of_them(tpch):
    """Q7's ((n1 = FRANCE and n2 = GERMANY) or (n1 = GERMANY and n2 = FRANCE)) implies a filter on each nation
    scan; the condition itself stays on the join."""
    from aipq.planner.logical import Scan, render

    dag = dag_of(tpch, 7, **REPARTITION)
    nations = [n for s in dag.stages for n in s.plan.walk() if isinstance(n, Scan) and n.table.name == "nation"]
    assert len(nations) == 2
    for scan in nations:
        [condition] = [render(f) for f in scan.filters]
        assert "'FRANCE'" in condition and "'GERMANY'" in condition and " OR " in condition


def test_a_disjunction_implies_nothing_for_a_table_one_branch_leaves_free():
    from sqlglot import parse_one

    from aipq.planner.pushdown import implied_filter

    condition = parse_one("(a = 1 AND b = 2) OR (b = 3 AND c > a)")
    assert implied_filter(condition, {"a"}) is None  # the second branch constrains a only together with c
    implied = implied_filter(condition, {"b"})
    assert implied is not None and implied.sql() == "b = 2 OR b = 3"
    assert implied_filter(parse_one("a = 1 AND b = 2"), {"a"}) is None  # conjuncts are pushed as they are
    assert implied_filter(parse_one("(a = 1 AND b = 2) OR (a = 2)"), {"a"}).sql() == "a = 1 OR a = 2"


def _scan_filters(dag) -> dict[str, list[str]]:
    from aipq.planner.logical import Scan, render

    return {n.table.name: [render(f) for f in n.filters]
            for s in dag.stages for n in s.plan.walk() if isinstance(n, Scan)}


def test_a_where_on_the_preserved_side_of_an_outer_join_filters_that_side_first(tpch):
    """WHERE conditions reading only the preserved input of a LEFT or RIGHT join filter it before the join (as
    Spark pushes them); those reading the NULL-supplying side, and any over a FULL join, stay above the join."""
    where = ("WHERE c_mktsegment = 'BUILDING' AND o_orderstatus IS NULL AND o_orderkey IS NULL "
             "AND (c_acctbal > 0 OR o_totalprice > 5)")
    for joined in ("customer LEFT JOIN orders ON c_custkey = o_custkey",
                   "orders RIGHT JOIN customer ON c_custkey = o_custkey"):
        sql = f"SELECT c_name, o_orderkey FROM {joined} {where}"
        filters = _scan_filters(plan_query(sql, tpch, Settings(ip="off"), LOCAL_FILES).dag)
        assert filters["customer"] == ["`c_mktsegment` = 'BUILDING'"], joined
        assert filters["orders"] == [], joined
    full = f"SELECT c_name, o_orderkey FROM customer FULL JOIN orders ON c_custkey = o_custkey {where}"
    filters = _scan_filters(plan_query(full, tpch, Settings(ip="off"), LOCAL_FILES).dag)
    assert filters == {"customer": [], "orders": []}
