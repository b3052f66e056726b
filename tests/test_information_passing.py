"""Information passing never changes a result: every TPC-H query under every strategy and plan shape gives
DuckDB's rows, and summaries really prune."""

from __future__ import annotations

import json

import pytest
from conftest import assert_same_rows, oracle_rows
from test_tpch_results import ALL_QUERIES, run_to_rows

from aipq.tpch.queries import query_text


@pytest.mark.parametrize("plan", ["linear", "bushy"])
@pytest.mark.parametrize("strategy", ["hip", "always", "oracle"])
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_rows_are_the_same_under_every_strategy(aipq, duck, tmp_path, number, strategy, plan):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", strategy, "--plan", plan,
                         "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


@pytest.mark.parametrize("number", [3, 5, 9, 18, 21])
def test_broadcast_joins_with_summaries_keep_the_rows(aipq, duck, tmp_path, number):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", "always", "--plan", "bushy")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def analyzed(aipq, *args: str) -> dict:
    result = aipq("explain", *args, "--analyze", "--format", "json", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)
