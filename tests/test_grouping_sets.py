"""GROUP BY GROUPING SETS, ROLLUP and CUBE (Spark's and Hive's forms) and grouping(): DuckDB's rows under every
staging and strategy, never dropped silently, and no summary below a grouping set that leaves its key out."""

from __future__ import annotations

import json

import pytest
import sqlglot
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows

from aipq.config import Settings
from aipq.ip.candidates import find_candidates
from aipq.pipeline import plan_query
from aipq.planner.grouping import expand_group_by

QUERIES = {
    "rollup": """select n_regionkey, n_name, count(*) as c, sum(n_nationkey) as s from nation
                 group by rollup(n_regionkey, n_name)""",
    "cube with grouping()": """select r_name, n_name, grouping(r_name) as gr, grouping(n_name) as gn, count(*) as c
                 from nation join region on n_regionkey = r_regionkey group by cube(r_name, n_name)""",
    "grouping sets with the grand total": """select l_returnflag, l_linestatus, sum(l_quantity) as q, count(*) as c
                 from lineitem group by grouping sets ((l_returnflag), (l_linestatus), ())""",
    "plain column beside a rollup": """select l_returnflag, l_linestatus, l_shipmode, count(*) as c from lineitem
                 where l_shipmode in ('AIR', 'MAIL') group by l_shipmode, rollup(l_returnflag, l_linestatus)""",
    "expression keys, HAVING and ORDER BY": """select year(o_orderdate) as y, o_orderpriority, count(*) as c
                 from orders group by rollup(year(o_orderdate), o_orderpriority) having count(*) > 20
                 order by y, o_orderpriority""",
    "joined with another stage": """select c_mktsegment, n_name, sum(o_totalprice) as t from customer
                 join orders on c_custkey = o_custkey join nation on c_nationkey = n_nationkey
                 where o_orderdate < date '1994-01-01' group by rollup(c_mktsegment, n_name)""",
}

# Hive's trailing forms, which DuckDB does not read: the oracle runs the equivalent standard text.
HIVE_FORMS = {
    "with rollup": ("select l_returnflag, l_linestatus, count(*) as c from lineitem "
                    "group by l_returnflag, l_linestatus with rollup",
                    "select l_returnflag, l_linestatus, count(*) as c from lineitem "
                    "group by rollup(l_returnflag, l_linestatus)"),
    "with cube": ("select l_returnflag, l_linestatus, count(*) as c from lineitem "
                  "group by l_returnflag, l_linestatus with cube",
                  "select l_returnflag, l_linestatus, count(*) as c from lineitem "
                  "group by cube(l_returnflag, l_linestatus)"),
    "trailing grouping sets": ("select l_returnflag, count(*) as c from lineitem "
                               "group by l_returnflag, l_linestatus grouping sets ((l_returnflag), ())",
                               "select l_returnflag, count(*) as c from lineitem "
                               "group by grouping sets ((l_returnflag), ())"),
}


def sets_of(sql: str) -> list[list[str]] | None:
    _, sets = expand_group_by(sqlglot.parse_one(sql, read="hive").args["group"])
    return None if sets is None else [[e.sql() for e in s] for s in sets]


def test_group_by_forms_expand_to_their_grouping_sets():
    assert sets_of("select 1 from t group by a, b") is None
    assert sets_of("select 1 from t group by rollup(a, b)") == [["a", "b"], ["a"], []]
    assert sets_of("select 1 from t group by a, cube(b, c)") == [["a", "b", "c"], ["a", "b"], ["a", "c"], ["a"]]
    assert sets_of("select 1 from t group by grouping sets ((a, b), a, ())") == [["a", "b"], ["a"], []]
    assert sets_of("select 1 from t group by rollup(a), rollup(b)") == [["a", "b"], ["a"], ["b"], []]
    assert sets_of("select 1 from t group by a, b with rollup") == [["a", "b"], ["a"], []]
    assert sets_of("select 1 from t group by a, b grouping sets ((a), (a, b))") == [["a"], ["a", "b"]]


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_grouping_sets_give_the_oracles_rows(aipq, duck, tmp_path, case):
    sql = QUERIES[case]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql)


@pytest.mark.parametrize("case", sorted(HIVE_FORMS))
def test_hives_trailing_forms_are_grouping_sets_too(aipq, duck, tmp_path, case):
    hive, standard = HIVE_FORMS[case]
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", hive), oracle_rows(duck, standard), ordered=False)


@pytest.mark.parametrize(("strategy", "staging"), [("off", "hive"), ("always", "hive"), ("always", "adaptive"),
                                                    ("adaptive", "none")])
def test_every_strategy_and_staging_keeps_the_rows(aipq, duck, tmp_path, strategy, staging):
    sql = QUERIES["joined with another stage"]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--ip", strategy, "--staging", staging,
                         "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=False)


def test_no_summary_prunes_below_a_grouping_set_that_leaves_the_key_out(tpch):
    template = """with f as (select c_custkey from customer where c_mktsegment = 'BUILDING' group by c_custkey),
                  r as (select o_custkey, count(*) as n from orders group by {grouping})
                  select f.c_custkey, r.n from f join r on r.o_custkey = f.c_custkey"""

    def edges_into_orders(grouping: str) -> list[str]:
        dag = plan_query(template.format(grouping=grouping), tpch, Settings(broadcast_threshold=0),
                         LOCAL_FILES).dag
        return [c.describe() for c in find_candidates(dag) if c.target.label.startswith("orders")]

    assert edges_into_orders("o_custkey")  # a plain GROUP BY passes the key's summary down to orders
    assert edges_into_orders("rollup(o_custkey)") == []
    assert edges_into_orders("grouping sets ((o_custkey))")  # one set holding the key: a plain GROUP BY


def test_grouping_without_grouping_sets_is_refused_where_it_is_written(aipq):
    result = aipq("explain", "--sql", "select n_regionkey,\n  grouping(n_regionkey) from nation group by n_regionkey")
    assert result.exit_code == 2
    assert "GROUPING SETS" in result.output and ":2:3" in result.output


def test_explain_shows_the_grouping_sets(aipq):
    result = aipq("explain", "--sql", QUERIES["rollup"])
    assert result.exit_code == 0, result.output
    assert "GROUPING SETS ((n_regionkey," in result.output
    stages = json.loads(aipq("explain", "--sql", QUERIES["rollup"], "--format", "json").output)["stages"]
    assert stages[0]["reduce"]["grouping_sets"] == [["n_regionkey", "n_name"], ["n_regionkey"], []]

