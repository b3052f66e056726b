"""Hive-style SQL users write, run through `aipq run` and compared with DuckDB (queries transpiled by sqlglot).

Covers backticks, comments anywhere, LEFT SEMI JOIN, Hive date and string functions, NVL/COALESCE, CAST,
UNION ALL, DISTINCT, HAVING, ORDER BY / SORT BY / LIMIT, multi-column join keys and self-joins.
"""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows, run_to_rows


def hive(sql: str, duckdb_sql: str | None = None, *, id: str):
    """A corpus entry; ``duckdb_sql`` where sqlglot's transpilation has no DuckDB equivalent (pmod)."""
    return pytest.param(sql, duckdb_sql, id=id)


CORPUS = [
    hive("""
        -- backticks and comments anywhere
        SELECT `n`.`n_name` AS `nation`, /* inline */ count(*) AS `cnt`
        FROM `nation` `n` JOIN `supplier` s ON (`n`.n_nationkey = s.s_nationkey) -- trailing
        GROUP BY `n`.`n_name`
        ORDER BY `cnt` DESC, `nation`
    """, id="backticks-comments"),
    hive("""
        SELECT c.c_name, c.c_acctbal FROM customer c
        LEFT SEMI JOIN orders o ON (c.c_custkey = o.o_custkey AND o.o_totalprice > 300000)
    """, id="left-semi-join"),
    hive("""
        SELECT o_orderkey, to_date(o_orderdate) AS d, date_add(o_orderdate, 30) AS plus30,
               date_sub(o_orderdate, 7) AS minus7, add_months(o_orderdate, 1) AS next_month
        FROM orders WHERE o_orderkey < 200
    """, id="date-functions"),
    hive("""
        SELECT l_orderkey, l_linenumber, datediff(l_receiptdate, l_shipdate) AS transit
        FROM lineitem WHERE datediff(l_receiptdate, l_shipdate) > 29 AND l_orderkey < 3000
    """, id="datediff"),
    hive("""
        SELECT year(o_orderdate) AS y, month(o_orderdate) AS m, count(*) AS orders
        FROM orders GROUP BY year(o_orderdate), month(o_orderdate)
        HAVING count(*) > 100 ORDER BY y, m
    """, id="year-month-having"),
    hive("""
        SELECT concat_ws('/', n_name, r_name) AS place, upper(substr(n_comment, 1, 5)) AS head,
               length(n_name) AS len, concat(n_name, '!') AS shout
        FROM nation JOIN region ON n_regionkey = r_regionkey
    """, id="string-functions"),
    hive("""
        SELECT c.c_custkey, nvl(o.o_orderkey, -1) AS first_key, coalesce(o.o_orderstatus, 'none') AS status
        FROM customer c LEFT OUTER JOIN orders o ON c.c_custkey = o.o_custkey AND o.o_orderkey < 100
        WHERE c.c_custkey < 60
    """, id="nvl-coalesce-outer"),
    hive("""
        SELECT CAST(l_quantity AS INT) AS q, CAST(l_orderkey AS STRING) AS k, CAST('12' AS BIGINT) + 1 AS n,
               CAST(l_shipdate AS STRING) AS shipped
        FROM lineitem WHERE l_orderkey < 40
    """, id="casts"),
    hive("""
        SELECT n_name AS name, 'nation' AS kind FROM nation WHERE n_regionkey = 1
        UNION ALL
        SELECT r_name, 'region' FROM region
        UNION ALL
        SELECT n_name, 'nation' FROM nation WHERE n_regionkey = 1
    """, id="union-all"),
    hive("""
        SELECT kind, count(*) AS n FROM (
          SELECT 'small' AS kind, o_orderkey FROM orders WHERE o_totalprice < 50000
          UNION ALL
          SELECT 'large' AS kind, o_orderkey FROM orders WHERE o_totalprice > 300000
        ) t GROUP BY kind ORDER BY kind
    """, id="union-all-in-subquery"),
    hive("""
        SELECT DISTINCT o_orderstatus, o_orderpriority FROM orders
    """, id="distinct"),
    hive("""
        SELECT l_returnflag, count(DISTINCT l_suppkey) AS suppliers FROM lineitem GROUP BY l_returnflag
    """, id="count-distinct"),
    hive("""
        SELECT o_orderkey, o_totalprice FROM orders SORT BY o_totalprice DESC
    """, id="sort-by"),
    hive("""
        SELECT o_custkey, max(o_totalprice) AS top FROM orders GROUP BY o_custkey
        ORDER BY top DESC, o_custkey LIMIT 7
    """, id="order-by-limit"),
    hive("""
        SELECT ps.ps_partkey, ps.ps_suppkey, sum(l.l_quantity) AS shipped
        FROM partsupp ps JOIN lineitem l ON ps.ps_partkey = l.l_partkey AND ps.ps_suppkey = l.l_suppkey
        WHERE ps.ps_partkey < 50
        GROUP BY ps.ps_partkey, ps.ps_suppkey
    """, id="multi-column-join-key"),
    hive("""
        SELECT a.n_name AS nation, b.n_name AS neighbour
        FROM nation a JOIN nation b ON a.n_regionkey = b.n_regionkey
        WHERE a.n_nationkey < b.n_nationkey
    """, id="self-join"),
    hive("""
        SELECT e1.c_custkey, e2.c_custkey AS other FROM customer e1, customer e2
        WHERE e1.c_nationkey = e2.c_nationkey AND e1.c_mktsegment = e2.c_mktsegment
          AND e1.c_custkey < 30 AND e2.c_custkey < 30 AND e1.c_custkey <> e2.c_custkey
    """, id="self-join-comma"),
    hive("""
        WITH big AS (SELECT o_custkey, sum(o_totalprice) AS spend FROM orders GROUP BY o_custkey)
        SELECT c_name, spend FROM customer JOIN big ON c_custkey = o_custkey
        WHERE spend > (SELECT avg(spend) * 2 FROM big)
    """, id="cte-scalar-subquery"),
    hive("""
        SELECT if(o_totalprice > 200000, 'big', 'small') AS size, count(*) AS n,
               CASE WHEN o_orderpriority LIKE '1%' THEN 'urgent' ELSE 'other' END AS urgency
        FROM orders GROUP BY if(o_totalprice > 200000, 'big', 'small'),
                             CASE WHEN o_orderpriority LIKE '1%' THEN 'urgent' ELSE 'other' END
    """, id="if-case-group-by-expression"),
    hive("""
        SELECT s_name FROM supplier WHERE s_suppkey IN (
          SELECT ps_suppkey FROM partsupp WHERE ps_availqty > 9990)
        AND s_nationkey NOT IN (SELECT n_nationkey FROM nation WHERE n_name LIKE 'A%')
    """, id="in-not-in"),
    hive("""
        SELECT round(avg(l_discount), 4) AS avg_disc, round(sum(l_extendedprice * (1 - l_discount)), 2) AS rev,
               min(l_shipdate) AS first_ship, max(l_commitdate) AS last_commit
        FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_shipdate BETWEEN '1995-01-01' AND '1995-12-31'
    """, id="aggregates-between-dates"),
    hive("""
        SELECT p_brand, pmod(p_size, 7) AS bucket, count(*) AS n FROM part
        WHERE p_name RLIKE '^(almond|azure)' GROUP BY p_brand, pmod(p_size, 7)
    """, """
        SELECT p_brand, ((p_size % 7) + 7) % 7 AS bucket, count(*) AS n FROM part
        WHERE regexp_matches(p_name, '^(almond|azure)') GROUP BY p_brand, ((p_size % 7) + 7) % 7
    """, id="rlike-pmod"),
    hive("""
        SELECT n_name, r_name FROM nation CROSS JOIN region WHERE n_regionkey <> r_regionkey AND n_nationkey < 3
    """, id="cross-join"),
    hive("""
        SELECT c_mktsegment, count(*) AS n FROM customer c
        WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.o_custkey = c.c_custkey)
        GROUP BY c_mktsegment ORDER BY c_mktsegment
    """, id="not-exists"),
    hive("""
        SELECT o_orderstatus, o_totalprice / 0 AS nothing, CAST('abc' AS INT) AS not_a_number FROM orders
        WHERE o_orderkey = 1
    """, id="hive-null-on-bad-arithmetic"),
]


@pytest.mark.parametrize(("sql", "duckdb_sql"), CORPUS)
def test_hive_query_matches_duckdb(aipq, duck, tmp_path, sql, duckdb_sql):
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--broadcast-threshold", "0")
    ordered = "order by" in sql.lower()
    expected = duck.execute(duckdb_sql).fetchall() if duckdb_sql else oracle_rows(duck, sql)
    assert_same_rows(actual, expected, ordered=ordered)
