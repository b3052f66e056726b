"""aipq from Python: ``aipq.sql`` runs a query or a workflow text, ``aipq.run_file`` a workflow file, and
``aipq.explain`` shows a query's stage DAG, over the same run path as ``aipq run`` and ``aipq explain``, in a
notebook or a PySpark program, on the caller's own SparkSession when given one.

Options are the knobs' names (``ip="adaptive"``, ``staging="hive"``, ``broadcast_threshold="10MB"``) and ``aipq
run``'s other options (``allow_overwrite``, ``resume``, ``keep_work``, ``report``, ``output``), checked as the
command line checks them; ``conf`` holds Spark settings for aipq's stages and ``master`` a master URL for a session
aipq starts itself.

Names resolve as ``spark.sql`` resolves them on the session: its temporary views first, ``global_temp.NAME``, its
current database, aipq's catalog, then the session's catalog. A call runs on a clone of the session (``api/
session.py``), so the session's settings are never changed, not even while the call runs. The session needs
aipq's JVM classes on its driver: start it with ``aipq.spark_conf()`` among its settings."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

from aipq import workflow
from aipq.api.options import RunOptions, split_options
from aipq.api.result import Collected, Result
from aipq.api.session import callers_session, home_folder, thread_job_properties_kept
from aipq.cli.run_report import RunReport, check_distinct_files
from aipq.config import Settings, default_home
from aipq.engine.context import RunContext
from aipq.engine.dag_run import StageListener
from aipq.engine.jvm import AIPQ_EXTENSIONS, COLLECTOR_JAR, clone_session
from aipq.engine.records import StageMetrics
from aipq.engine.report import run_dict
from aipq.engine.session import running_session
from aipq.engine.sink import output_format, write_output
from aipq.engine.stage_job import spark_error
from aipq.errors import BadInputError
from aipq.explanation import explain_tree, planned_explain
from aipq.workflow import WorkflowRun
from aipq.workflow.query import keep_stage_outputs
from aipq.workflow.source import SqlSource, load_sql, statements_file

__all__ = ["Result", "explain", "run_file", "spark_conf", "sql"]


def spark_conf() -> dict[str, str]:
    """The settings a SparkSession needs for aipq to run on it: aipq's JVM classes on the driver and its
    session extensions (merge them with your own ``spark.jars`` and ``spark.sql.extensions``)."""
    return {"spark.jars": str(COLLECTOR_JAR), "spark.sql.extensions": ",".join(AIPQ_EXTENSIONS)}


def sql(query: str, *, spark=None, home: str | Path | None = None,
        progress: Callable[[StageMetrics], None] | None = None, **options) -> Result | None:
    """Run ``query`` (one statement or a workflow of them); the result of its last SELECT (None without one).
    ``progress`` is told of each stage as it finishes. A workflow text is known by its text (a digest of it): a
    rerun of the same text may replace the tables it created, and ``resume=True`` continues it."""
    identity = "text-" + hashlib.sha256(query.encode()).hexdigest()[:16]
    return _run(SqlSource(query, "<sql>", identity), spark, home, progress, options)


def run_file(path: str | Path, *, spark=None, home: str | Path | None = None,
             progress: Callable[[StageMetrics], None] | None = None, **options) -> Result | None:
    """Run the workflow file ``path`` as ``aipq run FILE`` does (its journal for ``resume=True``, the tables it
    created its own on a rerun); the result of its last SELECT (None without one)."""
    return _run(load_sql(str(Path(path).expanduser()), None), spark, home, progress, options)


def explain(query: str, *, spark=None, home: str | Path | None = None, format: str = "tree", **options):
    """The stage DAG ``query`` would run, with the decisions behind it: the tree as text, or (``format="json"``)
    the same as a dict."""
    if format not in ("tree", "json"):
        raise BadInputError(f"format {format!r} is not tree or json")
    settings, _ = split_options(options)
    if spark is None and running_session() is None:  # planning needs no Spark session: none is started for it
        context = RunContext(home_folder(home, default_home()), settings)
    else:
        context, _ = _context(spark, home, settings)
    planned = workflow.plan_workflow(SqlSource(query, "<sql>"), context)
    queries = planned.queries
    if not queries:
        raise BadInputError("the text has no query to explain")
    info = planned_explain(queries[-1].planned, context)
    if format == "json":
        return info
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    Console(file=out, width=120, force_terminal=False).print(explain_tree(info))
    return out.getvalue()


class _Progress(StageListener):
    def __init__(self, told: Callable[[StageMetrics], None]):
        self.told = told

    def stage_finished(self, metrics: StageMetrics) -> None:
        self.told(metrics)


def _run(source: SqlSource, spark, home, progress, options: dict) -> Result | None:
    settings, run = split_options(options)
    context, user = _context(spark, home, settings)
    output, report = _checked_targets(context, run, source.name)
    with thread_job_properties_kept(user):
        if report is None:
            ran = _run_workflow(source, context, run, output is not None, progress, None)
        else:
            report.started()  # from here on the report tells this run's outcome, whatever it is
            try:
                ran = _run_workflow(source, context, run, output is not None, progress, report)
            except BaseException as error:
                report.failed(error)
                raise
            report.succeeded(ran)
    if ran.result is None:
        return None
    query_run = ran.result
    record = query_run.record
    if output is not None:
        write_output(user, context.storage, record.result, output, output_format(output, run.output_format))
    if run.keep_work:
        query_run.keep()
    if query_run.frame is not None:  # handed to Spark whole: its DataFrame as it is, no files written or read back
        return Result(tuple(record.output_names), _named(query_run.frame, record.output_names),
                      partial(run_dict, record), query_run.close, _collected_later(record))
    if record.collected is not None:  # a small result of aipq's plan, sent to the driver by its last job
        collected = record.collected
        return Result(tuple(record.output_names), partial(collected.frame, user, record.output_names),
                      partial(run_dict, record), query_run.close, rows=collected.rows)
    # the caller's session reads the result's files, which stay until the Result is closed (api/result.py)
    frame = user.read.parquet(record.result_path).toDF(*record.output_names)
    return Result(tuple(record.output_names), frame, partial(run_dict, record),
                  None if run.keep_work else query_run.close)


def _collected_later(record) -> Collected:
    """A handed-off query runs when its rows are read: a failure then is aipq's error, as it would have been in
    the call, and its rows are counted into the run record."""

    def counted(rows: int) -> None:
        record.result_rows = record.stages[-1].rows_written = rows  # its one stage's rows: beside its estimate

    return Collected(lambda error: spark_error(error, "the query (handed to Spark)"), counted)


def _named(frame, names: list[str]):
    """``frame`` with the columns ``names``: as it is when Spark named them so already (its schema is one py4j
    call; a renaming is several, and a new plan to analyze)."""
    return frame if frame.columns == list(names) else frame.toDF(*names)


def _run_workflow(source: SqlSource, context: RunContext, run: RunOptions, with_output: bool,
                  progress: Callable[[StageMetrics], None] | None, report: RunReport | None) -> WorkflowRun:
    if run.keep_work:
        keep_stage_outputs(context)
    planned = workflow.plan_workflow(source, context, run.allow_overwrite, record=True, resume=run.resume)
    if with_output and not planned.queries:
        raise BadInputError("output= was given but the workflow has no SELECT whose rows could be written")
    lazy = not with_output and not run.keep_work and report is None  # a report tells what the run did: it runs
    return workflow.run_workflow(planned, _Progress(progress) if progress else None,
                                 report.step_done if report is not None else None, keep_frame=lazy)


def _checked_targets(context: RunContext, run: RunOptions, source: str) -> tuple[str | None, RunReport | None]:
    """``output`` and ``report`` checked before anything runs, as ``aipq run`` checks them: writable, replaced
    only with ``force``, and never the same file as each other or the workflow file."""
    check_distinct_files({"output=": run.output, "report=": run.report,
                          "the statements' file": statements_file(source)})
    output = report = None
    if run.output is not None:
        output_format(run.output, run.output_format)
        output = context.storage.check_local_target(run.output, run.force, "output=")
    if run.report is not None:
        report = RunReport(context.storage.check_local_target(run.report, run.force, "report="), source, context)
    return output, report


def _context(spark, home: str | Path | None, settings: Settings) -> tuple[RunContext, object]:
    """The call's context (its home and settings, on a clone of the caller's session: ``api/session.py``) and
    the caller's session."""
    folder = home_folder(home, default_home())
    user = callers_session(spark, settings, folder)
    return RunContext(folder, settings).on_session(clone_session(user)), user
