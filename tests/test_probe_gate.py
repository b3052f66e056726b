"""The probe gate: a task stops probing a summary that removes almost nothing and starts again when it would
remove more; rows it does not probe are kept, so answers never change."""

from __future__ import annotations

import json
from datetime import date

import pytest
from conftest import LOCAL_FILES, oracle_rows, run_to_rows
from pyspark.sql import functions as F

from aipq.engine import jvm
from aipq.engine.statistics import StatisticsCollector
from aipq.engine.summaries import BuiltSummary, SummaryStore, narrows
from aipq.planner.logical import Scan
from aipq.stats.fingerprint import data_files
from aipq.stats.planner import TableNeed
from aipq.stats.repository import StatsRepository

WINDOW = 32768
SAMPLE = 16
FLUSH = 4096


def gate_model(keeps: list[bool], window: int, min_rejection: float) -> tuple[int, int]:
    """ProbeGate's rule over one task's rows: (rows kept, rows let through unprobed, as tallied every 4096)."""
    off, seen, probed, kept_in_window, kept, skipped, unprobed = False, 0, 0, 0, 0, 0, 0
    for keep in keeps:
        if not off or seen % SAMPLE == 0:
            probed += 1
            kept_in_window += keep
            kept += keep
        else:
            kept += 1
            skipped += 1
        seen += 1
        if seen % FLUSH == 0:
            unprobed, skipped = unprobed + skipped, 0
        if seen == window:
            off = probed - kept_in_window < min_rejection * probed
            seen = probed = kept_in_window = 0
    return kept, unprobed


@pytest.mark.parametrize("min_rejection", [0.1, 0.0])
def test_the_gate_turns_off_on_a_prefix_that_keeps_everything_and_on_again_where_rows_go(spark, min_rejection):
    rows, first_kept = 200_000, 100_000  # one task; the condition keeps the first 100,000 rows only
    df = spark.range(0, rows, 1, 1)
    condition = F.col("id") < F.lit(first_kept)
    if min_rejection:
        condition, tally = jvm.probe_gate(spark, condition, WINDOW, min_rejection)
    kept = df.filter(condition).count()
    expected_kept, expected_unprobed = gate_model([i < first_kept for i in range(rows)], WINDOW, min_rejection)
    if not min_rejection:
        assert kept == first_kept
        return
    assert (kept, jvm.gate_unprobed_rows(tally)) == (expected_kept, expected_unprobed)
    assert first_kept < kept < rows  # it stopped, and it came back: rows past the turn were removed again
    assert expected_unprobed > 0


def test_an_idle_summary_is_let_through_and_the_answer_stays_the_oracles(aipq, duck, tmp_path):
    # every lineitem row has its order: the orders summary removes nothing from lineitem
    sql = ("select count(*), sum(l_quantity) from lineitem join (select o_orderkey, count(*) n from orders "
           "group by o_orderkey) o on l_orderkey = o.o_orderkey")
    args = ("--sql", sql, "--ip", "always", "--staging", "hive", "--broadcast-threshold", "0")
    probes = lineitem_probes(aipq, *args)
    assert probes and all(p["unprobed_rows"] > 0 and p["rows_out"] == p["rows_in"] for p in probes), probes
    assert run_to_rows(aipq, tmp_path, *args) == oracle_rows(duck, sql)
    ungated = lineitem_probes(aipq, *args, "--probe-min-rejection", "0")
    assert ungated and all(not p["unprobed_rows"] for p in ungated)


def lineitem_probes(aipq, *args: str) -> list[dict]:
    result = aipq("explain", *args, "--analyze", "--format", "json")
    assert result.exit_code == 0, result.output
    return [p for s in json.loads(result.output)["stages"] for p in s["measured"]["probes"]
            if p["target_column"] == "l_orderkey"]


def test_a_key_range_is_pushed_into_the_probed_scan_only_where_it_narrows_it(spark, tmp_path):
    """A summary's [low, high] becomes a predicate on the probed column only when it covers at most half of the
    column's known [min, max] (parquet applies a pushed predicate page by page, a cost where it skips nothing);
    with the column's bounds unknown it is kept, as before."""
    summary = BuiltSummary(1, "k", "bloom", "integral", low=10, high=20)
    assert narrows(summary, ("0", "999")) and narrows(summary, ("0", "20")) and narrows(summary, None)
    assert not narrows(summary, ("6", "25")) and not narrows(summary, ("10", "20"))
    dated = BuiltSummary(1, "d", "bloom", "date", low=date(1995, 1, 1), high=date(1995, 12, 31))
    assert narrows(dated, ("1992-01-01", "1998-08-02")) and not narrows(dated, ("1995-01-01", "1996-01-31"))

    store = SummaryStore(spark, None, str(tmp_path), {})
    frame = spark.range(1000).withColumnRenamed("id", "k")

    def pushed(domain) -> bool:
        plan = store._apply(frame, "k", summary, domain=domain)._jdf.queryExecution().analyzed().toString()
        return ">= cast(10 as bigint)" in plan

    assert pushed(("0", "999")) and pushed(None) and not pushed(("6", "25"))


def test_a_columns_bounds_come_from_parquet_footers_before_its_statistics_exist(spark, tpch, duck, tmp_path):
    """On a first run over new data the repository knows no [min, max]; the probed column's bounds then come
    from its files' footers, so a key range over the whole column is left out from the first run on."""
    entry = next(e for e in tpch.entries() if e.database == "default" and e.name == "lineitem")
    need = TableNeed(entry, data_files(LOCAL_FILES, entry.path), ("l_orderkey",), ("l_orderkey",), None)
    collector = StatisticsCollector(spark, None, [need], StatsRepository(tmp_path), LOCAL_FILES)  # type: ignore
    scan = Scan(entry, "lineitem", (("l_orderkey", "l_orderkey"),))
    low, high = duck.execute("SELECT min(l_orderkey), max(l_orderkey) FROM lineitem").fetchone()
    assert collector.column_bounds(scan, "l_orderkey") == (str(low), str(high))
    assert not narrows(BuiltSummary(1, "k", "bloom", "integral", low=low, high=high), (str(low), str(high)))
