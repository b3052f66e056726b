"""Run a stage DAG on Spark: each stage in dependency order, its output written as parquet in the run's work
directory and read back by its consumers (the paper's job plan, with each job's T_r as a parquet write).

Each stage goes through one pipeline of steps (``STAGE_STEPS``), in order, until one of them finishes it:
decide its summaries, serve it from the stage-output cache, choose whether its output is written, fuse it into
its consumer or run its job, keep its output in the cache, record what it measured, and re-plan the stages not yet
run. The state the steps share is one ``DagRun``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from aipq import faults
from aipq.config import Settings
from aipq.engine import jvm
from aipq.engine.compile import StageCompiler
from aipq.engine.context import RunContext
from aipq.engine.pass_job import MAX_NESTED_PASSES, PassJob
from aipq.engine.records import RunRecord, StageMetrics
from aipq.engine.session import sql_conf, stage_sql_conf, table_rows, user_runtime_conf
from aipq.engine.sink import TEXT_FORMATS
from aipq.engine.stage_cache import CacheKey, StageCache
from aipq.engine.stage_job import HASH_JOIN_SETTING, Fused, StageJob, StageRunner, output_is_read
from aipq.engine.statistics import StatisticsCollector
from aipq.engine.storage import join
from aipq.engine.summaries import SummaryStore
from aipq.engine.work_dirs import new_work_dir, remove_work_dir
from aipq.estimator.edge_inputs import RunState, SessionFacts, adaptive_estimator
from aipq.estimator.join_estimates import KnownTables, stage_estimate_figures
from aipq.estimator.parameters import PAGE_BYTES, parse_memory, sort_buffer_pages
from aipq.files import FileSource, Sizes
from aipq.ip import staging
from aipq.ip.candidates import distinct_bound
from aipq.ip.decisions import StageDecisions, drops_output_rows, keeping_output_exact
from aipq.ip.planner import IpPlanner
from aipq.ip.strategies import PredicateTransfer, Strategy
from aipq.planner import reducers
from aipq.planner.logical import Join, Node
from aipq.planner.physical import measured_broadcasts
from aipq.planner.stages import Stage, StageDag, StageRead
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.planner import plan_statistics


class StageListener:
    """What the executor tells a progress display; the default tells nothing."""

    def stage_started(self, stage: Stage, index: int, total: int, job_group: str) -> None: ...

    def stage_finished(self, metrics: StageMetrics) -> None: ...


class Reoptimizer(Protocol):
    """Corrective re-optimization between stages: after a written stage, the plan of the stages not yet run made
    again from what is now known, or None to go on as planned; with a note of what was compared and changed
    (``--analyze`` lists them)."""

    def after_stage(self, dag: StageDag, stage: Stage, rows: int, done: frozenset[int], written: dict[int, int],
                    distinct: dict[tuple[int, str], float]) -> tuple[StageDag | None, dict] | None: ...


@dataclass
class RunOptions:
    """How ``run_dag`` runs a DAG beyond the command's settings."""

    listener: StageListener = field(default_factory=StageListener)
    analyze: bool = False  # measure more (Spark's joins, summaries' false positives) for --analyze
    statistics: StatisticsCollector | None = None  # piggybacked statistics to collect
    ip_strategy: Strategy | None = None  # a strategy object instead of the settings' (benchmarks)
    result_format: str | None = None  # csv or json: the final stage writes its rows in that form
    reoptimizer: Reoptimizer | None = None  # the stages not yet run may be planned again after each written stage
    cache: StageCache | None = None  # stage outputs read from and kept in the stage-output cache
    reuse: bool = False  # entries of earlier commands are read too (--reuse)
    shared: frozenset[str] = frozenset()  # cache keys of stages other queries of a batch compute too
    shared_scans: dict | None = None  # tables read from a batch's cached read of them


