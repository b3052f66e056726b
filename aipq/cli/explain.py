"""``aipq explain``: the stage DAG a query or workflow would run, with the decisions behind it (``--analyze``:
run it and show what was measured)."""

from __future__ import annotations

import json

import click
from rich.console import Console

from aipq import workflow
from aipq.cli.options import home_dir, planning_options
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.errors import BadInputError
from aipq.explanation import analyzed_explain, explain_dot, explain_tree, planned_explain, statement_info
from aipq.workflow.source import load_sql


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
    planned = workflow.plan_workflow(load_sql(source, inline), context, allow_overwrite)
    if analyze and not planned.is_single_query:
        raise BadInputError("--analyze works on a single query", hint="explain each statement on its own")
    if planned.is_single_query:
        query = planned.steps[0].planned
        assert query is not None
        info = analyzed_explain(query, context) if analyze else planned_explain(query, context)
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






