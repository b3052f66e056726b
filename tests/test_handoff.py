"""Do no harm (issue 82): a query in which aipq chooses nothing runs as Spark plans its SQL, with DuckDB's rows;
forcing switches and aipq's own techniques keep aipq's plan; explain says which."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sqlglot
from conftest import ALL_QUERIES, assert_same_rows, oracle_rows, run_to_rows

import aipq
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.handoff import (
    HANDED_OFF,
    HandoffRefused,
    aipq_interventions,
    handoff_decision,
    named_outputs,
    run_handed_off,
)
from aipq.engine.table_reads import VIEW_PREFIX, session_table_reads
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text
from aipq.workflow.query import QueryRun, execute, query_handoff

# The default lane runs a few (a subquery, an outer join, NOT IN, a disjunction across a join); the matrix all 22.
QUICK = (3, 13, 16, 19)
QUERIES = [pytest.param(n, marks=() if n in QUICK else pytest.mark.matrix) for n in ALL_QUERIES]


def _planned(context: RunContext, sql: str):
    return plan_query(sql, context.catalog, context.settings, context.storage, costing=context.join_costing())


@pytest.fixture(scope="module")
def context(home, spark, tpch_statistics) -> RunContext:
    """aipq's own context on the tests' session, not a caller's: the session's temporary views (other test files
    leave some, e.g. the benchmarks' ``lineitem``) would shadow the catalog's tables, whose statistics the rule
    reads."""
    return RunContext(home, Settings())


@pytest.mark.parametrize("number", QUERIES)
def test_every_tpch_query_handed_to_spark_gives_duckdbs_rows(context, spark, duck, number):
    sql = query_text(number)
    planned = _planned(context, sql)
    record, _ = run_handed_off(context, planned.statement, planned.dag, "test")
    try:
        rows = [tuple(r) for r in spark.read.parquet(record.result_path).collect()]
        assert [m.operator for m in record.stages] == [HANDED_OFF]
        assert record.result_rows == record.stages[0].rows_written == len(rows)
    finally:
        QueryRun(spark, planned, record, context.storage).close()
    assert_same_rows(rows, oracle_rows(duck, sql), ordered="order by" in sql.lower())
    views = {v.name for v in spark.catalog.listTables() if v.name.startswith(VIEW_PREFIX)}
    assert views <= set(session_table_reads(spark)._views.values()), "one view per kept read, none per run"


@pytest.mark.parametrize("number", QUERIES)
def test_a_query_where_aipq_builds_a_summary_is_never_handed_off(context, number):
    """The rule reads the plan-time decisions; a run of aipq's plan that builds a summary must not have been a
    query the rule hands to Spark (run with aipq's plan, β low so that summaries are chosen)."""
    settings = Settings(beta=-1000.0, broadcast_threshold=0, handoff="auto", transfer_choice="off")
    own = context.with_settings(replace(settings, handoff="off"))
    planned = _planned(own, query_text(number))
    ran = execute(planned, own)
    try:
        built = [s for m in ran.record.stages for s in m.summaries]
    finally:
        ran.close()
    handoff = query_handoff(planned, context.with_settings(settings))
    if built:
        assert not handoff.chosen, f"Q{number} built {len(built)} summaries but was handed off: {handoff.why}"
    else:
        assert handoff.chosen or "aipq's plan" in handoff.why


def test_a_simple_query_is_handed_off_and_says_so(aipq, tmp_path, tpch_statistics):
    sql = "SELECT n_regionkey, count(*) AS c FROM nation GROUP BY n_regionkey ORDER BY n_regionkey"
    report = tmp_path / "report.json"
    result = aipq("run", "--sql", sql, "--output", str(tmp_path / "out.csv"), "--force", "--quiet",
                  "--report", str(report), "--handoff", "auto")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.csv").read_text().splitlines()[1:] == [f"{r},5" for r in range(5)]
    run = json.loads(report.read_text())["result"]
    assert run["handoff"]["chosen"] and [s["staging"][:15] for s in run["stages"].values()] == ["handed to Spark"]
    explained = aipq("explain", "--sql", sql, "--handoff", "auto")
    assert "handed to Spark" in explained.output
    assert "handed to Spark" in aipq("explain", "--sql", sql, "--analyze", "--handoff", "auto").output


@pytest.mark.parametrize("forcing", [["--ip", "always"], ["--ip", "off"], ["--staging", "hive"],
                                     ["--handoff", "off"]])
def test_forcing_switches_run_aipqs_plan(aipq, tmp_path, duck, tpch_statistics, forcing):
    sql = "SELECT n_regionkey, count(*) AS c FROM nation GROUP BY n_regionkey"
    explained = aipq("explain", "--sql", sql, "--handoff", "auto", *forcing)
    assert "handed to Spark" not in explained.output and "aipq's plan runs" in explained.output
    rows = run_to_rows(aipq, tmp_path, "--sql", sql, "--handoff", "auto", *forcing)
    assert_same_rows(rows, oracle_rows(duck, sql), ordered=False)
    report = tmp_path / "report.json"
    assert aipq("run", "--sql", sql, "--quiet", "--report", str(report), "--handoff", "auto", *forcing).exit_code == 0
    run = json.loads(report.read_text())["result"]
    assert run["handoff"] is None and not any("handed to Spark" in s["staging"] for s in run["stages"].values())


def test_the_api_hands_back_sparks_dataframe_and_sees_the_users_views(spark, home, tpch, tpch_statistics):
    spark.createDataFrame([(0,), (1,)], "r int").createOrReplaceTempView("handoff_regions")
    sql = ("SELECT n_regionkey, count(*) AS c FROM nation JOIN handoff_regions ON n_regionkey = r "
           "GROUP BY n_regionkey ORDER BY n_regionkey")
    callers = {key: spark.conf.get(key, None) for key in ("spark.aipq.longDecimalAggregates", "spark.sql.ansi.enabled")}
    for _ in range(2):  # the first run may collect the view's statistics
        result = aipq.sql(sql, spark=spark, home=home, handoff="auto")
    assert result.run["result_rows"] is None  # Spark's DataFrame, not collected by the call
    assert result.rows == [(0, 5), (1, 5)] and result.run["handoff"]["chosen"]
    assert result.run["result_rows"] == 2  # counted when read
    again = aipq.sql(sql, spark=spark, home=home, handoff="auto")
    assert len(again.rows) == 2  # read before the record: its one stage's rows are counted, beside its estimate
    assert [stage["rows_written"] for stage in again.run["stages"].values()] == [2]
    assert [tuple(r) for r in result.dataframe.collect()] == result.rows
    assert result.dataframe.columns == ["n_regionkey", "c"]
    # it runs when read, under aipq's settings on the call's clone of the session; the caller's stay as they were
    own = result.dataframe.sparkSession.conf
    assert own.get("spark.aipq.longDecimalAggregates") == "true" and own.get("spark.sql.shuffle.partitions") == "8"
    assert {key: spark.conf.get(key, None) for key in callers} == callers


def test_sql_spark_refuses_gets_aipqs_own_error_not_an_internal_one(aipq, tpch_statistics):
    refused = aipq("run", "--handoff", "auto", "--sql", "select unknown_fn(n_name) from nation")
    assert refused.exit_code == 2, refused.output
    assert "internal error" not in refused.output and "unknown_fn" in refused.output.lower()


# Over nulls_a/nulls_b (NULL keys on both sides): Spark's plan of an IN subquery's value answers false where SQL's
# is NULL, so these keep aipq's plan; as WHERE filters (through AND/OR, or negated right above) Spark's rows are
# SQL's, so those are handed off.
IN_AS_VALUE = {
    "IN in the SELECT list": "select k, k in (select k from nulls_b) as m from nulls_a",
    "NOT IN in the SELECT list": "select k, k not in (select k from nulls_b) as m from nulls_a",
    "IS NULL over IN": "select k from nulls_a where (k in (select k from nulls_b)) is null",
    "COALESCE over IN": "select k from nulls_a where coalesce(k in (select k from nulls_b), true)",
    "NOT above an OR": "select k from nulls_a where not (g = 30 or k in (select k from nulls_b))",
}
IN_AS_FILTER = {
    "IN": "select k, v from nulls_a where k in (select k from nulls_b)",
    "NOT IN": "select k, v from nulls_a where k not in (select k from nulls_b where k is not null)",
    "NOT IN over a NULL": "select k, v from nulls_a where not (k in (select k from nulls_b))",
    "NOT IN under OR": "select k, v from nulls_a where v = 'e' or not (k in (select k from nulls_b))",
    "IN under OR and AND": "select k, v from nulls_a where (g = 20 or k in (select k from nulls_b)) and v <> 'd'",
}


@pytest.mark.parametrize("case", sorted(IN_AS_VALUE))
def test_an_in_subquerys_value_keeps_aipqs_plan_and_sqls_null(aipq, context, small_tables, tmp_path, case):
    sql = IN_AS_VALUE[case]
    planned = _planned(context, sql)
    handoff = handoff_decision(context.settings, planned.dag, planned.statement, ())
    assert not handoff.chosen and "IN subquery" in handoff.why
    assert "aipq's plan runs: an IN subquery's value is used outside a filter" in aipq("explain", "--sql", sql).output
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql), oracle_rows(small_tables, sql), ordered=False)


