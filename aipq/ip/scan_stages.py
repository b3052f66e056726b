"""SCAN stages: a base table read before any other stage, for the summaries of its keys (``ip/scan_summaries.py``'s
pre-passes, ``ip/transfer.py``'s passes)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from aipq.planner.logical import Node, Project, Scan
from aipq.planner.stages import Stage, StageDag


def with_scan_stages(dag: StageDag, scans: list[tuple[int, Scan, tuple[str, ...]]],
                     inputs: dict[int, Node] | None = None) -> StageDag:
    """``dag`` with a SCAN stage (id, scan, the key columns it writes) for each of ``scans`` run first, in order.
    ``inputs``: for a scan (by node id), the plan the stage reads instead of the bare scan (the scan semi-joined
    with the filtered tables that reach it)."""
    stages = []
    for stage_id, scan, columns in scans:
        source = (inputs or {}).get(id(scan), scan)
        plan = source if columns == source.output else Project(source, tuple((c, exp.column(c)) for c in columns))
        stages.append(Stage(id=stage_id, operator="SCAN", plan=plan, reduce_node=None, output_columns=columns,
                            tables=(scan.table.qualified_name,), consumer_keys=columns))
    return replace(dag, stages=stages + list(dag.stages))
