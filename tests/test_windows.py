"""Window functions: a stage of their own, partitioned by their PARTITION BY keys, as Hive runs them; every
strategy gives DuckDB's rows, and a summary prunes below a window only by a key every window partitions by."""

from __future__ import annotations

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows, strategy_options

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.ip.candidates import find_candidates
from aipq.pipeline import plan_query

TOP_ORDERS = """
    select t.o_custkey, t.o_orderkey, t.rn, c.c_name, t.running
    from (select o_custkey, o_orderkey, o_totalprice,
                 row_number() over (partition by o_custkey order by o_totalprice desc, o_orderkey) as rn,
                 sum(o_totalprice) over (partition by o_custkey order by o_orderkey
                                         rows between unbounded preceding and current row) as running
          from orders where o_orderdate >= '1995-01-01') t
    join customer c on t.o_custkey = c.c_custkey
    where t.rn <= 2 and c.c_mktsegment = 'BUILDING' and c.c_nationkey = 3
    order by t.o_custkey, t.rn"""

QUERIES = {
    "top orders per customer": TOP_ORDERS,
    "rank, dense_rank, lag and lead": """
        select n_regionkey, n_name,
               rank() over (partition by n_regionkey order by n_nationkey) as r,
               dense_rank() over (order by n_regionkey) as dr,
               lag(n_name) over (partition by n_regionkey order by n_name) as before_name,
               lead(n_nationkey, 2, -1) over (order by n_nationkey) as two_on
        from nation""",
    "a partition's total beside each row, ordered by the window's alias": """
        select s_suppkey, s_nationkey, s_acctbal,
               sum(s_acctbal) over (partition by s_nationkey) as nation_total,
               count(*) over (partition by s_nationkey) as suppliers
        from supplier where s_acctbal > 9000
        order by nation_total desc, s_suppkey""",
    "a window over an aggregated subquery, joined again": """
        with spend as (select o_custkey, sum(o_totalprice) as total from orders group by o_custkey),
             ranked as (select o_custkey, total, rank() over (order by total desc, o_custkey) as place from spend)
        select c_name, total, place from ranked join customer on c_custkey = o_custkey
        where place <= 5 order by place""",
    "ntile, percent_rank and first_value over a sliding frame": """
        select p_partkey, p_brand, ntile(3) over (partition by p_brand order by p_partkey) as third,
               percent_rank() over (partition by p_brand order by p_retailprice, p_partkey) as pr,
               first_value(p_name) over (partition by p_brand order by p_partkey
                                         rows between 2 preceding and 1 following) as nearby
        from part where p_size < 5""",
    "groups ranked by their aggregate, with a grand total": """
        select o_orderpriority, count(*) as n, rank() over (order by count(*) desc) as r,
               sum(count(*)) over () as total, count(case when o_orderpriority < '3' then 1 end) over () as urgent
        from orders group by o_orderpriority""",
    "a window partitioned by a group key, over the groups HAVING keeps": """
        select n_regionkey, n_nationkey, count(*) as suppliers,
               sum(count(*)) over (partition by n_regionkey) as in_region,
               max(n_nationkey) over (partition by n_regionkey order by count(*), n_nationkey) as running_max
        from nation join supplier on s_nationkey = n_nationkey
        group by n_regionkey, n_nationkey having count(*) > 1
        order by n_regionkey, n_nationkey""",
    "a named window, once with a frame of its own": """
        select n_name, rank() over w as r,
               sum(n_nationkey) over (w rows between 1 preceding and current row) as s
        from nation window w as (partition by n_regionkey order by n_name)""",
    "the same window twice, DISTINCT above it": """
        select distinct l_returnflag, max(l_quantity) over (partition by l_returnflag) as most,
               max(l_quantity) over (partition by l_returnflag) + 1 as most_plus_one
        from lineitem""",
}


@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("strategy", ["off", "always", "adaptive"])
@pytest.mark.parametrize("case", sorted(QUERIES))
def test_window_queries_match_duckdb(aipq, duck, tmp_path, case, strategy, broadcast):
    sql = QUERIES[case]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, *strategy_options(strategy), "--broadcast-threshold",
                         broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.split(")")[-1].lower())


def test_a_window_is_a_stage_of_its_own(tpch):
    dag = plan_query(TOP_ORDERS, tpch, Settings(broadcast_threshold=0), LOCAL_FILES).dag
    assert [s.operator for s in dag.stages].count("WINDOW") == 1


def _targets(home, sql: str) -> list[str]:
    """Where customer's filtered-scan summary may prune (``always`` plans the summary pre-pass)."""
    dag = plan_query(sql, Catalog(home), Settings(ip="always", broadcast_threshold=0), LOCAL_FILES).dag
    return [c.target.label for c in find_candidates(dag)]


def test_a_summary_reaches_below_a_window_only_by_its_partition_key(home, tpch):
    assert "orders" in _targets(home, TOP_ORDERS), "customer's keys prune orders below a window by o_custkey"
    other_key = TOP_ORDERS.replace("partition by o_custkey order by o_totalprice",
                                   "partition by o_orderstatus order by o_totalprice")
    assert "orders" not in _targets(home, other_key), "one window not partitioned by the key stops it"
