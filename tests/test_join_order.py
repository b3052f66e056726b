"""Cost-based join order (``--plan cost``, issue 42): orders chosen from the statistics repository, the written
order (and why) without statistics, and DuckDB's rows for every order chosen, queries written in a bad order
included."""

from __future__ import annotations

import json

import pytest
import sqlglot
from conftest import assert_same_rows, oracle_rows, run_to_rows
from sqlglot import exp

from aipq.tpch.queries import query_text

REPARTITION = ("--broadcast-threshold", "0")


def explained(aipq, source: str, *args: str) -> dict:
    result = aipq("explain", source, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def joined_tables(info: dict) -> list[str]:
    """Each repartition join's two sides, innermost stage first."""
    return [f"{j['left']} ⋈ {j['right']}" for s in info["stages"] for j in s["reduce"].get("joins", [])]


def from_list(sql: str) -> list[str]:
    """The tables of the query's longest FROM list, in their written order."""
    selects = sqlglot.parse_one(sql, read="hive").find_all(exp.Select)
    longest = max(selects, key=lambda s: len(s.args.get("joins") or []))
    from_ = longest.args.get("from_") or longest.args.get("from")
    return [from_.this.alias_or_name] + [j.this.alias_or_name for j in longest.args.get("joins") or []]


def worst_text(aipq, number: int) -> str:
    result = aipq("tpch", "query", str(number), "--order", "worst")
    assert result.exit_code == 0, result.output
    return result.output


def test_without_statistics_the_order_is_priced_from_the_parquet_footers_and_explain_says_so(aipq):
    cost = explained(aipq, "tpch:5", "--plan", "cost", "--statistics", "off", *REPARTITION)
    note = cost["join_order"][0]
    assert note.startswith("cost-based (dynamic programming over 6 relations)"), note
    assert note.endswith("default.customer, default.lineitem, default.nation, default.orders, default.region, "
                         "default.supplier from their files' footers (no statistics yet)"), note


def test_a_table_without_statistics_or_footers_keeps_the_written_order_and_explain_says_why(aipq, tmp_path):
    path = tmp_path / "nation_names.csv"
    path.write_text("key,label\n7,seven\n3,three\n")
    assert aipq("table", "add", "nation_names", str(path), "--format", "csv").exit_code == 0
    try:
        sql = ("select label, count(*) from nation_names, nation, supplier "
               "where key = n_nationkey and n_nationkey = s_nationkey group by label")
        query = tmp_path / "labels.sql"
        query.write_text(sql)
        cost = explained(aipq, str(query), "--plan", "cost", "--statistics", "off", *REPARTITION)
        linear = explained(aipq, str(query), "--plan", "linear", "--statistics", "off", *REPARTITION)
        assert cost["join_order"][0] == "as written: no statistics for default.nation_names (a run collects them)"
        assert joined_tables(cost) == joined_tables(linear)
    finally:
        aipq("table", "drop", "nation_names")


def test_the_cost_based_order_is_estimated_cheaper_than_a_bad_written_order(aipq, tpch_statistics, tmp_path):
    text = worst_text(aipq, 5)
    query = tmp_path / "q5-worst.sql"
    query.write_text(text)
    info = explained(aipq, str(query), "--plan", "cost", *REPARTITION)
    note = info["join_order"][0]
    assert note.startswith("cost-based (dynamic programming over 6 relations)")
    estimated, written = (float(part.split(" s")[0]) for part in (note.split("estimated ")[1],
                                                                    note.split("as written ")[1]))
    assert estimated < written
    linear = explained(aipq, str(query), "--plan", "linear", *REPARTITION)
    assert joined_tables(info) != joined_tables(linear)


@pytest.mark.parametrize("number", [3, 5, 7, 8, 9, 10, 18, 21])
@pytest.mark.parametrize("plan", ["linear", "cost"])
def test_bad_order_variants_give_the_oracles_rows(aipq, duck, tpch_statistics, tmp_path, number, plan):
    text = worst_text(aipq, number)
    if number in (5, 8, 9):  # written well (for others the written order may already be the worst one)
        assert from_list(text) != from_list(query_text(number))
    query = tmp_path / f"q{number}-worst.sql"
    query.write_text(text)
    actual = run_to_rows(aipq, tmp_path, str(query), "--plan", plan, *REPARTITION)
    sql = query_text(number)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_more_relations_than_the_exhaustive_search_takes_are_ordered_greedily(aipq, duck, tpch_statistics, tmp_path):
    aliases = [f"n{i}" for i in range(14)]
    chain = " and ".join(f"{a}.n_nationkey = {b}.n_nationkey" for a, b in zip(aliases, aliases[1:]))
    sql = ("select n0.n_name, count(*) from " + ", ".join(f"nation {a}" for a in aliases)
           + f", region where {chain} and n13.n_regionkey = r_regionkey and r_name = 'ASIA' group by n0.n_name")
    result = aipq("explain", "--format", "json", "--plan", "cost", *REPARTITION, "--sql", sql)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["join_order"][0].startswith("cost-based (greedy over 15 relations)")
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--plan", "cost", *REPARTITION)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=False)


def test_a_block_that_needs_a_cartesian_product_joins_its_parts_last(aipq, duck, tpch_statistics, tmp_path):
    sql = ("select r_name, n_name, count(*) from region, nation, supplier, customer "
           "where s_nationkey = n_nationkey and c_nationkey = n_nationkey and c_acctbal > 9900 "
           "group by r_name, n_name")
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--plan", "cost", "--cartesian", "allow", *REPARTITION)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=False)


def test_the_smaller_input_goes_first_so_its_summary_can_prune_the_larger(aipq, tpch_statistics):
    """Stages run left to right: with lineitem on the right of Q3's last join, the customer–orders stage runs
    first and its summary of o_orderkey prunes lineitem before its shuffle (Ives & Taylor's feed-forward)."""
    info = explained(aipq, "tpch:3", "--plan", "cost", "--preaggregate", "off", *REPARTITION)
    last = [j for s in info["stages"] for j in s["reduce"].get("joins", [])][-1]  # stages run in this order
    assert last["right"] == "lineitem", last
