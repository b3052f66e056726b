"""Bad input gets a clear message with a position, exit code 2, and no traceback."""

from __future__ import annotations

import pytest


def check_bad(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


def test_syntax_error_shows_line_column_and_caret(aipq):
    result = aipq("explain", "--sql", "select l_orderkey\n  from lineitem where")
    check_bad(result, "<--sql>:2:", "syntax error", "^")


def test_a_nul_character_in_the_sql_is_refused_with_its_position(aipq):
    result = aipq("explain", "--sql", "select l_orderkey,\n  'a\x00b' from lineitem")
    check_bad(result, "<--sql>:2:5", "NUL character", "chr(0)")


def test_unknown_table_suggests_the_closest(aipq):
    check_bad(aipq("explain", "--sql", "select * from lineitme"), "unknown table 'lineitme'",
              "did you mean lineitem", "1:15")


def test_unknown_column_names_it_with_its_position(aipq):
    check_bad(aipq("explain", "--sql", "select l_orderky from lineitem"), "unknown column 'l_orderky'",
              "did you mean l_orderkey", "1:8", "^^^^^^^^^")


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("select l_orderkey from lineitem order by rank() over (order by l_quantity)",
         "a window function outside the SELECT list"),
        ("select rank() over v from nation window w as (order by n_name)", "no window named 'v'"),
        ("use catalog tpch", "USE CATALOG"),
        ("create view nation as select * from region", "default.nation is a table"),
        ("create table t (a int) as select 1", "CREATE TABLE with both a column list and AS SELECT"),
        ("create table t (a int) stored as textfile", "STORED AS TEXTFILE"),
        ("create table t partitioned by (dt string) as select n_name, 'x' as dt from nation",
         "PARTITIONED BY with column types"),
        ("insert overwrite table nation partition (n_regionkey, n_name='x') select 1, 2", "static partition value"),
        ("select * from (values (1, n_name)) t(a, b)", "unknown column 'n_name'"),
        ("create table t stored as avro as select * from nation", "STORED AS AVRO"),
        ("select n_name from nation where n_nationkey > all (select r_regionkey from region)", "ANY/ALL"),
        ("select n_name from nation where n_nationkey = 1 or n_regionkey in "
         "(select r_regionkey from region group by r_regionkey)", "GROUP BY, HAVING, DISTINCT, LIMIT"),
        ("select (select max(r_regionkey) from region r where r.r_regionkey > n.n_regionkey) from nation n",
         "other than an equality"),
        ("select n_name from nation n where n_nationkey not in (select r_regionkey, r_name from region)",
         "IN compares 1 value(s) with a subquery returning 2 column(s)"),
        ("grant select on nation to bob", "statements"),
        ("select id from range(10) t(id)", "the table-valued function range() in FROM"),
    ],
)
def test_unsupported_constructs_say_which(aipq, sql, construct):
    check_bad(aipq("explain", "--sql", sql), construct)


@pytest.mark.parametrize(
    ("sql", "fragments"),
    [
        ("select count(*) from nation where sum(n_nationkey) > 1", ("not allowed in WHERE", "HAVING", "1:35")),
        ("select n_name from nation group by count(*)", ("not allowed in GROUP BY",)),
        ("select max(count(*)) from nation", ("inside another aggregate",)),
        ("select n1.x from nation n1", ("unknown column 'x'", "1:11")),
        ("select n_name from nation order by 5", ("output column 5",)),
        ("select (select r_regionkey, r_name from region) from nation", ("must return one column",)),
        ("select n_name from nation union all select r_regionkey, r_name from region",
         ("UNION inputs have 1 and 2 columns",)),
        ("select n_name from nation;\nselect nope from region", ("unknown column 'nope'", "<--sql>:2:")),
        ("insert overwrite table nation select * from nation", ("did not create", "--allow-overwrite")),
        ("create table region as select * from nation", ("already exists",)),
        ("insert into no_such_table select * from nation", ("unknown table",)),
        ("drop table no_such_table", ("unknown table", "IF EXISTS")),
        ("select n_name from nation where", ("syntax error",)),
        ("select 'unterminated from nation", ("cannot read the SQL text",)),
        ("-- only a comment", ("no statement",)),
    ],
)
def test_bad_input_is_explained_before_anything_runs(aipq, sql, fragments):
    check_bad(aipq("explain", "--sql", sql), *fragments)


@pytest.mark.parametrize(
    ("sql", "fragments"),
    [
        ("select unknown_fn(n_name) from nation", ("UNRESOLVED_ROUTINE", "1:8", "no function of that name")),
        ("select n_name from nation where n_regionkey = array(1, 2)", ("DATATYPE_MISMATCH", "types")),
        ("select * from nation join region on n_name", ("not a boolean",)),
    ],
)
def test_type_errors_found_by_spark_are_bad_input(aipq, sql, fragments):
    check_bad(aipq("run", "--quiet", "--sql", sql), "invalid query", *fragments)


def test_ungrouped_column_is_rejected(aipq):
    check_bad(aipq("explain", "--sql", "select n_name, count(*) from nation"), "GROUP BY")


def test_missing_file(aipq, tmp_path):
    check_bad(aipq("run", str(tmp_path / "nope.sql")), "no such SQL file")


def test_bad_conf_and_options(aipq):
    check_bad(aipq("run", "tpch:3", "--conf", "novalue"), "KEY=VALUE")
    check_bad(aipq("run", "tpch:99"), "tpch:99")
    check_bad(aipq("run", "tpch:3", "--broadcast-threshold", "lots"), "not a size")


def test_debug_flag_shows_a_traceback(aipq):
    result = aipq("--debug", "explain", "--sql", "select * from lineitme")
    assert result.exit_code == 2
    assert "Traceback" in result.output