def run_dag(context: RunContext, dag: StageDag, options: RunOptions | None = None) -> RunRecord:
    """Run ``dag``'s stages in order under ``context``'s settings; the record holds where its result is."""
    options = options or RunOptions()
    run = DagRun.start(context, dag, options)
    statistics = options.statistics
    try:
        _run_stages(run)
        _sum_shuffle_figures(run.context.spark, run.record.stages)
        if statistics is not None:
            statistics.settle()
    except BaseException:
        remove_work_dir(context.storage, run.record.work_dir)  # a failed run leaves no half-written outputs
        if statistics is not None:
            with contextlib.suppress(Exception):  # the run's own failure is the one to report
                statistics.settle()
        raise
    finally:
        with contextlib.suppress(Exception):  # freeing early is a courtesy: the JVM's collector frees them anyway
            run.runner.store.release()
    record = run.record
    record.seconds = time.perf_counter() - run.started
    record.result_rows = record.stages[-1].rows_written
    if statistics is not None:
        record.statistics_seconds = statistics.seconds
        record.statistics_collected = statistics.collected_tables
    record.estimating = _estimates_of(run)
    return record


def _estimates_of(run: DagRun) -> Callable[[RunRecord], None] | None:
    """How the record's stages get their estimates when first asked (``RunRecord.fill_estimates``; nothing
    without a statistics repository)."""
    context = run.context
    if context.repository is None:
        return None
    return partial(record_estimates, run.dag, KnownTables(context.repository, context.storage,
                                                          run.record.started_at))


def record_estimates(dag: StageDag, tables: KnownTables, record: RunRecord) -> None:
    """Each stage's estimated rows beside its actual rows, so that the q-error of any workload can be read from
    its runs (``--report``, ``Result.run``): as estimated before the run (the rows an earlier run of the same
    subplan recorded before this one started, else the tables' statistics), times the share of them its
    summaries were expected to keep."""
    measured = {m.stage_id: (m.materialized, m.rows_written) for m in record.stages}
    kept = {m.decisions.stage: m.decisions.rows_kept for m in record.stages if m.decisions is not None}
    figures = stage_estimate_figures(dag, tables, measured, kept)
    for metrics in record.stages:
        metrics.estimate = figures.get(metrics.stage_id, {})


def _sum_shuffle_figures(spark, stages: list[StageMetrics]) -> None:
    """Each stage's Spark I/O figures, read once the run's jobs are done: one wait for Spark's listener bus
    instead of one after every stage."""
    grouped = [metrics for metrics in stages if metrics.job_group]
    for metrics, figures in zip(grouped, jvm.job_groups_figures(spark, [m.job_group for m in grouped]),
                                strict=True):
        metrics.shuffle = figures


@dataclass
class StageStep:
    """One stage on its way through the pipeline: what the steps so far decided for it."""

    stage: Stage
    index: int  # its place in the run, from 1, for the progress display
    group: str  # the Spark job group its jobs run under
    decisions: StageDecisions | None = None
    decision_seconds: float = 0.0
    inputs: list[Fused] = field(default_factory=list)  # the stages fused into its job, transitively
    cache_key: CacheKey | None = None
    written: bool = True  # its output written (else fused into its consumer's job)
    why: str = ""  # why it was written or fused
    broadcasts: dict[int, str] = field(default_factory=dict)  # joins turned map-side by measured input sizes
    metrics: StageMetrics | None = None


