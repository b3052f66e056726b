"""The ``aipq`` command line: parse arguments, call ``aipq.app``, render."""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
import threading
import traceback
from pathlib import Path

import click
from rich.console import Console

from aipq import app, batch, workflow
from aipq.batch import is_batch
from aipq.catalog import FORMATS, Catalog
from aipq.cli.bench import bench
from aipq.cli.cache import cache
from aipq.cli.options import home_dir, planning_options
from aipq.cli.progress import RichStageProgress
from aipq.cli.render import (
    explain_dot,
    explain_tree,
    result_caption,
    result_table,
    run_summary,
)
from aipq.cli.stats import stats
from aipq.config import Settings, default_home
from aipq.engine.context import RunContext
from aipq.engine.report import run_dict
from aipq.engine.sink import (
    OUTPUT_FORMATS,
    TEXT_FORMATS,
    head_rows,
    output_format,
    stream_output,
    write_output,
)
from aipq.errors import EXIT_BAD_INPUT, EXIT_RUNTIME, AipqError, BadInputError
from aipq.ip.explain import explain_dict
from aipq.tpcds.queries import query_text as tpcds_query_text
from aipq.tpch.queries import query_text


class AipqGroup(click.Group):
    """Turns aipq errors into a message and exit code; a traceback only with --debug."""

    def invoke(self, ctx: click.Context):
        try:
            return call_with_deep_stack(ctx, lambda: super(AipqGroup, self).invoke(ctx))
        except RecursionError:
            if _debug(ctx):
                traceback.print_exc()
            click.echo("error: the SQL is nested too deeply for aipq (parentheses, subqueries or set operations)\n"
                       "hint: split it into views or statements (CREATE TEMPORARY VIEW …)", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except AipqError as error:
            if _debug(ctx):
                traceback.print_exc()
            click.echo(error.render(), err=True)
            ctx.exit(error.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except Exception as error:  # a bug: say so plainly
            if _debug(ctx):
                traceback.print_exc()
            click.echo(f"internal error: {type(error).__name__}: {error}\n"
                       "hint: rerun with --debug for the traceback, and please report it", err=True)
            ctx.exit(EXIT_RUNTIME)


# SQL is a tree, and sqlglot and the planner walk it recursively: a 500-term UNION ALL or a 60-deep nesting of
# subqueries needs more than Python's default 1,000 frames. Commands run on a thread whose stack holds that.
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000


def call_with_deep_stack(ctx: click.Context, body):
    """``body()`` on a thread with a deep stack. Ctrl-C stops it (its Spark jobs are cancelled) and is reported as
    an interruption, whatever the command's thread then ends with."""
    outcome: dict = {}
    finished = threading.Event()

    def target() -> None:
        with ctx:  # click's current context is per thread
            try:
                outcome["value"] = body()
            except BaseException as error:  # noqa: BLE001 — re-raised on the caller's thread
                outcome["error"] = error
            finally:
                finished.set()

    sys.setrecursionlimit(max(sys.getrecursionlimit(), DEEP_RECURSION_LIMIT))
    previous = threading.stack_size(DEEP_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="aipq-command", daemon=True)
        worker.start()
    finally:
        threading.stack_size(previous)
    interrupted = False
    # an Event, not Thread.join: a join interrupted by Ctrl-C can mark a running thread as stopped (CPython 3.11)
    while not finished.is_set():
        try:
            finished.wait(0.25)
        except KeyboardInterrupt:
            interrupted = True
            _interrupt(worker)
    if interrupted:
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _interrupt(worker: threading.Thread) -> None:
    """Ctrl-C on the main thread: raise KeyboardInterrupt in the command's thread and cancel its Spark jobs, so
    that a thread waiting for Spark returns."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(KeyboardInterrupt))
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):
            context.cancelAllJobs()


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug"))


@click.group(cls=AipqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--warehouse", "--home", "home", type=click.Path(file_okay=False),
              help="aipq home (catalog, data, statistics, work files). Default: $AIPQ_HOME or ~/.aipq")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, home: str | None, debug: bool) -> None:
    """aipq: run Hive-style SQL on Spark as a staged job DAG with adaptive information passing."""
    if home is not None and not home.strip():
        raise click.BadParameter("give a folder", param_hint="--home")
    ctx.obj = {"home": (Path(home) if home else default_home()).expanduser()}


@cli.command()
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
@click.option("--force", is_flag=True, help="Let --output replace an existing file.")
@click.option("--limit", "show_rows", type=click.IntRange(0), default=50, show_default=True,
              help="Rows shown with --format table.")
@click.option("--keep-work", is_flag=True,
              help="Keep the stage outputs of this run under <home>/runs (and those moved into the stage-output "
                   "cache there).")
@click.option("--allow-overwrite", is_flag=True,
              help="Let the workflow drop or overwrite tables it did not create.")
@click.option("--quiet", is_flag=True, help="No per-stage summary.")
@click.option("--analyze", is_flag=True, help="After the result, the stage tree with measured figures (stderr).")
@click.option("--resume", is_flag=True,
              help="Continue a workflow FILE whose last run failed or was killed: the statements it committed are "
                   "not run again.")
@click.pass_context
def run(ctx, sources, inline, settings: Settings, fmt, output, output_dir, force, show_rows, keep_work,
        allow_overwrite, quiet, analyze, resume):
    """Run a query or a workflow of statements (FILE, '-' for stdin, tpch:N or tpcds:N) and show or write the rows of
    its last SELECT. Several FILEs, or a directory of .sql files, run as a batch: planned together, each stage
    they have in common computed once, each file's rows written to --output-dir."""
    context = RunContext(home_dir(ctx), settings)
    if is_batch(sources) or output_dir is not None:
        _run_batch(context, list(sources), fmt, output_dir, force, allow_overwrite, quiet,
                   refused={"--sql": inline is not None, "--output": output is not None, "--resume": resume,
                            "--analyze": analyze, "--keep-work": keep_work})
        return
    source = sources[0] if sources else None
    sql = app.load_sql(source, inline)
    if fmt == "parquet" and output is None:
        raise BadInputError("--format parquet needs --output PATH")
    if output is not None:
        fmt = output_format(str(output), fmt)
        output = context.storage.check_local_target(str(output), force)
    fmt = fmt or "table"
    cached_in = app.keep_stage_outputs(context) if keep_work else None
    planned = workflow.plan_workflow(sql, context, allow_overwrite, record=True, resume=resume)
    if output is not None and not any(isinstance(s.step, workflow.QueryStep) for s in planned.steps):
        raise BadInputError("--output was given but the workflow has no SELECT whose rows could be written")
    err = Console(stderr=True)

    def report(outcome: workflow.StepOutcome) -> None:
        if not quiet:
            took = f" [dim]({outcome.seconds:.1f} s)[/dim]" if outcome.seconds else ""
            err.print(f"[bold]{outcome.step.number}.[/bold] {outcome.step.describe()}: {outcome.message}{took}")

    straight = fmt if fmt in TEXT_FORMATS else None  # the final stage writes CSV or JSON lines itself
    if err.is_terminal and not quiet:
        with RichStageProgress(context.spark, err) as listener:
            ran = workflow.run_workflow(planned, listener, report, analyze, straight)
    else:
        ran = workflow.run_workflow(planned, None, report, analyze, straight)
    result = ran.result
    if result is None:  # a workflow without a SELECT (--output was refused for it before it ran)
        return
    try:
        record = result.record
        if output is not None:
            write_output(result.spark, context.storage, record.result, output, fmt)
            err.print(f"wrote {record.result_rows:,} row(s) to {output}")
        elif fmt == "table":
            rows = head_rows(result.spark, record.result, show_rows)
            out = Console()
            out.print(result_table(record.output_names, rows))
            out.print(result_caption(len(rows), record.result_rows), soft_wrap=True)
        else:
            sys.stdout.flush()
            stream_output(result.spark, context.storage, record.result, fmt, sys.stdout.buffer)
        if not quiet:
            err.print(run_summary(record))
        if analyze:
            err.print(explain_tree(analyzed_info(result, context)))
    finally:
        if keep_work:
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


@cli.command()
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
        needs = app.statistics_plan(query.dag, context)
        known = app.known_stage_sizes(query.dag, context)
        if analyze:
            result = app.execute(query, context, analyze=True)
            try:
                info = analyzed_info(result, context)
            finally:
                result.close()
                app.finish_stage_cache(context)
        else:
            info = explain_dict(query.dag, settings, estimator=app.planning_estimator(query.dag, context))
            add_estimates(info, app.stage_estimates(query.dag, context))
        info["statistics"] = needs
        for stage in info["stages"]:
            stage["known_output"] = known.get(stage["id"])
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
    add_estimates(info, app.stage_estimates(result.planned.dag, context, measured["stages"]))
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


@cli.group()
def tpch():
    """TPC-H data and queries."""


@tpch.command("gen")
@click.option("--sf", "scale_factor", type=float, default=0.01, show_default=True, help="Scale factor.")
@click.option("--home", "home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="aipq home to generate into (same as the global option).")
@click.option("--database", default="default", show_default=True, help="Database to register the tables in.")
@click.option("--parts", type=click.IntRange(1), default=1, show_default=True, help="Files per table.")
@click.option("--skew", type=float, default=None,
              help="Zipf exponent Z: orders' customers and lineitem's parts drawn with P(k) ∝ 1/k^Z (1 is "
                   "strong skew); the other tables stay uniform.")
@planning_options
@click.pass_context
def tpch_gen(ctx, scale_factor, home, database, parts, skew, settings: Settings):
    """Generate TPC-H as parquet with tpchgen-cli and register the 8 tables."""
    home = home_dir(ctx, home)
    err = Console(stderr=True)
    skewed = f", skew {skew:g}" if skew is not None else ""
    with err.status(f"generating TPC-H at SF {scale_factor:g}{skewed}…"):
        if skew is None:
            entries = app.generate_tpch(home, scale_factor, database, parts)
        else:
            entries = app.generate_skewed_tpch(RunContext(home, settings), scale_factor, skew, database, parts)
    folders = sorted({str(Path(entry.path).parent) for entry in entries})
    err.print(f"registered {len(entries)} tables in database {database!r} from {' and '.join(folders)}")


@cli.group()
def tpcds():
    """TPC-DS data and queries (needs pip install 'aipq[tpcds]')."""


@tpcds.command("gen")
@click.option("--sf", "scale_factor", type=float, default=0.01, show_default=True, help="Scale factor.")
@click.option("--database", default="tpcds", show_default=True,
              help="Database to register the tables in (not default: TPC-H's customer table is there).")
@planning_options
@click.pass_context
def tpcds_gen(ctx, scale_factor, database, settings: Settings):
    """Generate TPC-DS as parquet with tpcgen-cli and register its 24 tables."""
    home = home_dir(ctx)
    err = Console(stderr=True)
    with err.status(f"generating TPC-DS at SF {scale_factor:g}…"):
        entries = app.generate_tpcds(RunContext(home, settings), scale_factor, database)
    err.print(f"registered {len(entries)} tables in database {database!r} from {Path(entries[0].path).parent}")


@tpch.command("query")
@click.argument("number", type=click.IntRange(1, 22))
@click.option("--order", type=click.Choice(["written", "worst"]), default="written", show_default=True,
              help="'worst': the FROM list reordered to the connected order the cost model prices highest "
                   "(needs the tables' statistics: aipq stats collect).")
@click.pass_context
def tpch_query(ctx, number, order):
    """Print the text of TPC-H query NUMBER."""
    if order == "written":
        click.echo(query_text(number))
    else:
        click.echo(app.worst_order_tpch_query(RunContext(home_dir(ctx), Settings()), number))


@tpcds.command("query")
@click.argument("number", type=click.IntRange(1, 99))
@click.option("--database", default="tpcds", show_default=True, help="Database the query's tables are in.")
def tpcds_query(number, database):
    """Print TPC-DS query NUMBER in Hive's dialect (from DuckDB's tpcds extension); run it with aipq run tpcds:N."""
    click.echo(tpcds_query_text(number, database), nl=False)


@cli.group()
def table():
    """Registered tables."""


@table.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="parquet", show_default=True)
@click.option("--partitioned-by", "partitioned_by", default="", metavar="COLUMNS",
              help="Data in Hive's layout: the partition columns of its col=value/ folders, outermost first.")
@planning_options
@click.pass_context
def table_add(ctx, name, path, fmt, partitioned_by, settings: Settings):
    """Register data at PATH as table NAME (or DATABASE.NAME)."""
    columns = tuple(c.strip().lower() for c in partitioned_by.split(",") if c.strip())
    entry, replaced = app.add_table(RunContext(home_dir(ctx), settings), name, path, fmt, columns)
    verb = "replaced" if replaced else "registered"
    parts = f", {len(entry.partitions)} partitions" if entry.partitioned else ""
    Console(stderr=True).print(f"{verb} {entry.qualified_name} ({len(entry.columns)} columns{parts}, {fmt}) → "
                               f"{entry.path}")


@table.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def table_list(ctx, as_json):
    """List registered tables."""
    entries = Catalog(home_dir(ctx)).entries()
    if as_json:
        click.echo(json.dumps([{"database": e.database, "name": e.name, "path": e.path, "format": e.format,
                                "columns": [list(c) for c in e.columns]} for e in entries], indent=2))
        return
    from rich.table import Table

    listing = Table(title=f"{len(entries)} table(s)")
    for column in ("database", "table", "format", "columns", "path"):
        listing.add_column(column)
    for e in entries:
        listing.add_row(e.database, e.name, e.format, str(len(e.columns)), e.path)
    Console().print(listing)


@table.command("drop")
@click.argument("name")
@click.pass_context
def table_drop(ctx, name):
    """Forget a registration (the data files stay)."""
    if not Catalog(home_dir(ctx)).drop(name):
        raise BadInputError(f"no registered table {name!r}", hint="see `aipq table list`")
    Console(stderr=True).print(f"dropped {name}")


@cli.command()
@click.option("--mb", "megabytes", type=click.IntRange(4, 4096), default=64, show_default=True,
              help="Size of the measured data (larger: steadier figures, longer).")
@click.option("--runs", type=click.IntRange(1, 20), default=3, show_default=True, help="Timed runs per figure.")
@planning_options
@click.pass_context
def calibrate(ctx, megabytes, runs, settings: Settings):
    """Measure the benefit model's unit costs on the session's master (this machine, or a cluster with --master)
    and keep them, per master, for strategy adaptive."""
    from rich.table import Table

    from aipq.engine.calibrate import measure
    from aipq.estimator.parameters import (
        DEFAULT_BUILD_SECONDS_PER_ROW,
        DEFAULT_PROBE_SECONDS_PER_ROW,
        DEFAULT_UNIT_COSTS,
        save_calibration,
    )

    home = home_dir(ctx)
    err = Console(stderr=True)
    with err.status(f"measuring read, write, shuffle, byte, probe and build costs on {megabytes} MB…"):
        costs, probe, build = measure(RunContext(home, settings), megabytes, runs)
    path = save_calibration(home, settings.master, costs, probe, build)
    table = Table(title="unit costs (seconds)")
    for column in ("cost", "measured", "default"):
        table.add_column(column, justify="right" if column != "cost" else "left")
    names = {"c_read": "C_R per page", "c_write": "C_W per page", "c_transfer": "C_T per page",
             "u_read": "U_R per byte", "u_write": "U_W per byte", "u_transfer": "U_T per byte",
             "c_sort": "C_S per page"}
    for field_name, label in names.items():
        table.add_row(label, f"{getattr(costs, field_name):.3g}", f"{getattr(DEFAULT_UNIT_COSTS, field_name):.3g}")
    table.add_row("probe per row", f"{probe:.3g}", f"{DEFAULT_PROBE_SECONDS_PER_ROW:.3g}")
    table.add_row("build per row", f"{build:.3g}", f"{DEFAULT_BUILD_SECONDS_PER_ROW:.3g}")
    Console().print(table)
    err.print(f"saved to {path}; strategy adaptive uses these from now on")


cli.add_command(bench)
cli.add_command(stats)
cli.add_command(cache)


def main() -> None:
    cli(prog_name="aipq")


if __name__ == "__main__":
    main()
