"""``aipq explain``: the stage DAG a query or workflow would run, with the decisions behind it (``--analyze``:
run it and show what was measured)."""

from __future__ import annotations

import json

import click
from rich.console import Console

from aipq import app, workflow
from aipq.cli.options import home_dir, planning_options
from aipq.cli.render import (
    explain_dot,
    explain_tree,
)
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.report import run_dict
from aipq.errors import BadInputError
from aipq.ip.explain import explain_dict


@click.command()
@click.argument("source", required=False, metavar="FILE")
@click.option("--sql", "inline", default=None, help="Query text instead of a FILE.")
@planning_options
@click.option("--format", "fmt", type=click.Choice(["tree", "json", "dot"]), default="tree", show_default=True)
@click.option("--allow-overwrite", is_flag=True, help="As for run: plan statements that replace tables.")
@click.option("--analyze", is_flag=True,
              help="Run the query and add measured figures: rows before/after pruning, shuffle bytes, summaries.")
@click.pass_context
def explain(ctx, source, inline, settings: Settings, fmt, allow_overwrite, analyze):
    """Show the stage DAG a query compiles to (for a workflow: each statement's), with the information
    passing decisions of the chosen --ip strategy."""
    context = RunContext(home_dir(ctx), settings)
    planned = workflow.plan_workflow(app.load_sql(source, inline), context, allow_overwrite)
    if analyze and not planned.is_single_query:
        raise BadInputError("--analyze works on a single query", hint="explain each statement on its own")
    if planned.is_single_query:
        query = planned.steps[0].planned
        assert query is not None
        if analyze:  # what it knew and would collect is taken before the run changes both
            needs, known = app.statistics_plan(query.dag, context), app.known_stage_sizes(query.dag, context)
            result = app.execute(query, context, analyze=True)
            try:
                info = analyzed_info(result, context) | {"statistics": needs}
            finally:
                result.close()
                app.finish_stage_cache(context)
            for stage in info["stages"]:
                stage["known_output"] = known.get(stage["id"])
        else:
            info = app.planned_explain(query, context)
        if fmt == "json":
            click.echo(json.dumps(info, indent=2, default=str))
        elif fmt == "dot":
            click.echo(explain_dot(info))
        else:
            Console().print(explain_tree(info))
        return
    statements = [statement_info(s) for s in planned.steps]
    if fmt == "json":
        click.echo(json.dumps({"statements": statements}, indent=2, default=str))
    elif fmt == "dot":
        for statement in statements:
            if statement["plan"] is not None:
                click.echo(f"// statement {statement['number']}: {statement['statement']}")
                click.echo(explain_dot(statement["plan"]))
    else:
        console = Console()
        for statement in statements:
            note = f" [dim]— {statement['skipped']}[/dim]" if statement["skipped"] else ""
            console.print(f"[bold]{statement['number']}. {statement['statement']}[/bold]{note}")
            if statement["plan"] is not None:
                console.print(explain_tree(statement["plan"]))


def analyzed_info(result: app.QueryRun, context: RunContext) -> dict:
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
    add_estimates(info, {m.stage_id: m.estimate for m in record.stages})  # as the run recorded them
    return info


def add_estimates(info: dict, figures: dict[int, dict]) -> None:
    for stage in info["stages"]:
        stage.update(figures.get(stage["id"], {}))


def statement_info(planned: workflow.PlannedStep) -> dict:
    return {
        "number": planned.step.number,
        "kind": planned.step.kind,
        "statement": planned.step.describe(),
        "skipped": planned.skip_reason,
        "plan": explain_dict(planned.planned.dag, planned.settings) if planned.planned is not None else None,
    }
