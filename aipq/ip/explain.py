"""The stage DAG as plain data: what ``aipq explain`` renders as a tree, JSON or Graphviz."""

from __future__ import annotations

from typing import Any

from aipq.config import KNOBS, Settings
from aipq.ip import staging
from aipq.ip.decisions import EdgeEstimator, StageDecisions, SummaryBuild, SummaryUse
from aipq.ip.planner import IpPlanner
from aipq.planner.logical import Aggregate, Generate, Join, Limit, Node, Scan, Sort, Window, render
from aipq.planner.stages import Stage, StageDag, StageRead


def show(expression) -> str:
    return render(expression).replace("`", "")


def _join_info(join: Join) -> dict[str, Any]:
    return {
        "kind": join.kind,
        "physical": join.physical,
        "broadcast_side": join.broadcast_side,
        "keys": [[lk, rk] for lk, rk in zip(join.left_keys, join.right_keys)],
        "residual": show(join.residual) if join.residual is not None else None,
        "left": _side_label(join.left),
        "right": _side_label(join.right),
    }


def _side_label(node: Node) -> str:
    parts = []
    for sub in node.walk():
        if isinstance(sub, Scan):
            parts.append(sub.table.name if sub.alias == sub.table.name else f"{sub.table.name} {sub.alias}")
        elif isinstance(sub, StageRead):
            parts.append(f"S{sub.stage_id}")
    return " ⋈ ".join(parts)


def stage_info(dag: StageDag, stage: Stage) -> dict[str, Any]:
    nodes = list(stage.plan.walk())
    inputs: list[dict[str, Any]] = []
    for node in nodes:
        if isinstance(node, Scan):
            inputs.append({"kind": "table", "table": node.table.qualified_name, "alias": node.alias,
                           "path": node.table.path, "columns": [c for c, _ in node.columns],
                           "filters": [show(f) for f in node.filters]})
            if node.table.partitioned:
                inputs[-1]["partitions"] = {"read": len(node.table.partitions),
                                            "registered": node.all_partitions or len(node.table.partitions)}
        elif isinstance(node, StageRead):
            inputs.append({"kind": "stage", "stage": node.stage_id, "columns": list(node.columns)})
    reduce: dict[str, Any] = {}
    if stage.operator == "JOIN":
        reduce["joins"] = [_join_info(j) for j in stage.merged_joins()]
    elif isinstance(stage.reduce_node, Aggregate):
        reduce["group_by"] = [show(e) for _, e in stage.reduce_node.groups]
        if stage.reduce_node.grouping_sets is not None:
            reduce["grouping_sets"] = [list(chosen) for chosen in stage.reduce_node.grouping_sets]
        reduce["aggregates"] = {n: show(e) for n, e in stage.reduce_node.aggregates}
    elif isinstance(stage.reduce_node, Window):
        reduce["windows"] = {n: show(e) for n, e in stage.reduce_node.items}
    elif isinstance(stage.reduce_node, Sort):
        reduce["order_by"] = [f"{k.column} {'desc' if k.descending else 'asc'}" for k in stage.reduce_node.keys]
    limits = [n.count for n in nodes if isinstance(n, Limit)]
    return {
        "id": stage.id,
        "name": stage.name,
        "operator": stage.operator,
        "inputs": inputs,
        "reduce": reduce,
        "limit": limits[0] if limits else None,
        "broadcast_joins": [_join_info(n) for n in nodes if isinstance(n, Join) and n.physical == "broadcast"],
        "lateral_views": [f"{'OUTER ' if n.outer else ''}{show(n.generator)} AS {', '.join(n.names)}"
                          for n in nodes if isinstance(n, Generate)],
        "output_columns": list(stage.output_columns),
        "consumers": dag.dataflow.get(stage.id, []),
        "depends_on": dag.dependency.get(stage.id, []),
        "siblings": dag.siblings(stage.id),
        "consumer_join_keys": list(stage.consumer_keys),
    }


def build_info(build: SummaryBuild) -> dict[str, Any]:
    return {"stage": build.stage, "column": build.column, "kind": build.kind, "bits": build.bits,
            "bytes": build.planned_bytes, "sized_for_items": build.expected_items, "reason": build.reason,
            "estimate": build.estimate}


def use_info(use: SummaryUse) -> dict[str, Any]:
    return {"summary": f"S{use.producer}.{use.column}", "producer": use.producer, "column": use.column,
            "target": use.target.label, "target_column": use.target.column, "place": use.target.place,
            "where": "input, before the shuffle" if use.target.place == "input" else "output, before the write",
            "relation": use.relation, "reason": use.reason, "estimate": use.estimate}


def decisions_info(decisions: StageDecisions) -> dict[str, Any]:
    return {
        "builds": [build_info(b) for b in decisions.builds],
        "uses": [use_info(u) for u in decisions.uses],
        "rejected": [{"summary": f"S{r.candidate.producer}.{r.candidate.column}", "target": r.candidate.target.label,
                      "target_column": r.candidate.target.column, "relation": r.candidate.relation,
                      "reason": r.reason, "estimate": r.estimate} for r in decisions.rejected],
    }


def explain_dict(dag: StageDag, settings: Settings, decisions: list[StageDecisions] | None = None,
                 estimator: EdgeEstimator | None = None) -> dict[str, Any]:
    """The DAG as data; with the information passing decisions the strategy would make (planned sizes, and
    for ``adaptive`` the estimates from what is known before the run), or those a run made."""
    values = settings.knob_values()
    if decisions is None:
        decisions = IpPlanner(dag, settings, estimator=estimator).plan_all()
    by_stage = {d.stage: d for d in decisions}
    stages = []
    for stage in dag.stages:
        info = stage_info(dag, stage)
        decided = by_stage.get(stage.id, StageDecisions(stage.id))
        info["information_passing"] = decisions_info(decided)
        written, why = staging.materialized(dag, stage, settings, bool(decided.builds))
        info["staging"] = {"materialized": written, "why": why}
        stages.append(info)
    return {
        "settings": {k.name: {"value": values[k.name], "default": k.default, "doc": k.doc} for k in KNOBS},
        "output_columns": list(dag.plan.output_names),
        "join_order": list(dag.plan.join_order),
        "preaggregation": list(dag.plan.preaggregations),
        "shared_subplans": list(dag.plan.shared_notes),
        "final_stage": dag.final.id,
        "stages": stages,
        "dataflow_graph": {str(k): v for k, v in dag.dataflow.items()},
        "dependency_graph": {str(k): v for k, v in dag.dependency.items()},
        "transfer_schedule": transfer_schedule(dag),
    }


def transfer_schedule(dag: StageDag) -> dict[str, Any] | None:
    """Predicate transfer's passes in the order they run, and which earlier pass probes each one (None
    without a transfer schedule)."""
    if not dag.transfer_passes:
        return None
    passes = []
    for stage in dag.stages:
        phase = dag.transfer_passes.get(stage.id)
        if phase is not None:
            probes = [f"S{t.producer}.{t.column} on {t.target_column}" for t in dag.transfers if t.stage == stage.id]
            passes.append({"stage": stage.id, "table": _side_label(stage.plan), "phase": phase, "probed_by": probes})
    reading = [{"stage": t.stage, "table": t.label, "summary": f"S{t.producer}.{t.column}",
                "column": t.target_column} for t in dag.transfers if t.stage not in dag.transfer_passes]
    return {"passes": passes, "reading_stages": reading}
