"""LIKE patterns Spark matches by regular expression get `contains` prefilters of their literal runs
(engine/like_prefilter.py): the same rows as DuckDB on every shape, NULLs and NOT LIKE included."""

from __future__ import annotations

import pytest
import sqlglot
from conftest import assert_same_rows, oracle_rows, run_to_rows

from aipq.data import add_table
from aipq.engine.compile import render
from aipq.engine.context import RunContext
from aipq.engine.like_prefilter import literal_runs, with_like_prefilters


@pytest.mark.parametrize("pattern, runs", [
    ("%special%requests%", ["requests", "special"]),
    ("a_c%", ["a", "c"]),
    ("%ab%ab%", ["ab"]),
    ("x%y%z", ["x", "y", "z"]),
    ("__", None),  # no literal run
    ("%%", None),
])
def test_patterns_spark_matches_by_regular_expression_give_their_literal_runs_longest_first(pattern, runs):
    assert literal_runs(pattern) == runs


@pytest.mark.parametrize("pattern", ["abc%", "%abc", "abc%def", "%abc%", "abc", "", "a\\%b%c%"])
def test_patterns_spark_simplifies_itself_or_that_escape_are_left_alone(pattern):
    assert literal_runs(pattern) is None


def test_a_stage_s_spark_sql_prefilters_like_and_not_like_and_leaves_the_rest_as_written():
    condition = sqlglot.parse_one("c NOT LIKE '%special%requests%' AND d LIKE 'PROMO%' AND e LIKE 'a_c'",
                                  read="hive")
    assert render(condition) == (
        "NOT (CONTAINS(CAST(c AS STRING), 'requests') AND CONTAINS(CAST(c AS STRING), 'special') "
        "AND c LIKE '%special%requests%') AND d LIKE 'PROMO%' AND (CONTAINS(CAST(e AS STRING), 'a') "
        "AND CONTAINS(CAST(e AS STRING), 'c') AND e LIKE 'a_c')")
    plain = sqlglot.parse_one("d LIKE 'PROMO%' AND e LIKE '%x!_%' ESCAPE '!' AND f COLLATE UTF8_LCASE LIKE '%a%b%'",
                              read="spark")
    assert with_like_prefilters(plain) is plain


@pytest.fixture(scope="module")
def texts(home, small_tables, tmp_path_factory):
    """Strings where the runs' order, overlap and single-character wildcards decide, with NULL and non-ASCII."""
    path = tmp_path_factory.mktemp("like") / "texts.parquet"
    small_tables.execute(f"""COPY (SELECT * FROM (VALUES (1, 'special requests'), (2, 'requests special'),
        (3, 'specialrequests'), (4, NULL), (5, 'spécial requests'), (6, 'ababab'), (7, 'ab'), (8, 'abc'),
        (9, 'a-c'), (10, 'ä_ç'), (11, 'x special y requests z'), (12, '')) t(k, s)) TO '{path}' (FORMAT parquet)""")
    add_table(RunContext(home), "like_texts", str(path), "parquet")
    small_tables.execute(f"CREATE OR REPLACE VIEW like_texts AS SELECT * FROM read_parquet('{path}')")
    return small_tables


QUERIES = [
    "select k from like_texts where s like '%special%requests%'",
    "select k from like_texts where s not like '%special%requests%'",
    "select k from like_texts where s like '%ab%ab%'",
    "select k from like_texts where s like 'a_c'",
    "select k from like_texts where not s like '_b%b%'",
    "select k, case when s like '%c%s%' then 1 else 0 end as m from like_texts",
    "select k from like_texts where s like '%special%requests' or s like 'sp_c%'",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_prefiltered_likes_give_duckdb_s_rows(aipq, texts, tmp_path, sql):
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql), oracle_rows(texts, sql), ordered=False)
