"""Staging (``--staging``): fused stage boundaries never change a result, and a boundary is written exactly where
the staging mode says (``ip/staging.py``)."""

from __future__ import annotations

import json

import pytest
from conftest import ALL_QUERIES, assert_same_rows, oracle_rows, run_to_rows

from aipq.tpch.queries import query_text


@pytest.mark.parametrize("staging", ["adaptive", "none"])
@pytest.mark.parametrize("strategy", ["off", "always", "adaptive"])
@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_rows_are_the_same_under_every_staging(aipq, duck, tmp_path, number, broadcast, strategy, staging):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--staging", staging, "--ip", strategy,
                         "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def analyzed(aipq, *args: str) -> dict:
    result = aipq("explain", *args, "--analyze", "--format", "json", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_hive_staging_writes_every_stage_and_none_only_the_result(aipq):
    hive = analyzed(aipq, "tpch:9", "--staging", "hive")
    assert all(s["measured"]["materialized"] for s in hive["stages"])
    none = analyzed(aipq, "tpch:9", "--staging", "none")
    written = [s["id"] for s in none["stages"] if s["measured"]["materialized"]]
    assert written == [none["final_stage"]]
    fused = [s for s in none["stages"] if not s["measured"]["materialized"]]
    assert fused and all(s["measured"]["staging"].startswith("fused into S") for s in fused)


def test_adaptive_staging_writes_the_stages_that_build_summaries_and_they_still_prune(aipq):
    info = analyzed(aipq, "tpch:9", "--staging", "adaptive", "--ip", "always")
    for stage in info["stages"]:
        builds = stage["information_passing"]["builds"]
        if stage["operator"] != "SCAN" and stage["id"] != info["final_stage"]:
            assert stage["measured"]["materialized"] == bool(builds), stage["name"]
    probes = [p for s in info["stages"] for p in s["measured"]["probes"] if p["rows_in"] is not None]
    assert probes and any(p["rows_out"] < p["rows_in"] for p in probes)
    # the probes of fused stages ran in their consumer's job, and were counted there
    fused_probes = [p for s in info["stages"] if not s["measured"]["materialized"] for p in s["measured"]["probes"]]
    assert all(p["rows_in"] is not None for p in fused_probes if not p["skipped"])


def test_none_staging_keeps_filtered_table_prepasses(aipq):
    info = analyzed(aipq, "tpch:9", "--staging", "none", "--ip", "always")
    stage_builds = [b for s in info["stages"] if s["operator"] != "SCAN"
                    for b in s["information_passing"]["builds"]]
    assert not stage_builds  # nothing but the result is written, so no stage output can build a summary
    assert any(s["operator"] == "SCAN" and s["information_passing"]["builds"] for s in info["stages"])


def test_explain_says_which_boundaries_are_written(aipq):
    result = aipq("explain", "tpch:3", "--staging", "adaptive", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    assert "fused into S" in result.output and "output written: the result" in result.output


def test_staging_is_set_by_its_spark_style_name_in_a_workflow(aipq, tmp_path):
    script = tmp_path / "staged.sql"
    script.write_text("SET aipq.staging=none;\n" + query_text(3))
    result = aipq("explain", str(script), "--format", "json", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)["statements"][1]["plan"]
    assert plan["settings"]["staging"]["value"] == "none"
    assert [s["staging"]["materialized"] for s in plan["stages"]].count(True) == 1