@dataclass
class DagRun:
    """The state one run of a DAG's stages shares across its steps, built once by ``DagRun.start``."""

    context: RunContext
    dag: StageDag
    options: RunOptions
    record: RunRecord
    runner: StageRunner
    paths: dict[int, str]  # stage id → where its output is (its work-dir folder, or a cache entry)
    conf: dict[str, str]  # the Spark settings every stage runs under
    started: float
    sizes: Sizes  # base tables' bytes, looked up once
    cores: int  # the fewest reduce tasks Hive's rule gives a stage (the session's cores)
    ip: IpPlanner | None = None
    passes: PassJob | None = None  # summary passes (transfer's, pre-passes), run together in one job
    written: dict[int, int] = field(default_factory=dict)  # stage id → rows it wrote (the estimator reads it)
    bytes_written: dict[int, int] = field(default_factory=dict)  # stage id → bytes (what Hive's rule reads)
    fused_into: dict[int, list[Fused]] = field(default_factory=dict)  # consumer id → stages fused into its job
    done: set[int] = field(default_factory=set)  # run, fused or skipped: a re-planned DAG holds them too
    inexact: set[int] = field(default_factory=set)  # outputs lacking rows their subplan has (pruned by summaries)
    position: int = 0  # the next stage of ``dag.stages`` to look at
    _hash_join_bytes: int | None = None

    @classmethod
    def start(cls, context: RunContext, dag: StageDag, options: RunOptions) -> DagRun:
        spark, storage, settings = context.spark, context.storage, context.settings
        run_id, work_dir = new_work_dir(storage, context.runs_dir)
        paths = {s.id: join(work_dir, f"stage-{s.id}") for s in dag.stages}
        compiler = StageCompiler(spark, paths, storage)
        compiler.shared_scans = options.shared_scans or {}
        store = SummaryStore(spark, storage, work_dir, paths, settings.probe_min_rejection)
        result_format = options.result_format if options.result_format in TEXT_FORMATS else "parquet"
        record = RunRecord(run_id, work_dir, paths[dag.final.id], dag.plan.output_names, 0, strategy=settings.ip,
                           result_format=result_format, started_at=time.time())
        run = cls(context=context, dag=dag, options=options, record=record,
                  runner=StageRunner(spark, storage, compiler, store), paths=paths,
                  conf={**stage_sql_conf(settings), **user_runtime_conf(spark, settings)},
                  started=time.perf_counter(), sizes=Sizes(storage),
                  cores=spark.sparkContext.defaultParallelism if settings.reducer_bytes > 0
                  else settings.shuffle_partitions)
        if options.statistics is not None:
            run.runner.column_bounds = options.statistics.column_bounds
        run.ip = run.information_passing(dag)
        if _passes_in_one_job(dag, run.ip.strategy, options):
            run.passes = PassJob(run.runner, f"aipq-{run_id}-passes")
        return run

    @property
    def settings(self) -> Settings:
        return self.context.settings

    def hash_join_bytes(self) -> int:
        """``hash_join_bytes`` for this session, looked up once a run."""
        if self._hash_join_bytes is None:
            spark, shape = self.context.spark, jvm.cluster_shape(self.context.spark)
            advisory = parse_memory(spark.conf.get("spark.sql.adaptive.advisoryPartitionSizeInBytes", "64m"))
            fraction = float(spark.conf.get("spark.memory.fraction", "0.6"))
            task_memory = sort_buffer_pages(parse_memory(shape.executor_memory), fraction,
                                            shape.executor_cores) * PAGE_BYTES
            self._hash_join_bytes = hash_join_bytes(self.settings, task_memory, advisory)
        return self._hash_join_bytes

    @property
    def statistics(self) -> StatisticsCollector | None:
        return self.options.statistics

    def information_passing(self, dag: StageDag) -> IpPlanner:
        """The IP planner of ``dag``, its estimator (strategy adaptive) reading this run's state as it grows."""
        context, statistics = self.context, self.statistics
        state = RunState(self.written, self.paths, statistics.output_sketches if statistics is not None else {})
        estimator = adaptive_estimator(dag, context.settings, statistics.repository if statistics else None,
                                       context.calibration, lambda: session_facts(context.spark, context.storage),
                                       state)
        return IpPlanner(dag, context.settings, _RowCounts(context.spark, context.storage, dag, self.written),
                         estimator, self.options.ip_strategy)

    def next_stage(self) -> StageStep | None:
        """The next stage not yet done, or None when every stage is."""
        while self.position < len(self.dag.stages):
            stage = self.dag.stages[self.position]
            self.position += 1
            if stage.id not in self.done:
                self.done.add(stage.id)
                return StageStep(stage, self.position, f"aipq-{self.record.run_id}-{stage.name}")
        return None

    def read_bytes(self, leaf: Node) -> int | None:
        """The bytes of the stage output a leaf reads (None for a table)."""
        return self.bytes_written.get(leaf.stage_id) if isinstance(leaf, StageRead) else None

    def finished_twins(self, stage: Stage) -> list[int]:
        """Summary pre-passes that ran before a re-plan over the same subplan as ``stage``."""
        if not self.record.replans:
            return []
        key = stage_plan_key(self.dag, stage.id)
        return [s.id for s in self.dag.stages if s.id in self.done and s.id != stage.id and s.operator == "SCAN"
                and stage_plan_key(self.dag, s.id) == key]

    def follow(self, dag: StageDag, note: dict) -> None:
        """Go on with a re-planned DAG: its new stages' paths, its IP planner and statistics, from its start
        (the stages already done are skipped)."""
        self.record.replans.append(note)
        self.dag = self.record.dag = dag
        for new in dag.stages:
            self.paths.setdefault(new.id, join(self.record.work_dir, f"stage-{new.id}"))
        self.record.result_path = self.paths[dag.final.id]
        self.ip = self.information_passing(dag)
        self.position = 0
        statistics = self.statistics
        if statistics is not None:
            statistics.follow(dag, plan_statistics(dag, statistics.repository, self.context.storage,
                                                   self.settings.stats_columns))


