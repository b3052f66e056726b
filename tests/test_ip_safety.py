"""Summaries only ever drop rows that cannot contribute: on small hand-made tables where a wrong prune would
change the answer, every strategy gives DuckDB's rows, and the planner offers no edge into a forbidden place."""

from __future__ import annotations

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows, strategy_options

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.ip.candidates import find_candidates
from aipq.pipeline import plan_query

# Each query has a stage whose output summarizes a key that meets nulls_a where pruning nulls_a by it would be
# wrong; the data make such a prune visible in the result.
UNSAFE_PLACES = {
    "preserved side of a left join": """
        with s as (select k, count(*) as c from nulls_b group by k)
        select a.k, a.v, s.c from nulls_a a left join s on a.k = s.k""",
    "preserved side of a right join": """
        with s as (select k, count(*) as c from nulls_b group by k)
        select a.k, a.v, s.c from s right join nulls_a a on a.k = s.k""",
    "full outer join": """
        with s as (select k, count(*) as c from nulls_b group by k)
        select a.k, s.k, s.c from nulls_a a full outer join s on a.k = s.k""",
    "NOT EXISTS": """
        select a.k, a.v from nulls_a a
        where not exists (select 1 from (select k from nulls_b group by k) s where s.k = a.k)""",
    "NOT IN": """
        select k, v from nulls_a where k not in (select k from (select k from nulls_b group by k) t where k > 2)""",
    "below an aggregate not grouped by the key": """
        with u as (select g from nulls_b where g = 30 group by g),
             s as (select max(g) as mg, sum(k) as total from nulls_a)
        select total from u join s on s.mg = u.g""",
    "below a LIMIT": """
        with u as (select g from nulls_b where g = 20 group by g),
             t as (select k, g from nulls_a order by v limit 2)
        select t.k from u join t on t.g = u.g""",
    "below a window not partitioned by the key": """
        with u as (select g from nulls_b where g = 10 group by g),
             w as (select k, g, row_number() over (order by v desc) as rn from nulls_a)
        select w.k, w.rn from u join w on w.g = u.g""",
    "filtered null-supplying side of a left join": """
        select a.k, a.v, b.g from nulls_a a left join (select k, g from nulls_b where g = 10) b on a.k = b.k""",
    "filtered right side of NOT EXISTS": """
        select a.k, a.v from nulls_a a where not exists (select 1 from nulls_b b where b.k = a.k and b.g = 10)""",
    "preserved side of a left join, a filter two inner joins away": """
        select a.k, a.v, x.g from nulls_a a
        left join (select b.k, b.g from nulls_b b join nulls_a a2 on b.k = a2.k where a2.g = 20) x on a.k = x.k""",
    "inside a subplan another reader shares": """
        with u as (select g from nulls_b where g = 10 group by g),
             c as (select k, g from nulls_a group by k, g)
        select x.k from u join c x on x.g = u.g
        union all
        select k from c""",
}


@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("plan", ["linear", "bushy"])
@pytest.mark.parametrize("strategy", ["hip", "always", "oracle", "adaptive"])
@pytest.mark.parametrize("case", sorted(UNSAFE_PLACES))
def test_no_strategy_prunes_where_it_would_change_the_answer(aipq, small_tables, tmp_path,
                                                             case, strategy, plan, broadcast):
    sql = UNSAFE_PLACES[case]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, *strategy_options(strategy), "--plan", plan,
                         "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(small_tables, sql), ordered=False)


@pytest.mark.parametrize("plan", ["linear", "bushy"])
@pytest.mark.parametrize("case", sorted(UNSAFE_PLACES))
def test_the_planner_offers_no_edge_into_nulls_a(home, small_tables, case, plan):
    """No edge into the preserved or anti side (``nulls_a a``, or ``nulls_a`` read in a shared subplan). ``nulls_a
    a2`` inside a left join's null-supplying side may be pruned: nulls_b semi-joined with the filtered a2 holds
    every key of b that can join it there."""
    dag = plan_query(UNSAFE_PLACES[case], Catalog(home), Settings(plan=plan, broadcast_threshold=0), LOCAL_FILES).dag
    assert [c.describe() for c in find_candidates(dag) if c.target.label in ("nulls_a", "nulls_a a")] == []


@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("strategy", ["transfer", pytest.param("transfer-oracle", marks=pytest.mark.matrix)])
@pytest.mark.parametrize("case", sorted(UNSAFE_PLACES))
def test_predicate_transfer_prunes_nothing_where_it_would_change_the_answer(aipq, small_tables, tmp_path, case,
                                                                            strategy, broadcast):
    sql = UNSAFE_PLACES[case]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--ip", strategy, "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(small_tables, sql), ordered=False)


