"""A run's record carries each stage's estimated rows beside its actual rows (issue 82): ``Result.run`` and
``aipq run --report`` give the q-error of any workload, computed from the run itself."""

from __future__ import annotations

import json

import pytest

import aipq
from aipq.estimator.join_estimates import q_error

QUERY = "select n_regionkey, count(*) as n from nation join region on n_regionkey = r_regionkey group by n_regionkey"


def _check_estimates(stages: dict) -> None:
    for stage in stages.values():
        assert {"estimated_rows", "estimated_from"} <= set(stage), stage
        if stage["materialized"] and stage["estimated_rows"] is not None:
            assert stage["q_error"] == pytest.approx(q_error(stage["estimated_rows"], stage["rows_written"]),
                                                     abs=0.01)


def test_result_run_carries_each_stages_estimate_and_q_error(spark, home, tpch):
    result = aipq.sql(QUERY, spark=spark, home=home, staging="hive")
    _check_estimates(result.run["stages"])
    final = list(result.run["stages"].values())[-1]
    assert final["rows_written"] == 5 and final["estimated_rows"] is not None and final["q_error"] >= 1.0


def test_the_runs_report_carries_each_stages_estimate(aipq, tmp_path):
    report = tmp_path / "run.json"
    workflow = f"create temporary view est_nations as select * from nation;\n{QUERY}"
    done = aipq("run", "--sql", workflow, "--report", str(report), "--quiet", "--format", "csv")
    assert done.exit_code == 0, done.output
    found = json.loads(report.read_text())
    _check_estimates(found["result"]["stages"])
    _check_estimates(found["statements"][-1]["run"]["stages"])
    assert any(s.get("q_error") is not None for s in found["result"]["stages"].values())


def test_a_calls_estimates_are_computed_only_when_its_run_is_read(spark, home, tpch, monkeypatch):
    """``aipq.sql`` does not wait for the stages' estimates (planning work of milliseconds per query): they are
    computed when ``Result.run`` is first read, once."""
    from aipq.engine import executor

    computed = []
    estimate = executor.record_estimates
    monkeypatch.setattr(executor, "record_estimates", lambda *args: computed.append(1) or estimate(*args))
    result = aipq.sql(QUERY, spark=spark, home=home, handoff="off")
    assert result.rows and not computed
    assert result.run["stages"] and result.run["result_rows"] == 5 and computed == [1]