def _run_stages(run: DagRun) -> None:
    """Every stage through the pipeline, under the run's Spark settings."""
    with sql_conf(run.context.spark, run.conf):
        while (step := run.next_stage()) is not None:
            for handle in STAGE_STEPS:
                if not handle(run, step):
                    break


# ---- the pipeline: each step returns whether the stage goes on to the next ------------------------------------
def run_gathered_passes(run: DagRun, step: StageStep) -> bool:
    """Before the first stage that is not a summary pass, the passes gathered so far run as one job."""
    if run.passes is not None and run.passes.pending and not _may_be_pass(run, step.stage):
        _record_passes(run, run.passes)
    return True


def _record_passes(run: DagRun, passes: PassJob) -> None:
    store = run.runner.store
    for metrics in passes.run():
        stage = run.dag.stage(metrics.stage_id)
        run.written[stage.id] = metrics.rows_written
        run.bytes_written[stage.id] = 0
        if run.statistics is not None:
            # the keys' sketches that writing the output would have observed: the summaries' own, of the same rows
            sketches = {f"k{i}_hll": store.built[(stage.id, column)].sketch
                        for i, column in enumerate(stage.consumer_keys) if (stage.id, column) in store.built}
            run.statistics.stage_finished(stage, metrics.decisions, sketches, metrics.rows_written, 0)
        run.record.stages.append(metrics)
        run.options.listener.stage_finished(metrics)


def decide(run: DagRun, step: StageStep) -> bool:
    """The summaries the stage builds and uses (Algorithms 1-2); a summary pre-pass none wants is done."""
    stage, statistics, ip = step.stage, run.statistics, run.ip
    assert ip is not None
    if statistics is not None and ip.estimator is not None and ip.has_edges(stage):
        # the estimator reads table statistics from the repository: decide on what earlier stages collected; a
        # stage with no edge to decide on does not wait for the storing thread
        statistics.settle_tables()
    if stage.operator == "SCAN":
        for twin in run.finished_twins(stage):
            run.runner.store.alias(twin, stage.id)
    deciding = time.perf_counter()
    step.decisions = ip.decide(stage, run.runner.store.infos())
    step.decision_seconds = time.perf_counter() - deciding
    if stage.operator == "SCAN" and all(build.key in run.runner.store.built for build in step.decisions.builds):
        return False  # a summary pre-pass whose summaries no edge wants, or built before a re-plan
    step.inputs = run.fused_into.pop(stage.id, [])
    return True


def gather_pass(run: DagRun, step: StageStep) -> bool:
    """A summary pass waits to run in one job with the others (``run_gathered_passes``); a pre-pass that collects
    statistics or builds other summaries than Bloom filters runs alone, as any stage."""
    passes = run.passes
    if passes is None or not _may_be_pass(run, step.stage):
        return True
    assert step.decisions is not None
    if not _gathers(run, step.stage, step.decisions):
        if passes.pending:
            _record_passes(run, passes)
        return True
    if passes.nested(step.decisions) > MAX_NESTED_PASSES:
        _record_passes(run, passes)
    passes.add(step.stage, step.decisions, step.decision_seconds)
    return False


