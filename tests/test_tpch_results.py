"""TPC-H queries through `aipq run` give DuckDB's rows, under every plan shape and physical join setting."""

from __future__ import annotations

import duckdb
import pytest
from conftest import assert_same_rows, oracle_rows

from aipq.tpch.queries import query_text

ALL_QUERIES = tuple(range(1, 23))


def run_to_rows(aipq, tmp_path, *args: str) -> list[tuple]:
    out = tmp_path / "result.parquet"
    result = aipq("run", *args, "--output", str(out), "--force", "--quiet")
    assert result.exit_code == 0, result.output
    return duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()


@pytest.mark.parametrize("plan", ["linear", "bushy"])
@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_query_matches_duckdb(aipq, duck, tmp_path, number, plan, broadcast):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--plan", plan, "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_result_is_not_empty_for_join_queries(aipq, tmp_path):
    # Guards the oracle comparison against two empty results agreeing by accident.
    for number in (3, 5, 9, 10):
        assert run_to_rows(aipq, tmp_path, f"tpch:{number}", "--broadcast-threshold", "0")
