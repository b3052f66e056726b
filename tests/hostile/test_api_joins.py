"""Parenthesized joins (issue 80, item 11): ``customer LEFT JOIN (orders JOIN lineitem ON …) ON …`` is standard SQL
that Spark runs; aipq said "unsupported SQL: TABLE statement". They run, with DuckDB's rows — including where the
parentheses change the rows (an outer join around an inner one), nested ones, ones in FROM, and inner tables
that share column names."""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows

import aipq

QUERIES = {
    "outer around inner": """
        select count(*) as n, count(o.o_orderkey) as with_order, sum(l.l_quantity) as quantity
        from customer c left join (orders o join lineitem l on o.o_orderkey = l.l_orderkey and l.l_quantity > 45)
          on c.c_custkey = o.o_custkey""",
    "nested": """
        select n.n_name, count(*) as n
        from nation n join ((customer c join orders o on c.c_custkey = o.o_custkey)
                            join lineitem l on o.o_orderkey = l.l_orderkey) on n.n_nationkey = c.c_nationkey
        where l.l_shipmode = 'AIR'
        group by n.n_name""",
    "in from": """
        select r.r_name, c.c_mktsegment, count(*) as n
        from (nation n join region r on n.n_regionkey = r.r_regionkey)
          join customer c on c.c_nationkey = n.n_nationkey
        group by r.r_name, c.c_mktsegment""",
    "shared column names": """
        select r.r_name, pairs.*
        from region r left join (nation n1 join nation n2 on n1.n_regionkey = n2.n_regionkey
                                 and n1.n_nationkey < n2.n_nationkey) on r.r_regionkey = n1.n_regionkey""",
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_parenthesized_join_gives_duckdbs_rows(spark, home, duck, name):
    query = QUERIES[name]
    if name == "shared column names":  # n1.* and n2.*: each table's columns, as DuckDB names them
        query = query.replace("pairs.*", "n1.n_name, n2.n_name as other, n1.*")
    assert_same_rows(aipq.sql(query, spark=spark, home=home).rows, oracle_rows(duck, query), ordered=False)