def serve_from_cache(run: DagRun, step: StageStep) -> bool:
    """A stage whose output the stage-output cache holds is read from there, with the summaries it builds."""
    cache, stage = run.options.cache, step.stage
    step.cache_key = cache.stage_key(run.dag, stage.id, run.settings) if cache is not None else None
    if step.cache_key is None:
        return True
    assert cache is not None and step.decisions is not None
    hit = cache.lookup(step.cache_key.key, run.options.reuse, run.runner.parquet_rows())
    if hit is None:
        return True
    run.paths[stage.id] = hit.path  # its rows as an earlier statement or run wrote them: exact, read as they are
    run.written[stage.id], run.bytes_written[stage.id] = hit.rows, hit.bytes
    whose = "this" if hit.command == cache.command else "an earlier"
    started = time.perf_counter()
    built = run.runner.summaries_of_output(stage, step.decisions, hit.path, step.group)
    run.record.stages.append(StageMetrics(
        stage.id, stage.operator, time.perf_counter() - started, hit.rows, hit.bytes, decisions=built,
        decision_seconds=step.decision_seconds, summaries=[run.runner.store.built[b.key] for b in built.builds],
        staging=f"reused from the stage-output cache ({hit.description} of {whose} command)", reused=True))
    return False


def choose_staging(run: DagRun, step: StageStep) -> bool:
    """Whether the stage's output is written (``ip/staging.py``; a stage a batch shares always is), whether it
    is exact, and which of its joins turn map-side from measured input sizes."""
    stage = step.stage
    assert step.decisions is not None
    shared = step.cache_key is not None and step.cache_key.key in run.options.shared
    if shared:  # another query of the batch reads it too: kept whole, then read from the cache
        step.decisions = keeping_output_exact(step.decisions)
    if drops_output_rows(step.decisions) or set(run.dag.dependency.get(stage.id, [])) & run.inexact:
        run.inexact.add(stage.id)
    step.written, step.why = staging.materialized(run.dag, stage, run.settings, bool(step.decisions.builds))
    if shared:
        step.written, step.why = True, "shared: another query of the batch computes the same subplan"
    step.broadcasts = measured_broadcasts(stage.plan, runtime_broadcast_threshold(run.settings), run.sizes,
                                          run.read_bytes)
    return True


def fuse(run: DagRun, step: StageStep) -> bool:
    """A stage whose output is not written is compiled inside its consumer's job, which counts its probes."""
    if step.written:
        return True
    stage, decisions = step.stage, step.decisions
    assert decisions is not None
    fused = Fused(stage, decisions, [])
    run.runner.compiler.fused[stage.id] = lambda: run.runner.plan(
        stage, decisions, fused.probes, step.group, run.statistics, True, step.broadcasts)
    consumer = next(iter(run.dag.dataflow.get(stage.id, [])))
    run.fused_into.setdefault(consumer, []).extend([fused, *step.inputs])
    run.record.stages.append(StageMetrics(
        stage.id, stage.operator, 0.0, 0, 0, probes=fused.probes, decisions=decisions,
        decision_seconds=step.decision_seconds, materialized=False, staging=step.why,
        measured_broadcasts=_broadcast_notes(stage, step.broadcasts, run.read_bytes)))
    return False


def run_job(run: DagRun, step: StageStep) -> bool:
    """The stage's own Spark job (with the stages fused into it), its reduce tasks sized by Hive's rule."""
    stage, dag, settings = step.stage, run.dag, run.settings
    assert step.decisions is not None
    run.options.listener.stage_started(stage, step.index, len(dag.stages), step.group)
    tasks = _reduce_tasks(run, stage)
    stage_conf = {"spark.sql.shuffle.partitions": str(tasks)} if tasks != settings.shuffle_partitions else {}
    if step.inputs:  # a job computing fused stages too: Spark adapts inside it
        stage_conf.update(fused_job_conf(settings, run.hash_join_bytes()))
    final = stage is dag.final
    job = StageJob(stage, step.decisions, run.paths[stage.id], step.group, is_final=final,
                   write=output_is_read(stage, step.decisions, run.options.analyze), fused=step.inputs,
                   text=(run.record.result_format, run.record.output_names) if final else None,
                   partition_by=dag.partition_by if final else (),
                   write_format=dag.write_format if final else "parquet", broadcasts=step.broadcasts)
    with sql_conf(run.context.spark, stage_conf):
        step.metrics = run.runner.run_recovering(job, run.statistics)
    step.metrics.reduce_tasks = tasks
    return True


