"""What explain shows, in one place for the command line and the Python API: a query's stage DAG with the
decisions, estimates and statistics known before it runs (``planned_explain``), or with what a run measured
(``analyzed_explain``), and its renderings as a plain-text tree and as Graphviz DOT. (Not ``aipq/explain.py``:
``aipq.explain`` is the Python API's function.)"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rich.tree import Tree

from aipq.engine.context import RunContext
from aipq.engine.report import run_dict
from aipq.estimator.join_estimates import KnownTables, stage_estimate_figures
from aipq.files import format_size
from aipq.ip.decisions import StageDecisions
from aipq.ip.explain import explain_dict
from aipq.pipeline import PlannedQuery
from aipq.planner.stages import StageDag
from aipq.stats.fingerprint import data_files
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.planner import plan_statistics
from aipq.workflow import PlannedStep
from aipq.workflow.planning_estimates import PlanTimeDecisions
from aipq.workflow.query import QueryRun, execute, finish_stage_cache, query_handoff
from aipq.workflow.transfer_choice import with_transfer_if_it_pays


def planned_explain(query: PlannedQuery, context: RunContext) -> dict:
    """What explain shows of a query without running it: the stage DAG with the decisions strategy ``adaptive``'s
    estimator makes from what is known now, each stage's estimated rows, the statistics a run would collect and
    the output sizes earlier runs of the same subplans recorded (the CLI and the Python API alike)."""
    adaptive = PlanTimeDecisions(query.dag, context)
    query, context, choice = with_transfer_if_it_pays(query, context, adaptive)
    chosen = bool(choice and choice.chosen)
    made = PlanTimeDecisions(query.dag, context) if chosen else adaptive
    dag, decisions = query.dag, made.decisions
    info = explain_dict(dag, context.settings, decisions)
    figures = stage_estimates(dag, context, decisions=decisions)
    known = known_stage_sizes(dag, context)
    for stage in info["stages"]:
        stage.update(figures.get(stage["id"], {}))
        stage["known_output"] = known.get(stage["id"])
    info["statistics"] = statistics_plan(dag, context)
    handoff = query_handoff(query, context, adaptive=made, choice=choice)
    info["handoff"] = {"chosen": handoff.chosen, "why": handoff.why}
    info["transfer_choice"] = choice.as_dict() if choice is not None else None
    return info



def analyzed_explain(query: PlannedQuery, context: RunContext) -> dict:
    """``explain --analyze``: run the query and add what was measured to the explain data, beside what was
    known and would be collected before the run (taken first: the run changes both)."""
    needs, known = statistics_plan(query.dag, context), known_stage_sizes(query.dag, context)
    result = execute(query, context, analyze=True)
    try:
        info = analyzed_info(result, context) | {"statistics": needs}
    finally:
        result.close()
        finish_stage_cache(context)
    for stage in info["stages"]:
        stage["known_output"] = known.get(stage["id"])
    return info


def analyzed_info(result: QueryRun, context: RunContext) -> dict:
    """The explain data with the decisions the run made, what it measured and how far the estimates were off."""
    record = result.record
    decisions = [m.decisions for m in record.stages if m.decisions is not None]
    info = explain_dict(result.planned.dag, context.settings, decisions)
    measured = run_dict(record)
    # a summary pre-pass (SCAN stage) whose summary was not built did not run
    info["stages"] = [stage for stage in info["stages"] if stage["id"] in measured["stages"]]
    for stage in info["stages"]:
        stage["measured"] = measured["stages"][stage["id"]]
    info["run"] = {k: v for k, v in measured.items() if k != "stages"}
    if record.handed_off:
        info["handoff"] = measured["handoff"]
    info["transfer_choice"] = record.transfer_choice
    add_estimates(info, {m.stage_id: m.estimate for m in record.stages})  # as the run recorded them
    return info



def add_estimates(info: dict, figures: dict[int, dict]) -> None:
    for stage in info["stages"]:
        stage.update(figures.get(stage["id"], {}))



def statement_info(planned: PlannedStep) -> dict:
    return {
        "number": planned.step.number,
        "kind": planned.step.kind,
        "statement": planned.step.describe(),
        "skipped": planned.skip_reason,
        "plan": explain_dict(planned.planned.dag, planned.settings) if planned.planned is not None else None,
    }



def known_stage_sizes(dag: StageDag, context: RunContext) -> dict[int, dict]:
    """Per stage, the output size an earlier query with the same subplan recorded (explain shows it)."""
    repository = context.repository
    if repository is None:
        return {}
    known = {}
    for stage in dag.stages:
        found = repository.stage(stage_plan_key(dag, stage.id),
                                 lambda path: data_files(context.storage, path).fingerprint)
        if found is not None:
            known[stage.id] = {"rows": found.rows, "bytes": found.bytes, "collected_by": found.collected_by}
    return known



def stage_estimates(dag: StageDag, context: RunContext, measured: dict[int, dict] | None = None,
                    history_before: float | None = math.inf,
                    decisions: Iterable[StageDecisions] = ()) -> dict[int, dict]:
    """Per stage, its output rows as estimated before it ran (from the same subplan's rows in a run recorded before
    ``history_before``, else from the tables' statistics; None: statistics alone), times the share the
    summaries its ``decisions`` chose were expected to keep, and, for a stage ``measured`` as written (a run's
    figures by stage id), how far off they were (``estimator.join_estimates.stage_estimate_figures``)."""
    tables = KnownTables(context.repository, context.storage, history_before)
    written = {stage_id: (bool(ran["materialized"]), ran["rows_written"]) for stage_id, ran in (measured or {}).items()}
    return stage_estimate_figures(dag, tables, written, {d.stage: d.rows_kept for d in decisions})



def statistics_plan(dag: StageDag, context: RunContext) -> list[dict]:
    """For explain: per input table, the statistics a run would collect and those already known."""
    if context.repository is None:
        return []
    needs = plan_statistics(dag, context.repository, context.storage, context.settings.stats_columns)
    if context.settings.statistics == "recollect":
        for need in needs:
            need.missing, need.known = need.columns, None
    return [need.as_dict() for need in needs]



def explain_tree(info: dict[str, Any]) -> Tree:
    stages = {s["id"]: s for s in info["stages"]}
    root = _plan_header(info)
    shown: set[int] = set()

    def add(parent: Tree, stage_id: int) -> None:
        stage = stages[stage_id]
        title = f"[bold cyan]{stage['name']}[/bold cyan] [bold]{stage['operator']}[/bold]"
        if stage["operator"] == "SCAN":
            phase = _transfer_phase(info, stage_id)
            title += (f" [dim](predicate transfer, {phase} pass)[/dim]" if phase else
                      " [dim](summary pre-pass: runs first, only if its summary is built)[/dim]")
        elif "staging" in stage:
            written = "output written" if stage["staging"]["materialized"] else "not written"
            title += f" [dim]({written}: {stage['staging']['why']})[/dim]"
        if stage_id in shown:
            parent.add(f"{title} [dim](shown above)[/dim]")
            return
        shown.add(stage_id)
        node = parent.add(title)
        _add_operators(node, stage)
        _add_scans(node, stage)
        node.add(f"output: [green]{', '.join(stage['output_columns'])}[/green]")
        _add_sizes(node, stage)
        _add_information_passing(node, stage)
        if "measured" in stage:
            _add_measures(node, stage["measured"])
        if stage["consumer_join_keys"]:
            node.add(f"consumer joins on: {', '.join(stage['consumer_join_keys'])}")
        if stage["siblings"]:
            node.add(f"siblings: {', '.join(f'S{s}' for s in stage['siblings'])}")
        for source in stage["inputs"]:
            if source["kind"] == "stage" and source["stage"] in stages:  # a handed-off run measured only its last
                add(node, source["stage"])

    add(root, info["final_stage"])
    for stage in info["stages"]:  # summary pre-passes: no stage reads their output
        if stage["id"] not in shown:
            add(root, stage["id"])
    _add_statistics(root, info.get("statistics"))
    return root



def _join_line(join: dict[str, Any]) -> str:
    keys = " AND ".join(f"{a} = {b}" for a, b in join["keys"]) or "no keys"
    residual = f" [dim]and {join['residual']}[/dim]" if join["residual"] else ""
    symbol = {"semi": "⋉", "anti": "▷"}.get(join["kind"], "⋈")
    return f"{join['kind'].upper()} JOIN {join['left']} {symbol} {join['right']} on {keys}{residual}"



def _replan_line(replan: dict[str, Any]) -> str:
    """One re-plan between stages (``--reoptimize-factor``): what was compared, and what changed."""
    estimate = replan["estimated_rows"]
    compared = (f"estimated {estimate:,.0f} rows · actual {replan['actual_rows']:,} (q-error {replan['q_error']:g})"
                if estimate is not None else f"no estimate · actual {replan['actual_rows']:,} rows")
    done = ", ".join(f"S{i}" for i in replan["finished_joins"])
    if replan["changed"]:
        outcome = (f"re-planned with {done} as done: stages {', '.join(f'S{i}' for i in replan['stages'])} "
                   f"replace the rest")
    else:
        outcome = f"re-planned with {done} as done: the same plan"
    return f"[yellow]after S{replan['after_stage']}: {compared}; {outcome}[/yellow]"



def _plan_header(info: dict[str, Any]) -> Tree:
    """The tree's root: stages, plan shape, joins and reduce tasks; the join-order, re-plan and
    pre-aggregation notes below it."""
    settings = info["settings"]
    threshold = settings["broadcast_threshold"]["value"]
    broadcast = f"broadcast ≤ {format_size(threshold)}" if threshold > 0 else "repartition joins only"
    partitions = settings["shuffle_partitions"]["value"]
    per_reducer = settings.get("reducer_bytes", {}).get("value", 0)
    reduce_phase = (f"reduce tasks: one per {format_size(per_reducer)} read, at most {partitions}" if per_reducer > 0
                    else f"{partitions} shuffle partitions")
    root = Tree(f"[bold]{len(info['stages'])} stage(s)[/bold] · plan {settings['plan']['value']} · {broadcast} · "
                f"{reduce_phase}")
    handoff = info.get("handoff")
    if handoff and handoff["chosen"]:
        root.add(f"[bold yellow]handed to Spark[/bold yellow] [dim]({handoff['why']})[/dim]")
    elif handoff:
        root.add(f"[dim]aipq's plan runs: {handoff['why']}[/dim]")
    choice = info.get("transfer_choice")
    if choice:
        root.add(f"[bold]predicate transfer chosen[/bold] [dim]({choice['why']})[/dim]" if choice["chosen"]
                 else f"[dim]no predicate transfer: {choice['why']}[/dim]")
    for note in info.get("join_order", []):
        root.add(f"[dim]join order: {note}[/dim]")
    for replan in info.get("run", {}).get("replans", []):
        line = root.add(_replan_line(replan))
        if replan["changed"]:
            for note in replan["join_order"]:
                line.add(f"[dim]join order: {note}[/dim]")
    for note in info.get("preaggregation", []):
        root.add(f"[dim]{note}[/dim]")
    for note in info.get("shared_subplans", []):
        root.add(f"[dim]shared: {note}[/dim]")
    _add_transfer_schedule(root, info.get("transfer_schedule"))
    return root



def _transfer_phase(info: dict[str, Any], stage_id: int) -> str | None:
    schedule = info.get("transfer_schedule") or {"passes": []}
    return next((p["phase"] for p in schedule["passes"] if p["stage"] == stage_id), None)



def _add_transfer_schedule(root: Tree, schedule: dict[str, Any] | None) -> None:
    """Predicate transfer's passes, one line per phase: the tables in the order they are read."""
    if not schedule:
        return
    line = root.add("[bold]predicate transfer[/bold] [dim](Bloom filters passed over the join graph before any "
                    "join)[/dim]")
    for phase in ("forward", "backward"):
        passes = [p for p in schedule["passes"] if p["phase"] == phase]
        if passes:
            line.add(f"{phase}: " + " → ".join(f"{p['table']} (S{p['stage']})" for p in passes))
    readers = sorted({f"{r['table']} in S{r['stage']}" for r in schedule["reading_stages"]})
    if readers:
        line.add("then probed where they are read: " + ", ".join(readers))



def _add_operators(node: Tree, stage: dict[str, Any]) -> None:
    """The stage's reduce operator, limit, and map-side joins and lateral views."""
    reduce = stage["reduce"]
    for join in reduce.get("joins", []):
        node.add(f"reduce: {_join_line(join)} [dim](repartition)[/dim]")
    if "group_by" in reduce:
        groups = ", ".join(reduce["group_by"]) or "(all rows)"
        if "grouping_sets" in reduce:
            groups += " GROUPING SETS (" + ", ".join(f"({', '.join(s)})" for s in reduce["grouping_sets"]) + ")"
        aggs = ", ".join(f"{v}" for v in reduce["aggregates"].values())
        node.add(f"reduce: GROUP BY {groups} → {aggs}")
    if "windows" in reduce:
        node.add("reduce: WINDOW " + ", ".join(f"{name} = {text}" for name, text in reduce["windows"].items()))
    if "order_by" in reduce:
        node.add(f"reduce: ORDER BY {', '.join(reduce['order_by'])}")
    if stage["limit"] is not None:
        node.add(f"limit {stage['limit']}")
    for join in stage["broadcast_joins"]:
        node.add(f"map-side: {_join_line(join)} [dim](broadcast {join['broadcast_side']})[/dim]")
    for view in stage.get("lateral_views", []):
        node.add(f"map-side: LATERAL VIEW {view}")



def _add_scans(node: Tree, stage: dict[str, Any]) -> None:
    for source in stage["inputs"]:
        if source["kind"] == "table":
            filters = f" [yellow]where {' and '.join(source['filters'])}[/yellow]" if source["filters"] else ""
            alias = f" as {source['alias']}" if source["alias"] != source["table"].split(".")[-1] else ""
            parts = source.get("partitions")
            parts = f" [dim]partitions {parts['read']} of {parts['registered']}[/dim]" if parts else ""
            node.add(f"scan {source['table']}{alias} [dim]({', '.join(source['columns'])})[/dim]{filters}{parts}")



def _add_sizes(node: Tree, stage: dict[str, Any]) -> None:
    """The stage's estimated rows (with the actual ones and the q-error after a run) and a size known from an
    earlier run of the same subplan."""
    if stage.get("estimated_rows") is not None:
        off = f" · actual {stage['measured']['rows_written']:,}, q-error {stage['q_error']:g}" \
            if "q_error" in stage else ""
        pruned = f" once its summaries prune ({stage['estimated_subplan_rows']:,.0f} without)" \
            if "estimated_subplan_rows" in stage else ""
        node.add(f"[blue]estimated[/blue] {stage['estimated_rows']:,.0f} rows{pruned}{off} "
                 f"[dim](from {stage.get('estimated_from', 'the tables statistics')})[/dim]")
    if stage.get("known_output"):
        known = stage["known_output"]
        node.add(f"[blue]known size[/blue] {known['rows']:,} rows, {format_size(known['bytes'])} "
                 f"[dim](same subplan in {known['collected_by']})[/dim]")



def _add_statistics(root: Tree, needs: list[dict[str, Any]] | None) -> None:
    """Which statistics the run collects in passing and which the repository already has."""
    if not needs:
        return
    collect = [f"{n['table']}({', '.join(n['collect'])})" if n["collect"] else f"{n['table']}(rows, bytes)"
               for n in needs if n["collect"] or n["table_statistics"] == "collect"]
    known = [n["table"] for n in needs if not n["collect"] and n["table_statistics"] == "known"]
    node = root.add("[blue]statistics[/blue]")
    if collect:
        node.add(f"collects in passing: {'; '.join(collect)}")
    if known:
        node.add(f"known from earlier queries: {', '.join(known)}")



def _add_information_passing(node: Tree, stage: dict[str, Any]) -> None:
    ip = stage.get("information_passing") or {}
    for build in ip.get("builds", []):
        size = f", {format_size(build['bytes'])}" if build["bytes"] else ""
        sized = f" for ~{build['sized_for_items']:,} keys" if build["sized_for_items"] else ""
        node.add(f"[magenta]builds[/magenta] {build['kind']} summary on {build['column']}{size}{sized} "
                 f"[dim]({build['reason']})[/dim]")
    for use in ip.get("uses", []):
        line = node.add(f"[magenta]uses[/magenta] {use['summary']} on {use['target']}.{use['target_column']}, "
                        f"{use['where']} [dim]({use['reason']})[/dim]")
        _add_estimate(line, use.get("estimate"))
    for rejected in ip.get("rejected", []):
        line = node.add(f"[dim]skips {rejected['summary']} on {rejected['target']}.{rejected['target_column']}: "
                        f"{rejected['reason']}[/dim]")
        _add_estimate(line, rejected.get("estimate"))



def _add_estimate(node: Tree, estimate: dict[str, Any] | None) -> None:
    """The benefit estimate behind an adaptive decision: eq. (1)'s terms, the model's inputs, their sources."""
    if not estimate:
        return
    node.add(f"[dim]B = {estimate['B']:.4f} s = B_sort {estimate['B_sort']:.4f} + B_shuffle "
             f"{estimate['B_shuffle']:.4f} + B_merge {estimate['B_merge']:.4f} + other {estimate['other']:.4f} "
             f"− C_summary {estimate['C_summary']:.4f}[/dim]")
    if estimate.get("savings_share", 1.0) < 1.0:
        node.add(f"[dim]the savings terms count {estimate['savings_share']:.0%} of their estimate (--margin): "
                 f"the costs are sure, the savings predicted[/dim]")
    if estimate.get("downstream"):
        node.add(f"[dim]other includes {estimate['downstream']:.4f} s saved further on: the places this edge "
                 f"makes redundant (the largest of their savings)[/dim]")
    share = estimate["inputs"].get("shuffle_share", 1.0)
    reaching = f" reaching the shuffle ({share:.1%} of the probed rows)" if share < 1.0 else ""
    node.add(f"[dim]Δ {estimate['delta_pages']:.2f} of M {estimate['M_pages']:.2f} pages per map task{reaching} "
             f"(keeps {estimate['surviving_share']:.1%}; filter {format_size(estimate['filter_bytes'])}, "
             f"FPR {estimate['false_positive_rate']:.2%}), m {estimate['m']:g}, r {estimate['r']}, "
             f"B {estimate['B_pages']:g} pages[/dim]")
    node.add("[dim]from: " + "; ".join(f"{k}: {v}" for k, v in estimate["sources"].items()) + "[/dim]")



def _add_measures(node: Tree, measured: dict[str, Any]) -> None:
    shuffle = measured["shuffle"]
    if not measured["materialized"]:
        node.add(f"[cyan]measured[/cyan] {measured['staging']}: ran in that stage's job")
    elif measured.get("reused"):
        node.add(f"[cyan]measured[/cyan] {measured['rows_written']:,} rows {measured['staging']}: not computed")
    else:
        node.add(f"[cyan]measured[/cyan] {measured['seconds']:.2f} s · wrote {measured['rows_written']:,} rows "
                 f"({format_size(measured['bytes_written'])}) · shuffle write "
                 f"{format_size(shuffle['shuffle_write_bytes'])} "
                 f"({shuffle['shuffle_write_records']:,} rows), read {format_size(shuffle['shuffle_read_bytes'])}"
                 f" · {measured['reduce_tasks']} reduce tasks")
        if measured.get("spark_joins"):
            ran = ", ".join(f"{count} {name}" for name, count in measured["spark_joins"].items())
            node.add(f"[cyan]Spark ran[/cyan] {ran} [dim](its final plan, fused stages included)[/dim]")
    if measured.get("kept_rows"):
        node.add(f"[cyan]scan once[/cyan] {measured['kept_rows']}")
    for note in measured.get("measured_broadcasts", []):
        outputs = ", ".join(f"S{stage} {format_size(size)}" for stage, size in note["stage_bytes"].items())
        node.add(f"[cyan]map-side[/cyan] {note['join']} join: its {note['side']} input broadcast, measured "
                 f"within the broadcast threshold ({outputs})")
    for probe in measured["probes"]:
        if probe["skipped"]:
            node.add(f"[cyan]probe[/cyan] S{probe['producer']}.{probe['column']} on {probe['target']}: "
                     f"not applied, {probe['skipped']}")
        elif probe.get("partitions"):
            left, registered = probe["partitions"]
            node.add(f"[cyan]probe[/cyan] S{probe['producer']}.{probe['column']} ({probe['kind']}) on "
                     f"{probe['target']}.{probe['target_column']}: {left} of {registered} partitions left to read")
        elif probe["rows_in"] is not None:
            kept = probe["rows_out"] / probe["rows_in"] if probe["rows_in"] else 1.0
            fpr = f", measured false-positive rate {probe['measured_fpr']:.2%}" \
                if probe["measured_fpr"] is not None else ""
            idle = f", {probe['unprobed_rows']:,} rows let through unprobed where it removed too few " \
                   f"(--probe-min-rejection)" if probe.get("unprobed_rows") else ""
            node.add(f"[cyan]probe[/cyan] S{probe['producer']}.{probe['column']} ({probe['kind']}) on "
                     f"{probe['target']}.{probe['target_column']}: {probe['rows_in']:,} → {probe['rows_out']:,} "
                     f"rows ({kept:.1%} kept){fpr}{idle}")
    for summary in measured["summaries"]:
        size = format_size(summary["size_bytes"]) if summary["size_bytes"] is not None else "the stage output"
        fpp = f", false-positive rate ≈ {summary['expected_fpp']:.2%}" if summary["expected_fpp"] is not None else ""
        how = "[cyan]taken[/cyan] from the stage-output cache:" if summary.get("offered") else "[cyan]built[/cyan]"
        node.add(f"{how} {summary['kind']} on {summary['column']}: ~{summary['items']:,} keys, {size}{fpp}")



def explain_dot(info: dict[str, Any]) -> str:
    lines = ["digraph aipq {", "  rankdir=BT;", '  node [fontname="Helvetica"];']
    tables: set[str] = set()
    for stage in info["stages"]:
        detail = ""
        for join in stage["reduce"].get("joins", []):
            detail += "\\n" + " AND ".join(f"{a} = {b}" for a, b in join["keys"])
        if "group_by" in stage["reduce"]:
            detail += "\\nGROUP BY " + ", ".join(stage["reduce"]["group_by"])
        if "windows" in stage["reduce"]:
            detail += "\\nWINDOW " + ", ".join(stage["reduce"]["windows"])
        if "order_by" in stage["reduce"]:
            detail += "\\nORDER BY " + ", ".join(stage["reduce"]["order_by"])
        lines.append(f'  S{stage["id"]} [shape=box, label="{stage["name"]} {stage["operator"]}{detail}"];')
        for source in stage["inputs"]:
            if source["kind"] == "table":
                table = source["table"]
                if table not in tables:
                    tables.add(table)
                    lines.append(f'  "{table}" [shape=cylinder];')
                lines.append(f'  "{table}" -> S{stage["id"]};')
            else:
                lines.append(f'  S{source["stage"]} -> S{stage["id"]};')
    lines += _dot_summary_edges(info)
    lines.append("}")
    return "\n".join(lines)



def _dot_summary_edges(info: dict[str, Any]) -> list[str]:
    """A dashed edge per summary a stage probes, from the stage that builds it, labelled with its column."""
    lines = []
    for stage in info["stages"]:
        for use in stage.get("information_passing", {}).get("uses", []):
            label = f'{use["column"]} → {use["target"]}.{use["target_column"]}'
            lines.append(f'  S{use["producer"]} -> S{stage["id"]} [style=dashed, color=blue, label="{label}"];')
    return lines

