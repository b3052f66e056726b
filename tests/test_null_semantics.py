"""Subqueries and joins keep SQL's NULL semantics: hand-made tables where a wrong rewrite changes the answer.

Each query runs through `aipq run` and is compared with DuckDB on the same parquet files.
"""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, oracle_rows, run_to_rows

QUERIES = [
    # NOT IN: a NULL in the subquery makes every comparison unknown, so nothing survives
    "select k, v from nulls_a where k not in (select k from nulls_b)",
    "select k, v from nulls_a where k not in (select k from nulls_b where k is not null)",
    # NOT IN over an empty subquery keeps every row, the one with a NULL key too
    "select k, v from nulls_a where k not in (select k from empty_c)",
    # correlated NOT IN: per group, NULLs on either side remove the row
    "select k, v from nulls_a a where k not in (select b.k from nulls_b b where b.g = a.g)",
    "select k, v from nulls_a where k in (select k from nulls_b)",
    "select k, v from nulls_a a where exists (select 1 from nulls_b b where b.k = a.k)",
    "select k, v from nulls_a a where not exists (select 1 from nulls_b b where b.k = a.k)",
    "select k, v from nulls_a a where not exists (select 1 from nulls_b b where b.g = a.g and b.k <> a.k)",
    "select k, v from nulls_a where exists (select 1 from empty_c)",
    "select k, v from nulls_a where not exists (select 1 from empty_c)",
    # COUNT over an empty group is 0, not NULL (the "count bug" of decorrelation)
    "select k, (select count(*) from nulls_b b where b.k = a.k) as n from nulls_a a",
    "select k, v from nulls_a a where (select count(*) from nulls_b b where b.k = a.k) = 0",
    "select k, (select count(b.k) + 1 from nulls_b b where b.g = a.g) as n from nulls_a a",
    "select k, (select sum(b.k) from nulls_b b where b.g = a.g) as s from nulls_a a",
    "select k, v from nulls_a a where a.k < (select max(b.k) from nulls_b b where b.g = a.g)",
    "select k, (select max(k) from empty_c) as m from nulls_a",
    "select count(*), sum(k), max(k) from empty_c",
    "select k, count(*) from empty_c group by k",
    "select k, (select b.k from nulls_b b where b.k = a.k and b.g = 30) as only from nulls_a a",
    # outer joins: the preserved side keeps its NULL keys and unmatched rows
    "select a.k, a.v, b.g from nulls_a a left join nulls_b b on a.k = b.k",
    "select a.k, a.v, b.g from nulls_a a left join nulls_b b on a.k = b.k and b.g = 10",
    "select a.k, a.v, b.g from nulls_a a left join nulls_b b on a.k = b.k where b.g is null",
    # a WHERE on the preserved side filters it first; one on the NULL-supplying side stays above the join
    "select a.k, a.v, b.g from nulls_a a left join nulls_b b on a.k = b.k where a.v is not null and b.g is null",
    "select a.k, b.g from nulls_b b right join nulls_a a on a.k = b.k where a.k > 1 or a.k is null",
    "select a.k, b.g from nulls_a a full join nulls_b b on a.k = b.k where a.k is not null and b.g is null",
    "select a.k, b.k from nulls_a a full outer join nulls_b b on a.k = b.k",
    "select a.k, b.k from nulls_b b right join nulls_a a on a.k = b.k",
    "select a.v from nulls_a a left semi join nulls_b b on a.k = b.k",
    # set operations treat NULLs as equal
    "select k from nulls_a intersect select k from nulls_b",
    "select k from nulls_a except select k from nulls_b",
    "select k from nulls_a union select k from nulls_b",
    "select k from nulls_a union all select k from nulls_b",
    # ALL: the k-th copy meets the k-th copy (nulls_b holds 3 twice and NULL once)
    "select k from nulls_b intersect all select k from nulls_b where k is null or k > 1 union all select 3",
    "select k, g from nulls_b except all select k, g from nulls_b where k = 3 and g = 10",
    "select g from nulls_a intersect all select g from nulls_b",
    "select g from nulls_a except all select g from nulls_b",
]


@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("sql", QUERIES)
def test_null_semantics_match_duckdb(aipq, small_tables, tmp_path, sql, broadcast):
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(small_tables, sql), ordered=False)


def test_scalar_subquery_with_several_rows_fails_clearly(aipq, small_tables):
    result = aipq("run", "--sql", "select k, (select b.k from nulls_b b where b.g = a.g) from nulls_a a")
    assert result.exit_code == 1
    assert "more than one row returned by a subquery used as an expression" in result.output
    assert "Traceback" not in result.output
