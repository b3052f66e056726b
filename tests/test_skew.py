"""Skewed TPC-H (``aipq tpch gen --skew Z``, ``tpch/skew.py``): a few keys carry most rows, every join still
holds, and queries over it give DuckDB's rows."""

from __future__ import annotations

import pytest
from conftest import SF, assert_same_rows, oracle_connection, oracle_rows, run_to_rows

from aipq.catalog import Catalog
from aipq.tpch.queries import query_text
from aipq.tpch.skew import zipf_sql


@pytest.fixture(scope="module")
def skewed(aipq, home):
    result = aipq("tpch", "gen", "--sf", str(SF), "--skew", "1", "--database", "skewed")
    assert result.exit_code == 0, result.output
    con = oracle_connection()
    for entry in Catalog(home).entries():
        if entry.database == "skewed":
            con.execute(f"CREATE VIEW {entry.name} AS SELECT * FROM read_parquet('{entry.path}')")
    return con


def test_a_few_keys_carry_most_rows_and_every_key_still_joins(skewed):
    orders, top = skewed.execute("SELECT COUNT(*), MAX(n) FROM (SELECT COUNT(*) n FROM orders GROUP BY o_custkey)"
                                 ).fetchone()
    customers = skewed.execute("SELECT COUNT(*) FROM customer").fetchone()[0]
    assert top / orders > 50 / customers  # the most frequent customer: over 50 times its uniform share
    parts_top = skewed.execute("SELECT MAX(n) * 1.0 / SUM(n) FROM (SELECT COUNT(*) n FROM lineitem "
                               "GROUP BY l_partkey)").fetchone()[0]
    assert parts_top > 0.02
    assert skewed.execute("SELECT COUNT(*) FROM orders ANTI JOIN customer ON o_custkey = c_custkey"
                          ).fetchone()[0] == 0
    assert skewed.execute("SELECT COUNT(*) FROM lineitem ANTI JOIN partsupp "
                          "ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey").fetchone()[0] == 0


def _key_at(sql: str, draw: float) -> int:
    """The key ``zipf_sql``'s expression gives for one uniform draw (evaluated by DuckDB)."""
    return oracle_connection().execute("SELECT " + sql.replace("rand(1)", repr(draw)).replace("D,", ".0,")
                                       ).fetchone()[0]


def test_zipf_zero_is_uniform_and_one_puts_half_the_draws_on_the_first_keys():
    assert [_key_at(zipf_sql(1000, 0.0, 1), u) for u in (0.0, 0.25, 0.5, 0.999)] == [1, 251, 501, 1000]
    assert _key_at(zipf_sql(1000, 1.0, 1), 0.5) == 31  # √1001: half the rows on the first 3% of the keys
    assert _key_at(zipf_sql(1000, 2.0, 1), 0.5) == 1  # steeper still


@pytest.mark.parametrize("number", [9, 13, 18])
def test_queries_over_skewed_data_give_the_oracles_rows(aipq, skewed, tmp_path, number):
    script = tmp_path / "skewed.sql"
    script.write_text(f"USE skewed;\n{query_text(number)}")
    actual = run_to_rows(aipq, tmp_path, str(script), "--ip", "adaptive", "--broadcast-threshold", "0")
    sql = query_text(number)
    assert_same_rows(actual, oracle_rows(skewed, sql), ordered="order by" in sql.lower())


def test_a_skew_that_is_not_positive_is_refused(aipq):
    result = aipq("tpch", "gen", "--sf", str(SF), "--skew", "0", "--database", "skewed")
    assert result.exit_code == 2 and "--skew must be positive" in result.output
