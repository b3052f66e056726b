"""``aipq run``: a query, a workflow file or a batch of files, its rows shown or written."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import click
from rich.console import Console

from aipq import batch, workflow
from aipq.batch import is_batch
from aipq.cli.options import home_dir, planning_options
from aipq.cli.progress import RichStageProgress
from aipq.cli.render import result_caption, result_table, run_summary
from aipq.cli.run_report import RunReport, check_distinct_files
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.sink import (
    OUTPUT_FORMATS,
    TEXT_FORMATS,
    head_rows,
    output_format,
    stream_output,
    write_output,
)
from aipq.errors import BadInputError
from aipq.explanation import analyzed_info, explain_tree
from aipq.workflow.query import keep_stage_outputs
from aipq.workflow.source import load_sql, statements_file


@click.command()
@click.argument("sources", nargs=-1, metavar="FILE...")
@click.option("--sql", "inline", default=None, help="Query text instead of a FILE.")
@planning_options
@click.option("--format", "fmt", type=click.Choice(["table", *OUTPUT_FORMATS]), default=None,
              help="Result format: table (default on the terminal), csv or json (JSON lines) to stdout, or with "
                   "--output the file's format (default: from its extension .csv, .json/.jsonl, .parquet).")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="Write the result to this file (atomically; an existing file only with --force).")
@click.option("--output-dir", "output_dir", type=click.Path(file_okay=False), default=None,
              help="With several FILEs or a directory (a batch): each file's result in this folder, as "
                   "NAME.parquet (or --format csv|json).")
@click.option("--force", is_flag=True, help="Let --output, --report and --output-dir's files replace existing files.")
@click.option("--limit", "show_rows", type=click.IntRange(0), default=50, show_default=True,
              help="Rows shown with --format table.")
@click.option("--keep-work", is_flag=True,
              help="Keep the stage outputs of this run under <home>/runs (and those moved into the stage-output "
                   "cache there).")
@click.option("--allow-overwrite", is_flag=True,
              help="Let the workflow drop or overwrite tables it did not create.")
@click.option("--quiet", is_flag=True, help="No per-stage summary.")
@click.option("--analyze", is_flag=True, help="After the result, the stage tree with measured figures (stderr).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write a JSON record of the run here for a scheduler: its status (running, succeeded, or failed "
                   "with the error), each completed statement's outcome, rows, bytes, seconds, summaries and rows "
                   "pruned per stage, and the tables written.")
@click.option("--resume", is_flag=True,
              help="Continue a workflow FILE whose last run failed or was killed: the statements it committed are "
                   "not run again.")
@click.pass_context
def run(ctx, sources, inline, settings: Settings, fmt, output, output_dir, force, show_rows, keep_work,
        allow_overwrite, quiet, analyze, resume, report_path):
    """Run a query or a workflow of statements (FILE, '-' for stdin, tpch:N or tpcds:N) and show or write the rows of
    its last SELECT. Several FILEs, or a directory of .sql files, run as a batch: planned together, each stage
    they have in common computed once, each file's rows written to --output-dir."""
    context = RunContext(home_dir(ctx), settings)
    if is_batch(sources) or output_dir is not None:
        _run_batch(context, list(sources), fmt, output_dir, force, allow_overwrite, quiet,
                   refused={"--sql": inline is not None, "--output": output is not None, "--resume": resume,
                            "--analyze": analyze, "--keep-work": keep_work, "--report": report_path is not None})
        return
    source = sources[0] if sources else None
    check_distinct_files({"--output": output, "--report": report_path,
                          "the statements' file": statements_file(source)})
    targets = _Targets(output, fmt, force, show_rows, keep_work, quiet, analyze)
    if report_path is None:
        _run_one(context, source, inline, targets, allow_overwrite, resume, None)
        return
    report = RunReport(context.storage.check_local_target(str(report_path), force, "--report"),
                       "<--sql>" if inline is not None else str(source), context)
    report.started()  # from here on the report tells this run's outcome, whatever it is
    try:
        ran = _run_one(context, source, inline, targets, allow_overwrite, resume, report)
    except BaseException as error:
        report.failed(error)
        raise
    if ran is not None:
        report.succeeded(ran)


@dataclass(frozen=True)
class _Targets:
    """Where and how ``aipq run`` puts a query's rows and what it says on stderr."""

    output: str | None
    fmt: str | None  # None: from --output's extension, else a table
    force: bool
    show_rows: int
    keep_work: bool
    quiet: bool
    analyze: bool


