"""Summaries only ever drop rows that cannot contribute: on small hand-made tables where a wrong prune would
change the answer, every strategy gives DuckDB's rows, and the planner offers no edge into a forbidden place."""

from __future__ import annotations

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows

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
    every_edge = ["--beta", "-1000"] if strategy == "adaptive" else []  # the estimator path on every edge
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--ip", strategy, "--plan", plan,
                         "--broadcast-threshold", broadcast, *every_edge)
    assert_same_rows(actual, oracle_rows(small_tables, sql), ordered=False)


@pytest.mark.parametrize("plan", ["linear", "bushy"])
@pytest.mark.parametrize("case", sorted(UNSAFE_PLACES))
def test_the_planner_offers_no_edge_into_nulls_a(home, small_tables, case, plan):
    dag = plan_query(UNSAFE_PLACES[case], Catalog(home), Settings(plan=plan, broadcast_threshold=0), LOCAL_FILES).dag
    assert [c.describe() for c in find_candidates(dag) if c.target.label.startswith("nulls_a")] == []


def test_the_safe_side_of_the_same_joins_is_still_pruned(home, small_tables):
    # The null-supplying side of a left join may be pruned by the preserved side's keys.
    sql = """with s as (select k, count(*) as c from nulls_b group by k)
             select a.k, s.c from (select k from nulls_a group by k) a join s on a.k = s.k"""
    dag = plan_query(sql, Catalog(home), Settings(broadcast_threshold=0), LOCAL_FILES).dag
    assert find_candidates(dag), "an inner join between two stages is an admissible edge"
