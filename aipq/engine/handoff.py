"""Do no harm: a query in which aipq chooses nothing of its own is handed to Spark whole.

aipq's plan of a query is its own join order and physical joins compiled into Spark plans. Where its techniques
apply (summaries that pay, shared subplans, pre-aggregation, its semi-join broadcast) that plan beats Spark's;
where none applies, the query would run as one fused Spark job of aipq's re-derivation of the plan, which lacks
what Spark's optimizer does with the SQL itself: join reordering and star detection, predicates extracted from
disjunctions across joins, its runtime filters and dynamic partition pruning, adaptive execution. Such a query
runs as ``spark.sql`` would run it, with aipq's result-equal session extensions (long decimals) still on: its cost
is Spark's plus aipq's planning.

The decision (``handoff_decision``) reads what aipq knows at plan time, the decisions ``aipq explain`` shows; the
run (``run_handed_off``) reads aipq's catalog tables through per-run temporary views with names no user view can
have, metastore tables and a user's own temporary views by their names, and records one stage."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.config import Settings, default_of
from aipq.engine import jvm
from aipq.engine.executor import record_estimates
from aipq.engine.like_prefilter import with_like_prefilters
from aipq.engine.records import RunRecord, StageMetrics
from aipq.engine.session import java_message, sql_conf, stage_sql_conf, user_runtime_conf
from aipq.engine.sink import TEXT_FORMATS, unique_names, write_text_frame
from aipq.engine.stage_job import spark_error
from aipq.engine.storage import join
from aipq.engine.table_reads import session_table_reads
from aipq.engine.work_dirs import new_run_id, new_work_dir, remove_work_dir
from aipq.errors import AipqError
from aipq.estimator.join_estimates import KnownTables
from aipq.ip.decisions import StageDecisions, SummaryUse
from aipq.planner.logical import Join, Scan
from aipq.planner.resolve import qualified_key, referenced_tables
from aipq.planner.stages import StageDag

HANDED_OFF = "SPARK"  # the operator a handed-off run's one stage is recorded with


class HandoffRefused(Exception):
    """Spark refused the handed-off SQL: its analysis (a user's mistake, or SQL Spark reads otherwise), or its run
    (a runtime error such as a scalar subquery's several rows, a file gone, a driver without the memory for a
    broadcast). The query runs aipq's own plan instead: its planning names a mistake's place, its stages recover
    from what aipq recovers from, and its errors are aipq's, as for any query."""


@dataclass(frozen=True)
class Handoff:
    """Whether the query goes to Spark whole, and why (explain and ``--analyze`` say it)."""

    chosen: bool
    why: str


def aipq_interventions(dag: StageDag, decisions: Iterable[StageDecisions],
                       broadcast_does_it: Callable[[SummaryUse], bool] = lambda use: False) -> list[str]:
    """What aipq's plan of the query does that Spark's plan of its SQL would not: summaries the estimator chose
    (but one whose every use prunes the input of a join that broadcasts the summary's own source, which Spark's
    plan does as well: ``broadcast_does_it``), predicate transfer, subplans computed once for several readers,
    pre-aggregation below joins, a semi join built from its preserved side. Empty: aipq chooses nothing here."""
    found, decisions = [], list(decisions)
    uses = [use for d in decisions for use in d.uses]
    building = sorted({d.stage for d in decisions for build in d.builds
                       if any(u.summary == build.key and not broadcast_does_it(u) for u in uses)})
    if building:
        found.append("summaries chosen (built in " + ", ".join(f"S{s}" for s in building) + ")")
    if dag.transfer_passes:
        found.append("predicate transfer passes")
    if dag.plan.shared_notes or _map_stage_read_again(dag):
        found.append("a subplan computed once for several readers")
    if dag.plan.preaggregations:
        found.append("pre-aggregation below a join")
    if any(isinstance(node, Join) and node.kind == "semi" and node.physical == "broadcast"
           and node.broadcast_side == "left" for stage in dag.stages for node in stage.plan.walk()):
        found.append("a semi join built from its preserved side")
    return found


def _map_stage_read_again(dag: StageDag) -> bool:
    """Whether a stage that several stages read is a map-side pipeline. A reduce operator read several times (a
    CTE read twice) is computed once by Spark's plan too: the exchange under it is the same in every reference,
    and Spark reuses it (ReuseExchange). A map-side pipeline has no exchange to reuse: Spark reads it again."""
    return any(len(readers) > 1 and dag.stage(producer).operator == "MAP"
               for producer, readers in dag.dataflow.items())


def handoff_decision(settings: Settings, dag: StageDag, statement: exp.Expression,
                     decisions: Iterable[StageDecisions], forced_strategy: bool = False,
                     writes_table: bool = False, statistics_missing: bool = False,
                     broadcast_does_it: Callable[[SummaryUse], bool] = lambda use: False) -> Handoff:
    """Whether a planned query is handed to Spark whole (``Handoff.why`` says why or why not): only under
    ``--handoff auto`` with the default strategy, staging and join order, without ``--reuse on`` (a forcing
    switch runs aipq's plan), for a query
    (not a table write, which aipq commits itself), whose statistics are known (a run that collects them runs
    aipq's plan, so that later runs decide from them), and in which aipq's plan-time ``decisions`` and plan
    choose nothing of aipq's own (``aipq_interventions``)."""
    if settings.handoff == "off":
        return Handoff(False, "--handoff off")
    if forced_strategy or settings.ip != "adaptive":
        return Handoff(False, f"--ip {settings.ip} forces aipq's plan")
    if settings.staging != "adaptive":
        return Handoff(False, f"--staging {settings.staging} forces aipq's staging")
    if settings.plan != "linear":
        return Handoff(False, f"--plan {settings.plan} asks for aipq's join order")
    if settings.reuse == "on":
        return Handoff(False, "--reuse on reads aipq's kept stage outputs")
    if writes_table:
        return Handoff(False, "a table write runs aipq's plan (its commit is aipq's)")
    if not isinstance(statement, exp.Query):
        return Handoff(False, "not a query")
    if statistics_missing:
        return Handoff(False, "its tables' statistics are collected by this run")
    if in_subquery_as_value(statement):
        return Handoff(False, "an IN subquery's value is used outside a filter (Spark's plan of it answers "
                              "false where SQL's answer is NULL)")
    found = aipq_interventions(dag, decisions, broadcast_does_it)
    if found:
        return Handoff(False, "aipq's plan: " + "; ".join(found))
    return Handoff(True, "aipq chooses nothing here (no summary, shared subplan, pre-aggregation or semi-join "
                         "broadcast): Spark's optimizer plans the SQL")


def in_subquery_as_value(statement: exp.Expression) -> bool:
    """Whether an IN (or NOT IN) subquery's value is used where a NULL and a false differ. Spark plans
    ``x IN (subquery)`` as an existence join whose value is never NULL: false where SQL's is NULL (``x`` NULL, or
    not found among values holding a NULL), unless the IN is a WHERE or HAVING filter reached only through
    AND and OR (where a NULL and a false both drop the row) or negated right above (Spark's NULL-aware anti
    join). Elsewhere (the SELECT list, ``IS NULL``, ``COALESCE``, a NOT above an OR) aipq's plan keeps SQL's
    three values."""
    return any(not _filters_only(node) for node in statement.find_all(exp.In) if node.args.get("query"))


def _filters_only(node: exp.Expression) -> bool:
    parent = _above_parens(node)
    if isinstance(parent, exp.Not):
        parent = _above_parens(parent)
    while isinstance(parent, (exp.And, exp.Or)):
        parent = _above_parens(parent)
    return isinstance(parent, (exp.Where, exp.Having))


def _above_parens(node: exp.Expression) -> exp.Expression | None:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return parent


def handoff_conf(settings: Settings) -> dict[str, str]:
    """Spark's settings for a handed-off query: its optimizer's own choices on (adaptive execution, runtime
    Bloom filters, dynamic partition pruning, broadcast joins within the threshold), aipq's SQL semantics and
    session extensions as for its stages."""
    return {**stage_sql_conf(settings),
            "spark.sql.autoBroadcastJoinThreshold": str(settings.broadcast_threshold or -1),
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
            "spark.sql.optimizer.dynamicPartitionPruning.enabled": "true",
            **runtime_filter_conf(settings)}


def runtime_filter_conf(settings: Settings) -> dict[str, str]:
    """Spark's runtime Bloom filter builds for a scanned side past the broadcast threshold, not its 10 GB."""
    if settings.runtime_filters != "auto":
        return {}
    threshold = settings.broadcast_threshold if settings.broadcast_threshold > 0 else default_of("broadcast_threshold")
    return {"spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": str(threshold)}


def table_entries(dag: StageDag) -> dict[str, TableEntry]:
    """The entry of each table the plan scans, by ``database.name``; a partitioned table scanned with different
    filters is read with every partition any scan keeps (the SQL's own filters then apply)."""
    found: dict[str, TableEntry] = {}
    for stage in dag.stages:
        for node in stage.plan.walk():
            if not isinstance(node, Scan):
                continue
            entry, key = node.table, node.table.qualified_name
            known = found.get(key)
            if known is not None and known != entry:
                kept = {p.path: p for p in (*known.partitions, *entry.partitions)}
                entry = replace(known, partitions=tuple(kept.values()))
            found[key] = entry
    return found


def spark_sql_text(statement: exp.Expression, entries: dict[str, TableEntry], views: dict[str, str],
                   names: Sequence[str] = ()) -> str:
    """The statement in Spark's SQL, each table read by the name Spark knows it by: a per-run view (``views``:
    ``database.name`` → view) for aipq's catalog tables, its own name for a table in Spark's catalog. A renamed
    table keeps its name as an alias, so that columns qualified with it still resolve. A LIKE that Spark matches
    by regular expression gets aipq's prefilter (``like_prefilter``): the same rows, sooner."""
    tree = statement.copy()
    for table in referenced_tables(tree):
        key = qualified_key(table)
        entry = entries.get(key)
        name = views.get(key) or (entry.spark_name if entry is not None else None)
        if name is None:
            continue
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        parts = name.split(".")
        table.set("this", exp.to_identifier(parts[-1]))
        table.set("db", exp.to_identifier(parts[-2]) if len(parts) > 1 else None)
        table.set("catalog", None)
    return with_like_prefilters(named_outputs(tree, names)).sql(dialect="spark")


def named_outputs(tree: exp.Expression, names: Sequence[str]) -> exp.Expression:
    """A SELECT whose columns Spark names as aipq names them (``names``: Hive's ``_c0`` for an unnamed expression):
    its result then needs no renaming, which would be a new plan for Spark to analyse. Left as it is when the
    columns cannot be matched one to one (a star, a set operation, a name twice)."""
    if not outputs_nameable(tree, names):
        return tree
    tree.set("expressions", [e if e.alias_or_name == name and isinstance(e, exp.Alias | exp.Column)
                             else exp.alias_(e.unalias(), name, quoted=True)
                             for e, name in zip(tree.expressions, names)])
    return tree


def outputs_nameable(tree: exp.Expression, names: Sequence[str]) -> bool:
    """Whether the SELECT's columns can be named one to one as ``names`` (``named_outputs``): then its result needs
    no renaming before it is written."""
    return (isinstance(tree, exp.Select) and len(tree.expressions) == len(names) == len(set(names))
            and not any(e.is_star for e in tree.expressions))


def handed_off_frame(context, statement: exp.Expression, dag: StageDag) -> tuple[object, list[str]]:
    """The query as a DataFrame planned by Spark, and the views made for this run alone (the caller drops them
    once the frame is analyzed); the views of the session's kept table reads stay for its next runs."""
    spark, entries = context.spark, table_entries(dag)
    reads, views, loose = session_table_reads(spark), {}, []
    for key, entry in sorted(entries.items()):
        if entry.source == "aipq":
            views[key], kept = reads.view(spark, context.storage, entry)
            if not kept:
                loose.append(views[key])
    from pyspark.errors import AnalysisException

    try:
        return spark.sql(spark_sql_text(statement, entries, views, dag.plan.output_names)), loose
    except AnalysisException as refused:
        drop_views(spark, loose)
        raise HandoffRefused(str(refused)) from refused
    except BaseException:
        drop_views(spark, loose)
        raise


def drop_views(spark, views: Iterable[str]) -> None:
    for view in views:
        spark.catalog.dropTempView(view)


def run_handed_off(context, statement: exp.Expression, dag: StageDag, why: str, result_format: str = "parquet",
                   keep_frame: bool = False) -> tuple[RunRecord, object | None]:
    """Run the query as Spark plans it, its result written in the run's work directory (as ``result_format``);
    with ``keep_frame`` nothing is written and the DataFrame is returned instead (the Python API collects it).
    One stage is recorded: its rows and bytes, from Spark's own output metrics, and its seconds."""
    spark, settings = context.spark, context.settings
    if keep_frame:  # nothing is written: the work directory is named (for the record) but not made
        run_id = new_run_id()
        work_dir = join(context.runs_dir, run_id)
    else:
        run_id, work_dir = new_work_dir(context.storage, context.runs_dir)
    result_path = join(work_dir, f"stage-{dag.final.id}")
    record = RunRecord(run_id, work_dir, result_path, dag.plan.output_names, 0, strategy=settings.ip,
                       result_format=result_format if result_format in TEXT_FORMATS else "parquet",
                       started_at=time.time())
    group = f"aipq-{run_id}-handoff"
    started = time.perf_counter()
    conf = {**handoff_conf(settings), **user_runtime_conf(spark, settings)}
    if keep_frame:  # Spark optimizes a kept DataFrame when it is read, under its session's settings then: they
        jvm.swap_sql_conf(spark, conf)  # stay, on the run's own session (the API's clone, never the caller's)
    try:
        with sql_conf(spark, conf) if not keep_frame else nullcontext():
            frame, views = handed_off_frame(context, statement, dag)
            try:
                if not keep_frame:
                    _write(spark, frame, record, group, renamed=not outputs_nameable(statement, record.output_names))
            finally:
                drop_views(spark, views)
    except BaseException:
        remove_work_dir(context.storage, work_dir)
        raise
    seconds = time.perf_counter() - started
    figures = jvm.job_group_figures(spark, group) if not keep_frame else jvm.ShuffleFigures()
    metrics = StageMetrics(dag.final.id, HANDED_OFF, seconds, figures.output_records, figures.output_bytes,
                           shuffle=figures, staging=f"handed to Spark: {why}", job_group=group)
    record.stages.append(metrics)
    record.seconds, record.handed_off = seconds, why
    record.result_rows = None if keep_frame else figures.output_records  # None: counted only when collected
    if context.repository is not None:
        record.estimating = partial(record_estimates, dag, KnownTables(context.repository, context.storage,
                                                                       record.started_at))
    return record, frame if keep_frame else None


def _write(spark, frame, record: RunRecord, group: str, renamed: bool = True) -> None:
    """Write the result (its columns given aipq's names first unless Spark already names them so: ``renamed``); a
    Spark failure other than a cancellation (Ctrl-C) is ``HandoffRefused``."""
    spark.sparkContext.setJobGroup(group, "aipq: handed to Spark")
    try:
        if record.result_format in TEXT_FORMATS:
            write_text_frame(frame, record.output_names, record.result_format, record.result_path)
        else:
            (frame.toDF(*unique_names(record.output_names)) if renamed else frame).write.parquet(record.result_path)
    except AipqError:
        raise
    except Exception as error:
        message = java_message(error)
        if "cancelled" in message.lower():
            raise spark_error(error, "the query (handed to Spark)") from error
        raise HandoffRefused(message) from error
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)