@pytest.mark.parametrize("case", sorted(IN_AS_FILTER))
def test_in_subquery_filters_handed_to_spark_give_duckdbs_rows(context, spark, small_tables, case):
    sql = IN_AS_FILTER[case]
    planned = _planned(context, sql)
    assert handoff_decision(context.settings, planned.dag, planned.statement, ()).chosen
    record, _ = run_handed_off(context, planned.statement, planned.dag, "test")
    try:
        rows = [tuple(r) for r in spark.read.parquet(record.result_path).collect()]
    finally:
        QueryRun(spark, planned, record, context.storage).close()
    assert_same_rows(rows, oracle_rows(small_tables, sql), ordered=False)


def test_a_handed_off_run_spark_fails_runs_aipqs_plan_for_its_error(aipq, context, small_tables):
    sql = "select k, (select b.k from nulls_b b where b.g = a.g) from nulls_a a"
    planned = _planned(context, sql)
    with pytest.raises(HandoffRefused, match="(?i)more than one row"):
        run_handed_off(context, planned.statement, planned.dag, "test")
    for _ in range(2):  # the first run may collect the tables' statistics; the second is handed off, then refused
        failed = aipq("run", "--sql", sql)
        assert failed.exit_code == 1 and "internal error" not in failed.output
        assert "more than one row returned by a subquery used as an expression" in failed.output


