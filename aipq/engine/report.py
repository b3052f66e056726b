"""A run's measured figures as plain data (for ``--analyze`` and the JSON output)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aipq.engine.records import RunRecord, StageMetrics


def stage_measures(metrics: StageMetrics) -> dict[str, Any]:
    probed = [p for p in metrics.probes if p.rows_in is not None]
    return {
        "seconds": round(metrics.seconds, 3),
        "decision_seconds": round(metrics.decision_seconds, 4),
        "rows_written": metrics.rows_written,
        **metrics.estimate,  # estimated_rows, estimated_from, q_error: the estimate beside the actual rows
        "bytes_written": metrics.bytes_written,
        "reduce_tasks": metrics.reduce_tasks,
        "materialized": metrics.materialized,
        "spark_joins": metrics.spark_joins,
        "measured_broadcasts": metrics.measured_broadcasts,
        "staging": metrics.staging,
        "reused": metrics.reused,
        "kept_rows": metrics.kept_rows,
        "shuffle": asdict(metrics.shuffle),
        "input_rows_probed": sum(p.rows_in for p in probed if p is _first_on_input(probed, p)),
        "summaries": [s.metadata() for s in metrics.summaries],
        "probes": [p.as_dict() for p in metrics.probes],
    }


def _first_on_input(probes, probe):
    """Chained probes on one input share its row count; count each input once."""
    for candidate in probes:
        if (candidate.target, candidate.place) == (probe.target, probe.place):
            return candidate
    return probe


def run_dict(record: RunRecord) -> dict[str, Any]:
    """The run as plain data; each stage's estimated rows (and q-error) beside its actual rows."""
    record.fill_estimates()
    return {
        "run_id": record.run_id,
        "strategy": record.strategy,
        "seconds": round(record.seconds, 3),
        "result_rows": record.result_rows,
        "stages": {m.stage_id: stage_measures(m) for m in record.stages},
        "replans": record.replans,
        "handoff": {"chosen": bool(record.handed_off), "why": record.handed_off} if record.handed_off else None,
        "transfer_choice": record.transfer_choice,
    }


def application(spark) -> dict[str, Any] | None:
    """Where a command ran (None when it started no Spark session): for a scheduler's log."""
    if spark is None:
        return None
    context = spark.sparkContext
    return {"master": context.master, "application_id": context.applicationId, "spark_version": spark.version}
