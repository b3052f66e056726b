"""Run one planned query: the single-query path every command takes (``aipq run`` of a query, each SELECT and
write of a workflow, a batch's files, the benchmarks, ``explain --analyze``). Spark starts here, so bad SQL fails
in planning without paying for a JVM."""

from __future__ import annotations

from dataclasses import dataclass, replace

from aipq.engine.context import RunContext
from aipq.engine.dag_run import RunOptions, StageListener
from aipq.engine.executor import run_dag
from aipq.engine.handoff import Handoff, HandoffRefused, handoff_decision, run_handed_off
from aipq.engine.records import RunRecord
from aipq.engine.statistics import collector_for
from aipq.engine.storage import Storage
from aipq.engine.work_dirs import keep_work_dir, remove_work_dir
from aipq.errors import BadInputError, ExecutionError
from aipq.ip.strategies import Strategy
from aipq.pipeline import PlannedQuery
from aipq.planner.resolve import find_word
from aipq.planner.stages import StageDag
from aipq.reoptimizer import Reoptimizer
from aipq.stats.planner import plan_statistics
from aipq.workflow.planning_estimates import PlanTimeDecisions
from aipq.workflow.transfer_choice import TransferChoice, with_transfer_if_it_pays

# A result of aipq's own plan with at most this many rows (by its LIMIT or its estimate) is sent to the driver by
# its last job when the caller keeps the result as a DataFrame (the Python API), not written and read back.
COLLECTED_ROWS = 10_000


@dataclass
class QueryRun:
    spark: object
    planned: PlannedQuery
    record: RunRecord
    storage: Storage
    frame: object | None = None  # a handed-off query's result as Spark's DataFrame, when asked for instead of files

    def close(self) -> None:
        remove_work_dir(self.storage, self.record.work_dir)

    def keep(self) -> None:
        keep_work_dir(self.storage, self.record.work_dir)


def check_table_data(dag: StageDag, storage: Storage) -> None:
    """Every table the query reads still has its data, on any store (a data fault, exit 1, before any stage
    runs)."""
    for stage in dag.stages:
        for node in stage.plan.walk():
            table = getattr(node, "table", None)
            if table is not None and table.source == "aipq" and not storage.exists(table.path):
                raise ExecutionError(f"the data of table {table.qualified_name} is gone: no file or folder "
                                     f"{table.path}",
                                     hint="restore it, or register the table again with `aipq table add`")


def execute(planned: PlannedQuery, context: RunContext, listener: StageListener | None = None,
            analyze: bool = False, result_format: str | None = None, shared: frozenset[str] = frozenset(),
            shared_scans: dict | None = None, ip_strategy: Strategy | None = None,
            keep_frame: bool = False) -> QueryRun:
    """Run a planned query; Spark starts here, so bad SQL fails in planning without paying for a JVM. With
    ``result_format`` csv or json the result is written in that form straight away; ``shared``: the cache keys of
    stages other queries of a batch compute too, ``shared_scans`` its tables read once for all of them;
    ``ip_strategy``: a strategy object instead of the settings' (a benchmark measuring one decision). A query in
    which aipq chooses nothing is handed to Spark whole (``query_handoff``); with ``keep_frame`` its result is then
    the run's DataFrame, not files, and a small result of aipq's plan comes back as rows (``COLLECTED_ROWS``)."""
    check_table_data(planned.dag, context.storage)
    choice, adaptive = None, PlanTimeDecisions(planned.dag, context)
    if ip_strategy is None and not (shared or shared_scans):
        planned, context, choice = with_transfer_if_it_pays(planned, context, adaptive)
    handoff = query_handoff(planned, context, ip_strategy, bool(shared or shared_scans), adaptive, choice)
    choice_figures = choice.as_dict() if choice is not None else None
    if handoff.chosen:
        try:
            record, frame = run_handed_off(context, planned.statement, planned.dag, handoff.why,
                                           result_format or "parquet", keep_frame)
            record.transfer_choice = choice_figures
            return QueryRun(context.spark, planned, record, context.storage, frame)
        except HandoffRefused:
            pass  # aipq's own plan runs: its planning or stages report the mistake as without the handoff
    collector = collector_for(context, planned.dag, planned.source_name or "query")
    try:
        reoptimizer = Reoptimizer(planned, context) if Reoptimizer.applies(planned, context) else None
        options = RunOptions(listener=listener or StageListener(), analyze=analyze, statistics=collector,
                             result_format=result_format, reoptimizer=reoptimizer, cache=context.stage_cache,
                             reuse=context.reuses_outputs, shared=shared, shared_scans=shared_scans,
                             ip_strategy=ip_strategy, collect_rows=COLLECTED_ROWS if keep_frame else 0)
        record = run_dag(context, planned.dag, options)
    except BadInputError as error:
        name = getattr(error, "missing_name", None)
        if error.position is None and name:
            error.position = find_word(planned.sql, name.split(".")[-1])
            error.source_name = planned.source_name
        raise
    record.transfer_choice = choice_figures
    if choice is not None and choice.chosen and record.dag is None:  # the stages as they ran, not as planned
        record.dag = planned.dag
    if record.dag is not None:  # re-planned while it ran: the stages as they ran
        planned = replace(planned, dag=record.dag)
    return QueryRun(context.spark, planned, record, context.storage)


