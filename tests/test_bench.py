"""`aipq bench tpch` end to end at SF 0.01: every strategy runs, rows are checked equal, the JSON is complete."""

from __future__ import annotations

import csv
import json

from conftest import SF


def test_bench_tpch_smoke_writes_every_field(aipq, tmp_path):
    out = tmp_path / "bench"
    result = aipq("bench", "tpch", "--sf", str(SF), "--queries", "3", "--repeat", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    results = data["results"]
    strategies = {r["strategy"] for r in results}
    assert strategies == {"off", "hip", "always", "oracle", "spark"}
    assert {r["broadcast_threshold"] for r in results} == {0, 10 * 1024 * 1024}
    for r in results:
        for key in ("query", "stages", "median_seconds", "min_seconds", "max_seconds", "shuffle_write_bytes",
                    "shuffle_write_records", "runs"):
            assert key in r, key
        run = r["runs"][0]
        assert run["seconds"] > 0
        if r["strategy"] != "spark":
            assert run["detail"]["stages"] and "planning_seconds" in run and "decision_seconds" in run
            stage = next(iter(run["detail"]["stages"].values()))
            assert {"seconds", "shuffle", "rows_written", "bytes_written", "summaries", "probes"} <= set(stage)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(results) and "pruning_efficiency" in rows[0] and "speedup_vs_spark" in rows[0]
    assert {r["strategy"] for r in data["summary"] if r["pruning_efficiency"] is not None} >= {"always", "oracle"}
    always = next(r for r in results if r["strategy"] == "always" and r["broadcast_threshold"] == 0)
    probes = [p for s in always["runs"][0]["detail"]["stages"].values() for p in s["probes"]]
    assert probes and all(p["rows_out"] <= p["rows_in"] for p in probes if p["rows_in"] is not None)


def test_bench_rejects_an_unknown_strategy(aipq):
    result = aipq("bench", "tpch", "--sf", str(SF), "--strategies", "off,magic")
    assert result.exit_code == 2 and "unknown strategy 'magic'" in result.output


def test_bench_says_adaptive_is_not_available_yet(aipq):
    result = aipq("bench", "tpch", "--sf", str(SF), "--strategies", "off,adaptive")
    assert result.exit_code == 2 and "not available yet" in result.output