def test_a_cte_grouped_once_and_read_twice_is_no_reason_to_keep_aipqs_plan(context):
    """A GROUP BY that two readers share (a CTE read twice, TPC-H Q15's revenue) is computed once by Spark's plan
    too (the same exchange in both references, reused), so it is not aipq's own; a map-side subplan two readers
    share (``planner/shared.py``'s merge) is, and keeps aipq's plan."""
    cte = _planned(context, query_text(15)).dag
    read_twice = [p for p, readers in cte.dataflow.items() if len(readers) > 1]
    assert read_twice and {s.operator for s in cte.stages if s.id in read_twice} == {"GROUP-BY"}
    assert not any("several readers" in found for found in aipq_interventions(cte, ()))
    always = context.with_settings(replace(context.settings, share_subplans="always"))
    merged = _planned(always, query_text(11)).dag
    assert merged.plan.shared_notes
    assert any("several readers" in found for found in aipq_interventions(merged, ()))


@pytest.mark.parametrize(("sql", "names", "expected"), [
    ("select count(*) from t", ["_c0"], "SELECT COUNT(*) AS `_c0` FROM t"),
    ("select a, t.b, c + 1, d as e from t order by a", ["a", "b", "_c2", "e"],
     "SELECT a, t.b, c + 1 AS `_c2`, d AS e FROM t ORDER BY a"),
    ("select A from t", ["a"], "SELECT A AS `a` FROM t"),
    ("select * from t", ["a", "b"], "SELECT * FROM t"),  # a star: Spark's names are the columns'
    ("select t.* from t", ["a"], "SELECT t.* FROM t"),
    ("select a, a from t", ["a", "a"], "SELECT a, a FROM t"),  # a name twice: renamed afterwards
    ("select a from t union all select b from u", ["a"], "SELECT a FROM t UNION ALL SELECT b FROM u"),
])
def test_a_handed_off_select_names_its_columns_as_aipq_does(sql, names, expected):
    assert named_outputs(sqlglot.parse_one(sql, read="hive"), names).sql(dialect="spark") == expected