def keep(run: DagRun, step: StageStep) -> bool:
    """An exact written output goes into the stage-output cache, with the Bloom filters built while writing it
    (an exact summary is the written output itself, read where it was written: such a stage stays put)."""
    stage, cache, metrics = step.stage, run.options.cache, step.metrics
    assert metrics is not None and step.decisions is not None
    exact_summary = any(build.kind == "exact" for build in step.decisions.builds)
    if cache is not None and step.cache_key is not None and stage.id not in run.inexact and not exact_summary:
        kept = cache.keep(step.cache_key, run.paths[stage.id], metrics.rows_written, metrics.bytes_written,
                          f"{stage.name} {stage.operator}")
        if kept is not None:
            run.paths[stage.id] = kept.path
            run.runner.store.offer(stage.id, kept.path)
    faults.reached("stage-written")
    return True


def record(run: DagRun, step: StageStep) -> bool:
    """What the stage measured, in the run's record (with --analyze, Spark's joins and the summaries' false
    positives too); the progress display is told."""
    stage, metrics, spark = step.stage, step.metrics, run.context.spark
    assert metrics is not None
    metrics.staging = step.why
    metrics.measured_broadcasts = _broadcast_notes(stage, step.broadcasts, run.read_bytes)
    run.bytes_written[stage.id] = metrics.bytes_written
    probes = metrics.probes + [p for fused in step.inputs for p in fused.probes]
    if run.options.analyze:
        metrics.spark_joins = jvm.join_strategies(spark, step.group)
        for probe in probes:
            run.runner.store.measure_false_positives(probe)
    for probe in probes:
        probe.raw = None
    metrics.decision_seconds = step.decision_seconds
    run.written[stage.id] = metrics.rows_written
    run.record.stages.append(metrics)
    run.options.listener.stage_finished(metrics)
    faults.reached("between-stages")
    return True


def reoptimize(run: DagRun, step: StageStep) -> bool:
    """After a written stage, the reoptimizer may plan the stages not yet run again from what is now known."""
    stage, reoptimizer, statistics = step.stage, run.options.reoptimizer, run.statistics
    if reoptimizer is None or stage is run.dag.final or run.fused_into:  # not while fused stages wait for their job
        return True
    if statistics is not None:
        statistics.settle_tables()  # the statistics earlier stages collected inform the re-plan
    distinct = statistics.output_distinct() if statistics is not None else {}
    outcome = reoptimizer.after_stage(run.dag, stage, run.written[stage.id], frozenset(run.done), dict(run.written),
                                    distinct)
    if outcome is not None:
        dag, note = outcome
        if dag is None:
            run.record.replans.append(note)
        else:
            run.follow(dag, note)
    return True


STAGE_STEPS: tuple[Callable[[DagRun, StageStep], bool], ...] = (
    run_gathered_passes, decide, gather_pass, serve_from_cache, choose_staging, fuse, run_job, keep, record,
    reoptimize,
)


# ---- helpers of the steps ---------------------------------------------------------------------------------------
def _passes_in_one_job(dag: StageDag, strategy: Strategy, options: RunOptions) -> bool:
    """Whether summary passes run in one job: Bloom filters only (the oracle's exact key sets are written
    outputs), not under --analyze, which measures each pass's false positives from its output, and, for the
    pre-passes of strategies other than transfer, not when the run is re-planned after each written stage."""
    if strategy.kind != "bloom" or options.analyze:
        return False
    if isinstance(strategy, PredicateTransfer):
        return bool(dag.transfer_passes)
    return options.reoptimizer is None and any(stage.operator == "SCAN" for stage in dag.stages)


def _may_be_pass(run: DagRun, stage: Stage) -> bool:
    """Whether ``stage`` is a summary pass that may wait for the pass job: predicate transfer's, or a pre-pass."""
    return stage.id in run.dag.transfer_passes or (stage.operator == "SCAN" and not run.dag.transfer_passes)


def _gathers(run: DagRun, stage: Stage, decisions: StageDecisions) -> bool:
    """Whether a pass runs in the pass job: transfer's always; a pre-pass when it builds Bloom filters only and
    its scans collect no statistics (the job observes none)."""
    if stage.id in run.dag.transfer_passes:
        return True
    statistics = run.statistics
    return all(build.kind == "bloom" for build in decisions.builds) and (
        statistics is None or not statistics.would_observe(stage))