def _run_one(context: RunContext, source: str | None, inline: str | None, targets: _Targets, allow_overwrite: bool,
             resume: bool, report: RunReport | None) -> workflow.WorkflowRun | None:
    """Run one query or workflow and show or write its last SELECT's rows; the workflow's run."""
    sql = load_sql(source, inline)
    if report is not None:
        report.source = sql.name
    if targets.fmt == "parquet" and targets.output is None:
        raise BadInputError("--format parquet needs --output PATH")
    if targets.output is not None:
        targets = replace(targets, fmt=output_format(str(targets.output), targets.fmt),
                          output=context.storage.check_local_target(str(targets.output), targets.force))
    targets = replace(targets, fmt=targets.fmt or "table")
    cached_in = keep_stage_outputs(context) if targets.keep_work else None
    planned = workflow.plan_workflow(sql, context, allow_overwrite, record=True, resume=resume)
    if targets.output is not None and not any(isinstance(s.step, workflow.QueryStep) for s in planned.steps):
        raise BadInputError("--output was given but the workflow has no SELECT whose rows could be written")
    err = Console(stderr=True)

    def step_done(outcome: workflow.StepOutcome) -> None:
        if report is not None:
            report.step_done(outcome)
        if not targets.quiet:
            took = f" [dim]({outcome.seconds:.1f} s)[/dim]" if outcome.seconds else ""
            err.print(f"[bold]{outcome.step.number}.[/bold] {outcome.step.describe()}: {outcome.message}{took}")

    straight = targets.fmt if targets.fmt in TEXT_FORMATS else None  # the final stage writes CSV or JSON lines
    if err.is_terminal and not targets.quiet:
        with RichStageProgress(context.spark, err) as listener:
            ran = workflow.run_workflow(planned, listener, step_done, targets.analyze, straight)
    else:
        ran = workflow.run_workflow(planned, None, step_done, targets.analyze, straight)
    if ran.result is not None:  # None: a workflow without a SELECT (--output was refused for it before it ran)
        _deliver(context, ran.result, targets, cached_in, err)
    return ran


def _deliver(context: RunContext, result, targets: _Targets, cached_in: str | None, err: Console) -> None:
    """The last SELECT's rows written to --output, shown, or streamed to stdout; then the run's summary."""
    try:
        record = result.record
        if targets.output is not None:
            write_output(result.spark, context.storage, record.result, targets.output, targets.fmt)
            err.print(f"wrote {record.result_rows:,} row(s) to {targets.output}")
        elif targets.fmt == "table":
            rows = head_rows(result.spark, record.result, targets.show_rows)
            out = Console()
            out.print(result_table(record.output_names, rows))
            out.print(result_caption(len(rows), record.result_rows), soft_wrap=True)
        else:
            sys.stdout.flush()
            stream_output(result.spark, context.storage, record.result, targets.fmt, sys.stdout.buffer)
        if not targets.quiet:
            err.print(run_summary(record))
        if targets.analyze:
            err.print(explain_tree(analyzed_info(result, context)))
    finally:
        if targets.keep_work:
            result.keep()
            err.print(f"stage outputs kept in {result.record.work_dir}")
            if context.stage_cache is not None and context.stage_cache.kept:
                err.print(f"and {len(context.stage_cache.kept)} in the stage-output cache, {cached_in} "
                          f"('aipq cache clear' removes them)")
        else:
            result.close()


def _run_batch(context: RunContext, sources: list[str], fmt: str | None, output_dir: str | None, force: bool,
               allow_overwrite: bool, quiet: bool, refused: dict[str, bool]) -> None:
    """``aipq run`` of several files or a directory: the batch planned together, each result in ``output_dir``."""
    given = [option for option, present in refused.items() if present]
    if given:
        raise BadInputError(f"{given[0]} does not apply to a batch of files",
                            hint="run the file on its own, or give the batch --output-dir DIR")
    if output_dir is None:
        raise BadInputError("a batch of files needs --output-dir DIR", hint="each file's rows go to DIR/NAME.parquet")
    if fmt == "table":
        raise BadInputError("a batch writes files: --format csv, json or parquet")
    fmt = fmt or "parquet"
    planned = batch.plan_batch(batch.batch_sources(sources), context, allow_overwrite)
    targets = batch.check_targets(planned, output_dir, fmt, force)
    err = Console(stderr=True)

    def report(outcome) -> None:
        if quiet:
            return
        rows = f"{outcome.rows:,} row(s) to {outcome.output}" if outcome.rows is not None else "no SELECT"
        reused = f", {outcome.stages_reused} read from the batch's shared outputs" if outcome.stages_reused else ""
        err.print(f"[bold]{outcome.name}[/bold]: {rows} ({outcome.seconds:.1f} s; {outcome.stages_run} stage(s) "
                  f"run{reused})")

    outcomes = batch.run_batch(planned, targets, fmt, report)
    if not quiet:
        reused = sum(o.stages_reused for o in outcomes)
        taken = sum(o.summaries_taken for o in outcomes)
        filters = f" with {taken} Bloom filter(s) built where they were written" if taken else ""
        err.print(f"batch: {len(outcomes)} file(s) in {sum(o.seconds for o in outcomes):.1f} s; "
                  f"{len(planned.shared)} subplan(s) in common, {reused} stage(s) read instead of computed"
                  f"{filters}; {len(planned.scans)} table(s) read once for several files")
