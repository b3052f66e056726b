"""aipq from Python: ``aipq.sql`` runs a query or a workflow text and ``aipq.explain`` shows its stage DAG, over the
same run path as ``aipq run`` and ``aipq explain``, in a notebook or a PySpark program, on the caller's own
SparkSession when given one.

Options are the knobs' names (``ip="adaptive"``, ``staging="hive"``, ``broadcast_threshold="10MB"``), checked as
the command line checks them; ``conf`` holds Spark settings for aipq's stages and ``master`` a master URL for a
session aipq starts itself. A session the caller gives is used as it is: its settings, temporary views and
UDFs are what the query sees, and the settings aipq sets for a stage are restored after it. The session needs
aipq's JVM classes on its driver: start it with ``aipq.spark_conf()`` among its settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aipq import workflow
from aipq.config import KNOB, Settings, default_home
from aipq.engine.context import RunContext
from aipq.engine.executor import StageListener
from aipq.engine.jvm import AIPQ_EXTENSIONS, COLLECTOR_JAR, aipq_classes_loaded
from aipq.engine.records import StageMetrics
from aipq.engine.report import run_dict
from aipq.engine.session import check_classic_session
from aipq.errors import BadInputError, EnvironmentProblem
from aipq.explanation import explain_tree, planned_explain
from aipq.setting_aliases import alias_for, apply_alias
from aipq.workflow.source import SqlSource


def spark_conf() -> dict[str, str]:
    """The settings a SparkSession needs for aipq to run on it: aipq's JVM classes on the driver and its
    session extensions (merge them with your own ``spark.jars`` and ``spark.sql.extensions``)."""
    return {"spark.jars": str(COLLECTOR_JAR), "spark.sql.extensions": ",".join(AIPQ_EXTENSIONS)}


@dataclass
class Result:
    """The rows of a query's (or a workflow's last) SELECT, and what the run did."""

    columns: tuple[str, ...]
    rows: list[tuple]
    dataframe: Any  # a Spark DataFrame over the result, valid while the session lives
    run: dict  # the run record: stages with their rows, bytes, seconds, summaries and rows pruned

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas
        except ImportError as error:
            raise EnvironmentProblem("Result.to_pandas needs pandas, which is not installed",
                                     hint="pip install pandas") from error
        return pandas.DataFrame(self.rows, columns=list(self.columns))


def sql(query: str, *, spark=None, home: str | Path | None = None,
        progress: Callable[[StageMetrics], None] | None = None, **options) -> Result | None:
    """Run ``query`` (one statement or a workflow of them); the result of its last SELECT (None without one).
    ``progress`` is told of each stage as it finishes."""
    context = _context(spark, home, options)
    planned = workflow.plan_workflow(SqlSource(query, "<sql>"), context)
    ran = workflow.run_workflow(planned, _Progress(progress) if progress else None)
    if ran.result is None:
        return None
    record = ran.result.record
    # kept in the session's memory, cut from the result's files, which go with the run's work directory
    kept = ran.result.spark.read.parquet(record.result_path).toDF(*record.output_names).localCheckpoint()
    rows = [tuple(row) for row in kept.collect()]
    ran.result.close()
    return Result(tuple(record.output_names), rows, kept, run_dict(record))


def explain(query: str, *, spark=None, home: str | Path | None = None, format: str = "tree", **options):
    """The stage DAG ``query`` would run, with the decisions behind it: the tree as text, or (``format="json"``)
    the same as a dict."""
    if format not in ("tree", "json"):
        raise BadInputError(f"format {format!r} is not tree or json")
    context = _context(spark, home, options)
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


def settings_from(options: dict[str, Any]) -> Settings:
    """Settings from knob names (and ``conf``, ``master``), each value checked as the command line checks it."""
    options = dict(options)
    conf = {str(k): str(v) for k, v in (options.pop("conf", None) or {}).items()}
    master = options.pop("master", None)
    values = {}
    for name, value in options.items():
        knob = KNOB.get(name)
        if knob is None:
            raise BadInputError(f"unknown option {name!r}", hint=f"use a knob's name: {', '.join(sorted(KNOB))}")
        try:
            values[name] = knob.parse(value if isinstance(value, str) else str(value))
        except ValueError as problem:
            raise BadInputError(f"{name}={value!r}: {problem}") from None
    settings = Settings(**values, master=master)
    for key, value in conf.items():
        if alias_for(key) is not None:
            settings = apply_alias(settings, key, value)
        else:
            settings = replace(settings, spark_conf={**settings.spark_conf, key: value})
    return settings


def _context(spark, home: str | Path | None, options: dict[str, Any]) -> RunContext:
    settings = settings_from(options)
    context = RunContext(Path(home).expanduser() if home else default_home(), settings)
    if spark is not None:
        check_classic_session(spark)
        if not aipq_classes_loaded(spark):
            raise EnvironmentProblem("this SparkSession lacks aipq's JVM classes",
                                     hint="start it with aipq.spark_conf() among its settings: "
                                          "SparkSession.builder.config(map=aipq.spark_conf())")
        context = context.on_session(spark)
    return context
