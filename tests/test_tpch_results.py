"""TPC-H queries through `aipq run` give DuckDB's rows, under every plan shape and physical join setting."""

from __future__ import annotations

import pytest
from conftest import ALL_QUERIES, assert_same_rows, oracle_rows, run_to_rows

from aipq.tpch.queries import query_text


@pytest.mark.parametrize("plan", ["linear", "bushy", "cost"])
@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_query_matches_duckdb(aipq, duck, tmp_path, request, number, plan, broadcast):
    if plan == "cost":
        request.getfixturevalue("tpch_statistics")  # the order comes from them
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--plan", plan, "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


@pytest.mark.matrix
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_query_matches_duckdb_preaggregated_wherever_possible(aipq, duck, tmp_path, number):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--preaggregate", "always", "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


# A few queries in the quick lane: a filter many hops from the largest table (Q5), a subquery's scan reached
# through an aggregate (Q17), self-joins with semi and anti joins (Q21), semi joins (Q20)
TRANSFER_QUICK = (5, 17, 20, 21)


@pytest.mark.parametrize("number", TRANSFER_QUICK)
def test_tpch_query_matches_duckdb_under_predicate_transfer(aipq, duck, tmp_path, number):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", "transfer", "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


@pytest.mark.matrix
@pytest.mark.parametrize("strategy", ["transfer", "transfer-oracle"])
@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_every_tpch_query_matches_duckdb_under_predicate_transfer(aipq, duck, tmp_path, number, broadcast,
                                                                  strategy):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", strategy, "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_result_is_not_empty_for_join_queries(aipq, tmp_path):
    # Guards the oracle comparison against two empty results agreeing by accident.
    for number in (3, 5, 9, 10):
        assert run_to_rows(aipq, tmp_path, f"tpch:{number}", "--broadcast-threshold", "0")
