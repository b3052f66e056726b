"""The workload parts of every series report (``bench/workload.py``), from hand-made results: no Spark runs."""

from __future__ import annotations

import json

import pytest

from aipq.bench.report import BenchContext, write_outputs
from aipq.bench.runner import Measurement, StrategyResult
from aipq.bench.suite import query_numbers
from aipq.bench.workload import aa_spread, series_totals, slower_than_spark
from aipq.errors import BadInputError

BROADCAST = 10 * 1024 * 1024


def result(query: str, series: str, *seconds: float) -> StrategyResult:
    return StrategyResult(query, series, BROADCAST, 1, runs=[Measurement(s, 0, 0) for s in seconds])


def workload() -> list[StrategyResult]:
    """Three queries: Q1 aipq slower beyond its spread, Q2 slower but within it, Q3 faster."""
    return [
        result("Q1", "spark", 1.0), result("Q1", "spark-again", 1.02), result("Q1", "adaptive", 1.25),
        result("Q2", "spark", 2.0), result("Q2", "spark-again", 2.4), result("Q2", "adaptive", 2.2),
        result("Q3", "spark", 4.0), result("Q3", "spark-again", 4.0), result("Q3", "adaptive", 2.0),
    ]


def test_the_aa_spread_is_the_control_or_sparks_own_runs_whichever_differs_more():
    assert aa_spread(result("Q", "spark", 2.0), result("Q", "spark-again", 2.5)) == pytest.approx(0.2)
    assert aa_spread(result("Q", "spark", 1.0, 1.1, 1.3), None) == pytest.approx(0.3 / 1.1)
    assert aa_spread(result("Q", "spark", 1.0, 1.1, 1.3), result("Q", "spark-again", 1.1)) == pytest.approx(0.3 / 1.1)


def test_only_queries_slower_than_spark_beyond_their_aa_spread_are_listed():
    slow = slower_than_spark(workload())
    assert [(s.series, s.query) for s in slow] == [("adaptive", "Q1")]  # Q2's 0.91× is within its 17% spread
    assert slow[0].ratio == pytest.approx(0.8) and slow[0].spread == pytest.approx(0.02 / 1.02)


def test_each_series_total_time_stands_beside_its_geo_mean():
    totals = {t.series: t for t in series_totals(workload())}
    assert set(totals) == {"adaptive", "spark-again"}
    adaptive = totals["adaptive"]
    assert adaptive.queries == 3 and adaptive.seconds == pytest.approx(5.45)
    assert adaptive.spark_seconds == pytest.approx(7.0) and adaptive.total_ratio == pytest.approx(7.0 / 5.45)
    assert adaptive.geo_mean == pytest.approx((0.8 * (2.0 / 2.2) * 2.0) ** (1 / 3))


def test_the_report_lists_slow_queries_totals_and_plots_the_sorted_ratios(tmp_path):
    context = BenchContext("TPC-DS SF 1", "aipq bench tpcds --queries all", "test machine", "2026-12-06", {})
    write_outputs(tmp_path, context, workload())
    report = (tmp_path / "report.md").read_text()
    assert "| adaptive | broadcast | 3 | 1.13× | 5.45 | 7.00 | 1.28× | 1 |" in report
    assert "- adaptive (broadcast joins): 1 of 3: Q1 0.80× (1.25 s against 1.00 s; A/A spread 2%)" in report
    assert "spark-again (broadcast joins): 0 of 3: none" in report
    assert "![ratios.png](ratios.png)" in report
    assert (tmp_path / "ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((tmp_path / "results.json").read_text())
    adaptive = next(w for w in data["workload"] if w["series"] == "adaptive")
    assert adaptive["total_seconds"] == 5.45 and [s["query"] for s in adaptive["slower_than_spark"]] == ["Q1"]


def test_queries_all_is_the_whole_workload():
    assert query_numbers("all", "TPC-DS", 99) == list(range(1, 100))
    assert query_numbers(" ALL ", "TPC-H", 22) == list(range(1, 23))
    assert query_numbers("3,5", "TPC-H", 22) == [3, 5]
    with pytest.raises(BadInputError, match="no TPC-H query 23"):
        query_numbers("23", "TPC-H", 22)