@pytest.mark.parametrize("broadcast", [0, 10 << 20])
@pytest.mark.parametrize("case", sorted(UNSAFE_PLACES))
def test_predicate_transfer_sends_no_summary_into_nulls_a(home, small_tables, case, broadcast):
    settings = Settings(ip="transfer", broadcast_threshold=broadcast)
    dag = plan_query(UNSAFE_PLACES[case], Catalog(home), settings, LOCAL_FILES).dag
    assert [t for t in dag.transfers if t.label == "nulls_a"] == []


def test_predicate_transfer_chains_a_filter_through_a_table_without_one(home, tpch):
    # part's filter reaches orders through lineitem, which has no filter of its own (TPC-H Q9's shape)
    sql = """select o_orderdate, sum(l_quantity) from part join lineitem on p_partkey = l_partkey
             join orders on l_orderkey = o_orderkey where p_name like '%green%' group by o_orderdate"""
    dag = plan_query(sql, Catalog(home), Settings(ip="transfer"), LOCAL_FILES).dag
    passes = {s.id: s.tables[0].split(".")[-1] for s in dag.stages if s.id in dag.transfer_passes}
    into = {(passes.get(t.producer), t.label) for t in dag.transfers}
    assert ("part", "lineitem") in into and ("lineitem", "orders") in into
    # lineitem's pass carries part's filter alone: nothing goes back to part
    assert ("lineitem", "part") not in into
    # with a filter on orders too, lineitem's pass carries it back to part
    dated = sql.replace("group by", "and o_orderdate >= date '1998-01-01' group by")
    dag = plan_query(dated, Catalog(home), Settings(ip="transfer"), LOCAL_FILES).dag
    passes = {s.id: s.tables[0].split(".")[-1] for s in dag.stages if s.id in dag.transfer_passes}
    assert ("lineitem", "part") in {(passes.get(t.producer), t.label) for t in dag.transfers}


# Joins where NULL keys decide the answer, each with a stage on its left whose keys could be summarized: NOT IN
# over a subquery holding a NULL keeps nothing; EXCEPT and INTERSECT match NULL with NULL, which a probe (it drops
# NULL keys) would lose.
NULL_DECIDES = {
    "NOT EXISTS": """
        select a.k from (select k from nulls_a group by k) a
        where not exists (select 1 from nulls_b b where b.k = a.k)""",
    "NOT IN over a NULL": """
        select a.k from (select k from nulls_a group by k) a where a.k not in (select k from nulls_b)""",
    "NOT IN over a filtered NULL": """
        select a.k from (select k from nulls_a group by k) a where a.k not in (select k from nulls_b where g = 20)""",
    "correlated NOT IN": """
        select a.k from (select k, g from nulls_a group by k, g) a
        where a.k not in (select b.k from nulls_b b where b.g = a.g)""",
    "EXCEPT": "select k from (select k from nulls_a group by k) x except select k from nulls_b",
    "INTERSECT": "select k from nulls_a intersect select k from (select k from nulls_b group by k) y",
}


@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("strategy", ["always", "adaptive", "transfer"])
@pytest.mark.parametrize("case", sorted(NULL_DECIDES))
def test_no_summary_loses_a_null_key_the_answer_needs(aipq, small_tables, tmp_path, case, strategy, broadcast):
    sql = NULL_DECIDES[case]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, *strategy_options(strategy), "--broadcast-threshold",
                         broadcast)
    assert_same_rows(actual, oracle_rows(small_tables, sql), ordered=False)


def test_no_edge_into_an_anti_joins_right_side_or_across_a_join_matching_nulls(home, small_tables):
    # both sides of the anti join are stages that could summarize their keys
    sql = """select a.k from (select k from nulls_a group by k) a
             where not exists (select 1 from (select k from nulls_b group by k) b where b.k = a.k)"""
    dag = plan_query(sql, Catalog(home), Settings(broadcast_threshold=0), LOCAL_FILES).dag
    right = next(s.id for s in dag.stages if any("nulls_b" in table for table in s.tables))
    assert not [c.describe() for c in find_candidates(dag) if right in (c.target.stage, *c.target.path)]
    for case in ("EXCEPT", "INTERSECT"):
        dag = plan_query(NULL_DECIDES[case], Catalog(home), Settings(broadcast_threshold=0), LOCAL_FILES).dag
        assert find_candidates(dag) == [], case


def test_the_safe_side_of_the_same_joins_is_still_pruned(home, small_tables):
    # The null-supplying side of a left join may be pruned by the preserved side's keys.
    sql = """with s as (select k, count(*) as c from nulls_b group by k)
             select a.k, s.c from (select k from nulls_a group by k) a join s on a.k = s.k"""
    dag = plan_query(sql, Catalog(home), Settings(broadcast_threshold=0), LOCAL_FILES).dag
    assert find_candidates(dag), "an inner join between two stages is an admissible edge"
