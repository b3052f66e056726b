"""IN/EXISTS subqueries under OR, under NOT, in CASE and in the SELECT list: DuckDB's rows, NULLs included."""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows, run_to_rows

TPCH = {
    "correlated EXISTS under OR": """select c_custkey, c_name from customer where c_nationkey = 3
        or exists (select 1 from orders where o_custkey = c_custkey and o_totalprice > 350000)""",
    "IN under OR": """select count(*) as n from lineitem where l_shipmode = 'AIR'
        or l_partkey in (select p_partkey from part where p_size = 1)""",
    "IN over the same table name inside": """select count(*) as n from part where p_size = 2
        or p_partkey in (select p_partkey from part where p_brand = 'Brand#13')""",
    "EXISTS in CASE": """select o_orderkey, case when exists (select 1 from lineitem
        where l_orderkey = o_orderkey and l_commitdate < l_receiptdate) then 'late' else 'on time' end as status
        from orders where o_orderdate < date '1992-03-01'""",
    "IN under OR in HAVING": """select n_regionkey, count(*) as n from nation group by n_regionkey
        having count(*) > 5 or n_regionkey in (select r_regionkey from region where r_name = 'ASIA')""",
}

NULLS = {
    "NOT IN under OR, the subquery holding a NULL": """select k, v from nulls_a
        where v = 'e' or not (k in (select k from nulls_b))""",
    "NOT IN under OR, no NULL inside": """select k, v from nulls_a
        where v = 'e' or not (k in (select k from nulls_b where k is not null))""",
    "IN and EXISTS as values": """select a.k, a.v, a.k in (select k from nulls_b) as m,
        exists (select 1 from nulls_b b where b.g = a.g) as e from nulls_a a""",
    "IN over an empty subquery as a value": """select k, k in (select k from empty_c) as m from nulls_a""",
}


@pytest.mark.parametrize("case", sorted(TPCH))
def test_membership_in_tpch_gives_the_oracles_rows(aipq, duck, tmp_path, case):
    sql = TPCH[case]
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql), oracle_rows(duck, sql), ordered=False)


@pytest.mark.parametrize("case", sorted(NULLS))
def test_membership_keeps_sqls_three_values(aipq, small_tables, tmp_path, case):
    sql = NULLS[case]
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql), oracle_rows(small_tables, sql), ordered=False)


@pytest.mark.parametrize("strategy", ["always", "adaptive"])
def test_membership_under_information_passing(aipq, duck, tmp_path, strategy):
    sql = TPCH["correlated EXISTS under OR"]
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--ip", strategy, "--broadcast-threshold", "0",
                         "--staging", "hive")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=False)


def test_a_form_that_cannot_be_rewritten_is_refused_where_it_is_written(aipq):
    sql = ("select count(*) from part where p_size = 2\n"
           "   or p_partkey in (select ps_partkey from partsupp group by ps_partkey)")
    result = aipq("explain", "--sql", sql)
    assert result.exit_code == 2, result.output
    assert "GROUP BY" in result.output and ":2:" in result.output