def keep_stage_outputs(context: RunContext) -> str | None:
    """``--keep-work``: the stage outputs this command moves into the stage-output cache stay there when it
    completes, beside its work directory. Where they go (None: no cache)."""
    cache = context.stage_cache
    if cache is None:
        return None
    cache.keeping = True
    return cache.root


def finish_stage_cache(context: RunContext) -> None:
    """The command is done: the stage outputs it kept go, unless it keeps them for later ones (``--reuse``)."""
    cache = context.stage_cache
    if cache is not None:
        cache.finish(context.reuses_outputs)


def query_handoff(planned: PlannedQuery, context: RunContext, ip_strategy: Strategy | None = None,
                  batch_shared: bool = False, adaptive: PlanTimeDecisions | None = None,
                  choice: TransferChoice | None = None) -> Handoff:
    """Whether ``planned`` is handed to Spark whole (``engine/handoff.py``), from what aipq knows before running
    it: the decisions strategy ``adaptive``'s estimator makes now (those explain shows; ``adaptive`` when they
    were made already), the plan's own rewrites, and whether the run would collect statistics. A query whose work
    a batch shares with others, or that runs the transfer schedule the estimator chose (``choice``), runs aipq's
    plan."""
    settings, dag = context.settings, planned.dag
    if batch_shared:
        return Handoff(False, "a batch shares part of its work with other queries")
    if choice is not None and choice.chosen:
        return Handoff(False, "aipq's plan: predicate transfer, chosen by the estimator")

    def decide(decisions=(), statistics_missing=False, broadcast_does_it=lambda use: False) -> Handoff:
        return handoff_decision(settings, dag, planned.statement, decisions, ip_strategy is not None,
                                planned.table is not None, statistics_missing, broadcast_does_it)

    first = decide()
    if not first.chosen:
        return first
    # statistics this run would collect (tables with files: a view of rows in memory has none to collect)
    missing = settings.statistics == "recollect" or (settings.statistics == "collect" and any(
        need.missing and need.files.fingerprint for need in statistics_needs(dag, context)))
    adaptive = adaptive or PlanTimeDecisions(dag, context)
    estimator = adaptive.estimator
    return decide(adaptive.decisions, missing, lambda use: estimator is not None
                  and estimator.joined_map_side_at_run(use.target, use.producer))


def statistics_needs(dag: StageDag, context: RunContext) -> list:
    if context.repository is None:
        return []
    return plan_statistics(dag, context.repository, context.storage, context.settings.stats_columns)

