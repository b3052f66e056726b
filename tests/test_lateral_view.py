"""Hive's LATERAL VIEW [OUTER] explode/posexplode through the real CLI, with DuckDB's UNNEST as the oracle, under
information passing (a summary may prune the rows a generator reads, never the generated ones wrongly)."""

from __future__ import annotations

import pytest
from conftest import assert_same_rows, run_to_rows

CASES = {
    "explode with a filter on the generated column": (
        "select c_custkey, w from customer lateral view explode(split(c_comment, ' ')) t as w "
        "where length(w) > 12 and c_custkey < 200",
        "select c_custkey, w from (select c_custkey, unnest(string_split(c_comment, ' ')) as w from customer "
        "where c_custkey < 200) where length(w) > 12"),
    "outer posexplode keeps rows the generator yields nothing for": (
        "select c_custkey, pos, w from customer lateral view outer posexplode(if(c_custkey % 2 = 0, array(c_name), "
        "cast(array() as array<string>))) t as pos, w where c_custkey < 40",
        "select c_custkey, case when c_custkey % 2 = 0 then 0 end, case when c_custkey % 2 = 0 then c_name end "
        "from customer where c_custkey < 40"),
    "comma join and group by over the generated column": (
        "select n_name, part, count(*) as n from nation, customer lateral view explode(split(c_phone, '-')) p "
        "as part where n_nationkey = c_nationkey and part in ('11', '12') group by n_name, part",
        "select n_name, part, count(*) from (select n_name, unnest(string_split(c_phone, '-')) as part from nation "
        "join customer on n_nationkey = c_nationkey) where part in ('11', '12') group by all"),
    "a join above the lateral view": (
        "select o_orderpriority, count(*) as n from customer lateral view explode(split(c_mktsegment, 'I')) s "
        "as piece join orders on o_custkey = c_custkey where piece = 'BU' and o_totalprice > 100000 "
        "group by o_orderpriority",
        "select o_orderpriority, count(*) from (select c_custkey, unnest(string_split(c_mktsegment, 'I')) as piece "
        "from customer) c join orders on o_custkey = c_custkey where piece = 'BU' and o_totalprice > 100000 "
        "group by all"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("strategy", [pytest.param("off", marks=pytest.mark.matrix), "always",
                                      pytest.param("adaptive", marks=pytest.mark.matrix)])
def test_lateral_views_give_the_oracles_rows(aipq, duck, tmp_path, case, strategy):
    hive_sql, duck_sql = CASES[case]
    expected = duck.execute(duck_sql).fetchall()
    assert expected, "the case should select something at SF 0.01"
    actual = run_to_rows(aipq, tmp_path, "--sql", hive_sql, "--ip", strategy, "--broadcast-threshold", "0")
    assert_same_rows(actual, expected, ordered=False)


def test_a_lateral_view_without_column_names_is_a_clear_error(aipq):
    result = aipq("explain", "--sql", "select * from nation lateral view explode(array(1, 2)) t")
    assert result.exit_code == 2 and "column names" in result.output, result.output
