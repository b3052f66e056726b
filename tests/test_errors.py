"""Bad input gets a clear message with a position, exit code 2, and no traceback."""

from __future__ import annotations

import pytest


def check_bad(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


def test_syntax_error_shows_line_column_and_caret(aipq):
    result = aipq("explain", "--sql", "select l_orderkey,\n  from lineitem where")
    check_bad(result, "<--sql>:2:", "syntax error", "^")


def test_unknown_table_suggests_the_closest(aipq):
    check_bad(aipq("explain", "--sql", "select * from lineitme"), "unknown table 'lineitme'",
              "did you mean lineitem", "1:15")


def test_unknown_column_names_it_with_its_position(aipq):
    check_bad(aipq("explain", "--sql", "select l_orderky from lineitem"), "unknown column 'l_orderky'",
              "did you mean l_orderkey", "1:8", "^^^^^^^^^")


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("select l_orderkey, rank() over (order by l_quantity) from lineitem", "window functions"),
        ("select n_name from nation intersect all select r_name from region", "INTERSECT ALL"),
        ("insert overwrite table nation select * from nation", "INSERT"),
    ],
)
def test_unsupported_constructs_say_which(aipq, sql, construct):
    check_bad(aipq("explain", "--sql", sql), "unsupported", construct)


def test_ungrouped_column_is_rejected(aipq):
    check_bad(aipq("explain", "--sql", "select n_name, count(*) from nation"), "GROUP BY")


def test_missing_file(aipq, tmp_path):
    check_bad(aipq("run", str(tmp_path / "nope.sql")), "no such SQL file")


def test_bad_conf_and_options(aipq):
    check_bad(aipq("run", "tpch:3", "--conf", "novalue"), "KEY=VALUE")
    check_bad(aipq("run", "tpch:99"), "tpch:99")
    check_bad(aipq("run", "tpch:3", "--broadcast-threshold", "lots"), "not a size")


def test_type_error_from_spark_is_bad_input(aipq):
    result = aipq("run", "--quiet", "--sql", "select n_name from nation where n_regionkey = array(1, 2)")
    check_bad(result, "error:")


def test_debug_flag_shows_a_traceback(aipq):
    result = aipq("--debug", "explain", "--sql", "select * from lineitme")
    assert result.exit_code == 2
    assert "Traceback" in result.output