def _reduce_tasks(run: DagRun, stage: Stage) -> int:
    input_bytes = reducers.stage_input_bytes(stage, run.bytes_written.get, run.sizes)
    return reducers.reduce_tasks(run.settings, input_bytes, run.cores)


def _broadcast_notes(stage: Stage, broadcasts: dict[int, str], read_bytes) -> list[dict]:
    """For ``--analyze``, each join turned map-side once its input's size was measured: the join, the side
    broadcast and the bytes of the stage outputs it reads."""
    notes = []
    for node in stage.plan.walk():
        if isinstance(node, Join) and id(node) in broadcasts:
            side = node.left if broadcasts[id(node)] == "left" else node.right
            notes.append({"join": node.kind, "side": broadcasts[id(node)],
                          "stage_bytes": {leaf.stage_id: read_bytes(leaf) for leaf in side.walk()
                                          if isinstance(leaf, StageRead)}})
    return notes


def runtime_broadcast_threshold(settings: Settings) -> int:
    """The most bytes of a join input measured while the query runs that is broadcast (0: none)."""
    return max(settings.broadcast_threshold, 0) if settings.runtime_broadcast == "on" else 0


def fused_job_conf(settings: Settings, hash_join_bytes: int) -> dict[str, str]:
    """Spark's adaptive execution inside a job that computes fused stages: partitions coalesced, skew split, a
    small intermediate result broadcast (within the broadcast threshold, with ``--runtime-broadcast on``) and a
    join input measured at most ``hash_join_bytes`` in every reduce task hashed instead of sorted (0: never)."""
    threshold = str(runtime_broadcast_threshold(settings) or -1)
    conf = {"spark.sql.adaptive.enabled": "true", "spark.sql.adaptive.autoBroadcastJoinThreshold": threshold}
    if hash_join_bytes > 0 and HASH_JOIN_SETTING not in settings.spark_conf:
        conf[HASH_JOIN_SETTING] = str(hash_join_bytes)
    return conf


HASH_JOIN_MEMORY_SHARE = 1 / 8  # a hash table takes several times its input's shuffled (compressed) bytes
HASH_JOIN_MOST_BYTES = 256 * (1 << 20)


def hash_join_bytes(settings: Settings, task_memory: float, advisory_bytes: int) -> int:
    """The most shuffled bytes of a join input, in each of its reduce tasks, that Spark's adaptive execution
    builds a hash table from (a shuffled hash join: neither side sorted), given the execution memory one task
    has; 0 with ``--hash-joins off`` or when that memory is too small. Spark only converts when this is at least
    its advisory partition size, the size it coalesces reduce tasks to."""
    if settings.hash_joins == "off":
        return 0
    most = int(min(task_memory * HASH_JOIN_MEMORY_SHARE, HASH_JOIN_MOST_BYTES))
    return most if most >= advisory_bytes else 0


class _RowCounts:
    """Upper bounds on a summarized column's distinct values, to size Bloom filters (``distinct_bound``): the
    rows of the inputs its values come from (earlier stages' outputs as written; base tables from parquet
    metadata)."""

    def __init__(self, spark, files: FileSource, dag: StageDag, written: dict[int, int]):
        self.spark = spark
        self.files = files
        self.dag = dag
        self.written = written

    def __call__(self, stage_id: int, column: str) -> int | None:
        found = distinct_bound(self.dag, stage_id, column, self.written.get,
                               lambda scan: (table_rows(self.spark, self.files, scan.table), "files"))
        return int(found[0]) if found is not None else None


def session_facts(spark, files: FileSource) -> SessionFacts:
    """What the estimator reads from the running session: the cluster's executors, task slots and memory (conf
    lookups, not sparkContext.getConf(), which copies the whole conf over py4j: 20 ms on every run)."""
    shape = jvm.cluster_shape(spark)
    return SessionFacts(table_rows=lambda entry: table_rows(spark, files, entry), files=files,
                        parallelism=shape.task_slots, executors=shape.executors, executor_cores=shape.executor_cores,
                        executor_memory=shape.executor_memory,
                        memory_fraction=float(spark.conf.get("spark.memory.fraction", "0.6")))


