"""Run a stage DAG on Spark: each stage in dependency order, its output written as parquet in the run's work
directory and read back by its consumers (the paper's job plan, with each job's T_r as a parquet write)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql import Observation
from pyspark.sql import functions as F

from aipq import faults
from aipq.config import Settings
from aipq.engine import jvm, stage_cache
from aipq.engine.compile import StageCompiler
from aipq.engine.context import RunContext
from aipq.engine.jvm import ShuffleFigures, job_group_figures
from aipq.engine.processes import process_alive, process_start
from aipq.engine.session import java_message, sql_conf, stage_sql_conf, table_rows, user_runtime_conf
from aipq.engine.sink import TEXT_FORMATS, Result, write_text_frame
from aipq.engine.stage_cache import CacheKey, StageCache
from aipq.engine.statistics import StatisticsCollector
from aipq.engine.storage import Storage, join
from aipq.engine.summaries import BuiltSummary, ProbeRecord, SummaryStore
from aipq.errors import AipqError, BadInputError, ExecutionError, warn
from aipq.estimator.edge_inputs import EdgeEstimator, RunState, SessionFacts
from aipq.files import FileSource, Sizes, total_bytes
from aipq.ip import staging
from aipq.ip.candidates import distinct_bound
from aipq.ip.planner import IpPlanner, StageDecisions, Strategy, SummaryUse, drops_output_rows, keeping_output_exact
from aipq.planner import reducers
from aipq.planner.logical import Join, Node, Scan, Sort
from aipq.planner.physical import measured_broadcasts
from aipq.planner.stages import Stage, StageDag, StageRead
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.planner import plan_statistics


@dataclass
class StageMetrics:
    stage_id: int
    operator: str
    seconds: float
    rows_written: int
    bytes_written: int
    shuffle: ShuffleFigures = field(default_factory=ShuffleFigures)
    summaries: list[BuiltSummary] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    decisions: StageDecisions | None = None
    decision_seconds: float = 0.0
    reduce_tasks: int = 0  # the stage's shuffle partitions
    materialized: bool = True  # its output written; else fused into its consumer's job (``ip/staging.py``)
    staging: str = ""  # why it was written or fused
    spark_joins: dict[str, int] = field(default_factory=dict)  # with --analyze: the joins Spark's final plan ran
    measured_broadcasts: list[dict] = field(default_factory=list)  # joins made map-side by measured input sizes
    reused: bool = False  # its rows read from the stage-output cache, not computed


@dataclass
class RunRecord:
    run_id: str
    work_dir: str
    result_path: str
    output_names: tuple[str, ...]
    result_rows: int
    stages: list[StageMetrics] = field(default_factory=list)
    seconds: float = 0.0
    strategy: str = "off"
    statistics_seconds: float = 0.0  # storing piggybacked statistics, on a thread beside later stages
    statistics_collected: list[str] = field(default_factory=list)  # tables whose statistics this run stored
    result_format: str = "parquet"  # csv or json: the final stage wrote the requested format straight away
    replans: list[dict] = field(default_factory=list)  # each re-plan between stages (``Replanner``)
    dag: StageDag | None = None  # the DAG the run finished with, when a re-plan changed it

    @property
    def result(self) -> Result:
        return Result(self.result_path, self.output_names, self.result_format)


class StageListener:
    """What the executor tells a progress display; the default tells nothing."""

    def stage_started(self, stage: Stage, index: int, total: int, job_group: str) -> None: ...

    def stage_finished(self, metrics: StageMetrics) -> None: ...


class Replanner(Protocol):
    """Corrective re-optimization between stages: after a written stage, the plan of the stages not yet run made
    again from what is now known, or None to go on as planned; with a note of what was compared and changed
    (``--analyze`` lists them)."""

    def after_stage(self, dag: StageDag, stage: Stage, rows: int, done: frozenset[int], written: dict[int, int],
                    distinct: dict[tuple[int, str], float]) -> tuple[StageDag | None, dict] | None: ...


def _final_needs_order(stage: Stage) -> bool:
    return any(isinstance(n, Sort) for n in stage.plan.walk())


OWNER_FILE = "_owner"
KEPT_FILE = "_kept"


def new_work_dir(storage: Storage, root: str) -> tuple[str, str]:
    """A new run's work directory under ``root``, marked with this process's id so that a later run can tell
    that a killed run left it behind (``remove_stale_work_dirs``)."""
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    remove_stale_work_dirs(storage, root)
    work_dir = join(root, run_id)
    storage.mkdirs(work_dir)
    storage.write_text(join(work_dir, OWNER_FILE), f"{socket.gethostname()} {os.getpid()} "
                                                   f"{process_start(os.getpid())}\n")
    return run_id, work_dir


def keep_work_dir(storage: Storage, record: RunRecord) -> None:
    """Mark a run's work directory as kept (``--keep-work``): stale-directory cleaning leaves it alone."""
    storage.write_text(join(record.work_dir, KEPT_FILE), "")


def _owner_alive(storage: Storage, work_dir: str, modified_ms: int) -> bool:
    if storage.exists(join(work_dir, KEPT_FILE)):
        return True
    young = time.time() - modified_ms / 1000 < 86400  # when nothing else tells, removed once a day old
    try:
        host, pid_text, *started = storage.read_text(join(work_dir, OWNER_FILE)).split()
        pid = int(pid_text)
    except Exception:  # noqa: BLE001 — no owner mark on any store: an older aipq's run, or one just starting
        return young
    if host != socket.gethostname():
        return young  # another machine's run
    return process_alive(pid, started[0] if started else "")


def remove_stale_work_dirs(storage: Storage, root: str) -> None:
    """Remove the work directories of runs whose process is gone (killed runs leave theirs behind); the
    stage-output cache beside them stays."""
    for work_dir, is_dir, modified_ms in storage.children(root):
        if is_dir and work_dir.rstrip("/").rsplit("/", 1)[-1] != stage_cache.FOLDER \
                and not _owner_alive(storage, work_dir, modified_ms):
            storage.delete(work_dir)


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


def adaptive_estimator(context: RunContext, dag: StageDag, written: dict[int, int], paths: dict[int, str],
                       statistics: StatisticsCollector | None) -> EdgeEstimator | None:
    """The benefit estimator of strategy ``adaptive``, reading this run's state as it grows."""
    if context.settings.ip != "adaptive":
        return None
    repository = statistics.repository if statistics is not None else None
    state = RunState(written, paths, statistics.output_sketches if statistics is not None else {})
    return EdgeEstimator(dag, context.settings, repository, context.calibration, state,
                         session_facts(context.spark, context.storage))


def session_facts(spark, files: FileSource) -> SessionFacts:
    """What the estimator reads from the running session: the cluster's executors, task slots and memory (conf
    lookups, not sparkContext.getConf(), which copies the whole conf over py4j: 20 ms on every run)."""
    shape = jvm.cluster_shape(spark)
    return SessionFacts(table_rows=lambda entry: table_rows(spark, files, entry), files=files,
                        parallelism=shape.task_slots, executors=shape.executors, executor_cores=shape.executor_cores,
                        executor_memory=shape.executor_memory,
                        memory_fraction=float(spark.conf.get("spark.memory.fraction", "0.6")))


def run_dag(context: RunContext, dag: StageDag, listener: StageListener | None = None, analyze: bool = False,
            statistics: StatisticsCollector | None = None, ip_strategy: Strategy | None = None,
            result_format: str | None = None, replanner: Replanner | None = None,
            cache: StageCache | None = None, reuse: bool = False, shared: frozenset[str] = frozenset(),
            shared_scans: dict | None = None) -> RunRecord:
    """Run ``dag``'s stages in order under ``context``'s settings; the record holds where its result is. With
    ``result_format`` csv or json the final stage writes its rows in that form (no parquet round trip for
    the result); with ``replanner`` the stages not yet run may be planned again after each written stage; with
    ``cache`` a stage whose output it holds is read from it, and exact outputs are kept in it; a stage whose cache
    key is in ``shared`` is written whole, for the other queries of a batch, and a table in ``shared_scans`` is
    read from the batch's cached read of it."""
    spark, settings, storage = context.spark, context.settings, context.storage
    listener = listener or StageListener()
    run_id, work_dir = new_work_dir(storage, context.runs_dir)
    paths = {s.id: join(work_dir, f"stage-{s.id}") for s in dag.stages}
    compiler = StageCompiler(spark, paths)
    compiler.shared_scans = shared_scans or {}
    store = SummaryStore(spark, storage, work_dir, paths, settings.probe_min_rejection)
    written: dict[int, int] = {}

    def information_passing(dag: StageDag) -> IpPlanner:
        return IpPlanner(dag, settings, _RowCounts(spark, storage, dag, written),
                         adaptive_estimator(context, dag, written, paths, statistics), ip_strategy)

    ip = information_passing(dag)
    record = RunRecord(run_id, work_dir, paths[dag.final.id], dag.plan.output_names, 0, strategy=settings.ip,
                       result_format=result_format if result_format in TEXT_FORMATS else "parquet")
    started = time.perf_counter()
    conf = {**stage_sql_conf(settings), **user_runtime_conf(spark, settings)}
    try:
        _run_stages(_DagRun(spark, storage, dag, settings, compiler, store, ip, record, paths, written, conf,
                            listener, analyze, statistics, replanner, information_passing, cache, reuse,
                            shared))
        if statistics is not None:
            statistics.settle()
    except BaseException:
        remove_work_dir(storage, record)  # a failed run leaves no half-written stage outputs behind
        if statistics is not None:
            with contextlib.suppress(Exception):  # the run's own failure is the one to report
                statistics.settle()
        raise
    record.seconds = time.perf_counter() - started
    record.result_rows = record.stages[-1].rows_written
    if statistics is not None:
        record.statistics_seconds = statistics.seconds
        record.statistics_collected = statistics.collected_tables
    return record


@dataclass
class _DagRun:
    """What running one DAG's stages needs, built once by ``run_dag``."""

    spark: object
    storage: Storage
    dag: StageDag
    settings: Settings
    compiler: StageCompiler
    store: SummaryStore
    ip: IpPlanner
    record: RunRecord
    paths: dict[int, str]
    written: dict[int, int]  # stage id → rows it wrote, as the run goes (the estimator reads it)
    conf: dict[str, str]
    listener: StageListener
    analyze: bool
    statistics: StatisticsCollector | None
    replanner: Replanner | None = None
    information_passing: Callable[[StageDag], IpPlanner] | None = None  # a re-planned DAG's planner
    cache: StageCache | None = None
    reuse: bool = False  # entries of earlier commands are read too (--reuse)
    shared: frozenset[str] = frozenset()  # cache keys of stages other queries of a batch compute too

    def finished_twins(self, stage: Stage, done: set[int]) -> list[int]:
        """Summary pre-passes that ran before a re-plan over the same subplan as ``stage``."""
        if not self.record.replans:
            return []
        key = stage_plan_key(self.dag, stage.id)
        return [s.id for s in self.dag.stages if s.id in done and s.id != stage.id and s.operator == "SCAN"
                and stage_plan_key(self.dag, s.id) == key]

    def cache_key(self, stage: Stage) -> CacheKey | None:
        return self.cache.stage_key(self.dag, stage.id, self.settings) if self.cache is not None else None

    def replan(self, stage: Stage, done: set[int]) -> bool:
        """Offer the replanner the run so far; True when it gave a new DAG, which this run now follows."""
        if self.replanner is None or stage is self.dag.final:
            return False
        if self.statistics is not None:
            self.statistics.settle_tables()  # the statistics earlier stages collected inform the re-plan
        distinct = self.statistics.output_distinct() if self.statistics is not None else {}
        outcome = self.replanner.after_stage(self.dag, stage, self.written[stage.id], frozenset(done),
                                             dict(self.written), distinct)
        if outcome is None:
            return False
        dag, note = outcome
        self.record.replans.append(note)
        if dag is None:
            return False
        self.dag = self.record.dag = dag
        for new in dag.stages:
            self.paths.setdefault(new.id, join(self.record.work_dir, f"stage-{new.id}"))
        self.record.result_path = self.paths[dag.final.id]
        self.ip = self.information_passing(dag)
        if self.statistics is not None:
            self.statistics.follow(dag, plan_statistics(dag, self.statistics.repository, self.storage,
                                                        self.settings.stats_columns))
        return True


@dataclass
class _Fused:
    """A stage fused into its consumer (``ip/staging.py``): compiled inside the consumer's plan and run in its
    job, so its probes' row counts come from that job."""

    stage: Stage
    decisions: StageDecisions
    probes: list[ProbeRecord]


def _run_stages(run_state: _DagRun) -> None:
    spark, dag, settings, compiler, store, ip = (run_state.spark, run_state.dag, run_state.settings,
                                                 run_state.compiler, run_state.store, run_state.ip)
    record, paths, written, conf = run_state.record, run_state.paths, run_state.written, run_state.conf
    listener, analyze, statistics = run_state.listener, run_state.analyze, run_state.statistics
    storage, table_sizes = run_state.storage, Sizes(run_state.storage)
    run_id = record.run_id
    fixed_tasks = settings.shuffle_partitions
    cores = spark.sparkContext.defaultParallelism if settings.reducer_bytes > 0 else fixed_tasks
    bytes_written: dict[int, int] = {}  # stage id → bytes of the output it wrote (what Hive's rule reads)
    fused_into: dict[int, list[_Fused]] = {}  # consumer stage id → the stages fused into its job

    def read_bytes(leaf: Node) -> int | None:
        return bytes_written.get(leaf.stage_id) if isinstance(leaf, StageRead) else None

    done: set[int] = set()  # stages run, fused into a run one or skipped: a re-planned DAG holds them too
    inexact: set[int] = set()  # stages whose output lacks rows its subplan has (pruned by another stage's summary)
    position = 0
    with sql_conf(spark, conf):
        while position < len(dag.stages):
            stage = dag.stages[position]
            position += 1
            index = position
            if stage.id in done:
                continue
            done.add(stage.id)
            group = f"aipq-{run_id}-{stage.name}"
            if statistics is not None and ip.estimator is not None and ip.has_edges(stage):
                # the estimator reads table statistics from the repository: decide on what earlier stages
                # collected; a stage with no edge to decide on does not wait for the storing thread
                statistics.settle_tables()
            if stage.operator == "SCAN":
                for twin in run_state.finished_twins(stage, done):
                    store.alias(twin, stage.id)
            deciding = time.perf_counter()
            decisions = ip.decide(stage, store.infos())
            decision_seconds = time.perf_counter() - deciding
            if stage.operator == "SCAN" and all(build.key in store.built for build in decisions.builds):
                continue  # a summary pre-pass whose summaries no edge wants, or built before a re-plan
            inputs = fused_into.pop(stage.id, [])  # the stages fused into this one's job, transitively
            cache_key = run_state.cache_key(stage)
            hit = run_state.cache.lookup(cache_key.key, run_state.reuse, _parquet_rows(spark)) \
                if cache_key is not None else None
            if hit is not None:  # its rows as an earlier statement or run wrote them: exact, read as they are
                paths[stage.id] = hit.path
                written[stage.id], bytes_written[stage.id] = hit.rows, hit.bytes
                whose = "this" if hit.command == run_state.cache.command else "an earlier"
                started = time.perf_counter()
                built = _summaries_of_output(spark, store, stage, decisions, hit.path, group)
                record.stages.append(StageMetrics(stage.id, stage.operator, time.perf_counter() - started, hit.rows,
                                                  hit.bytes, decisions=built, decision_seconds=decision_seconds,
                                                  summaries=[store.built[b.key] for b in built.builds],
                                                  staging=f"reused from the stage-output cache ({hit.description} "
                                                          f"of {whose} command)", reused=True))
                continue
            shared = cache_key is not None and cache_key.key in run_state.shared
            if shared:  # another query of the batch reads it too: kept whole, then read from the cache
                decisions = keeping_output_exact(decisions)
            if drops_output_rows(decisions) or set(dag.dependency.get(stage.id, [])) & inexact:
                inexact.add(stage.id)
            written_out, why = staging.materialized(dag, stage, settings, bool(decisions.builds))
            if shared:
                written_out, why = True, "shared: another query of the batch computes the same subplan"
            broadcasts = measured_broadcasts(stage.plan, runtime_broadcast_threshold(settings), table_sizes,
                                             read_bytes)
            if not written_out:
                fused = _Fused(stage, decisions, [])
                compiler.fused[stage.id] = functools.partial(
                    _stage_frame, compiler, store, stage, decisions, fused.probes, group, statistics, True,
                    broadcasts)
                consumer = next(iter(dag.dataflow.get(stage.id, [])))
                fused_into.setdefault(consumer, []).extend([fused, *inputs])
                record.stages.append(StageMetrics(stage.id, stage.operator, 0.0, 0, 0, probes=fused.probes,
                                                  decisions=decisions, decision_seconds=decision_seconds,
                                                  materialized=False, staging=why,
                                                  measured_broadcasts=_broadcast_notes(stage, broadcasts,
                                                                                       read_bytes)))
                continue
            listener.stage_started(stage, index, len(dag.stages), group)
            tasks = reducers.reduce_tasks(settings, reducers.stage_input_bytes(stage, bytes_written.get, table_sizes),
                                          cores)
            stage_conf = {"spark.sql.shuffle.partitions": str(tasks)} if tasks != fixed_tasks else {}
            if inputs:  # a job computing fused stages too: Spark adapts inside it
                stage_conf.update(fused_job_conf(settings))
            with sql_conf(spark, stage_conf):
                text = (record.result_format, record.output_names) if stage is dag.final else None
                run = functools.partial(_run_stage, spark, storage, compiler, store, stage, decisions, paths[stage.id],
                                        group, is_final=stage is dag.final,
                                        write=_output_is_read(stage, decisions, analyze), fused=inputs, text=text,
                                        partition_by=dag.partition_by if stage is dag.final else (),
                                        write_format=dag.write_format if stage is dag.final else "parquet",
                                        broadcasts=broadcasts)
                metrics = _run_recovering(run, stage, inputs, statistics, compiler, spark, storage, paths[stage.id],
                                          broadcasts)
            # an exact summary is the written output itself, read where it was written: such a stage stays put
            if cache_key is not None and stage.id not in inexact and \
                    not any(build.kind == "exact" for build in decisions.builds):
                kept = run_state.cache.keep(cache_key, paths[stage.id], metrics.rows_written, metrics.bytes_written,
                                            f"{stage.name} {stage.operator}")
                if kept is not None:
                    paths[stage.id] = kept.path
                    store.offer(stage.id, kept.path)
            faults.reached("stage-written")
            metrics.reduce_tasks = tasks
            metrics.staging = why
            metrics.measured_broadcasts = _broadcast_notes(stage, broadcasts, read_bytes)
            if analyze:
                metrics.spark_joins = jvm.join_strategies(spark, group)
            bytes_written[stage.id] = metrics.bytes_written
            probes = metrics.probes + [p for fused in inputs for p in fused.probes]
            if analyze:
                for probe in probes:
                    store.measure_false_positives(probe)
            for probe in probes:
                probe.raw = None
            metrics.decision_seconds = decision_seconds
            written[stage.id] = metrics.rows_written
            record.stages.append(metrics)
            listener.stage_finished(metrics)
            faults.reached("between-stages")
            if not fused_into and run_state.replan(stage, done):
                dag, ip, position = run_state.dag, run_state.ip, 0


def _parquet_rows(spark) -> Callable[[str], int]:
    """The rows of parquet files at a path (from their footers), to check a cached stage output before reading it."""
    return lambda path: spark.read.parquet(path).count()


# What Spark says when the driver ran out of memory building a broadcast join's table.
BROADCAST_OUT_OF_MEMORY = "Not enough memory to build and broadcast the table"


def _run_recovering(run: Callable[..., StageMetrics], stage: Stage, inputs: list[_Fused],
                    statistics: StatisticsCollector | None, compiler: StageCompiler, spark, storage: Storage,
                    path: str, broadcasts: dict[int, str]) -> StageMetrics:
    """Run a stage so that neither of aipq's own choices fails it: a join input aipq broadcast that the driver had
    not the memory for runs again with repartition joins, and piggybacked statistics that fail run it again
    without them."""
    def start_over() -> None:
        storage.delete(path)
        for fused in inputs:
            fused.probes.clear()

    try:
        injected = compiler.broadcasts_allowed and _broadcasts_anything(stage, inputs, broadcasts)
        if injected and faults.failing("broadcast"):
            raise ExecutionError(f"stage {stage.name} ({stage.operator}) failed on Spark: {BROADCAST_OUT_OF_MEMORY} "
                                 "(AIPQ_FAIL_AT)")
        return run(statistics=statistics)
    except BadInputError:
        raise
    except AipqError as error:
        if BROADCAST_OUT_OF_MEMORY in error.message and compiler.broadcasts_allowed:
            warn(f"stage {stage.name} ({stage.operator}): the driver had not the memory to broadcast a join input; "
                 f"the stage runs again with repartition joins (the driver's memory is AIPQ_DRIVER_MEMORY, "
                 f"{spark.conf.get('spark.driver.memory', '1g')})")
            start_over()
            broadcasts.clear()
            compiler.broadcasts_allowed = False
            try:
                with sql_conf(spark, {"spark.sql.adaptive.autoBroadcastJoinThreshold": "-1"}):
                    return _run_recovering(run, stage, inputs, statistics, compiler, spark, storage, path,
                                           broadcasts)
            finally:
                compiler.broadcasts_allowed = True
        if statistics is None or not any(statistics.observes(s) for s in [stage, *(f.stage for f in inputs)]):
            raise
        statistics.disable(error.message)  # statistics never fail a query: run the stage without
        start_over()
        return run(statistics=statistics)


def _broadcasts_anything(stage: Stage, inputs: list[_Fused], broadcasts: dict[int, str]) -> bool:
    """Whether a stage's job (its fused stages' too) joins a side map-side, as planned or as measured."""
    joins = [n for s in [stage, *(f.stage for f in inputs)] for n in s.plan.walk() if isinstance(n, Join)]
    return bool(broadcasts) or any(j.physical == "broadcast" for j in joins)


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


def _summaries_of_output(spark, store: SummaryStore, stage: Stage, decisions: StageDecisions, path: str,
                         group: str) -> StageDecisions:
    """The summaries a reused stage would have built while writing: the Bloom filters the cache entry offers
    (built when it was written), the others from its cached output in one pass, observed as a stage's write
    observes them (later stages' edges count on them). What was built, as the stage's decisions."""
    left = store.take_offered(path, decisions.builds)
    if not left:
        return StageDecisions(stage.id, builds=decisions.builds)
    spark.sparkContext.setJobGroup(group, f"aipq {stage.name} summaries of its cached output", interruptOnCancel=True)
    try:
        df = spark.read.parquet(path)
        observation = Observation(f"{group}-summaries")
        df.observe(observation, F.count(F.lit(1)).alias("rows"), *store.build_columns(df, left, {})) \
            .write.format("noop").mode("overwrite").save()
        values = jvm.observed_metrics(observation, keep_in_jvm=store.jvm_resident(left))
        store.collect(df, left, observation, values, {})
    except AipqError:
        raise
    except Exception as error:
        raise spark_error(error, f"stage {stage.name} (summaries of its cached output at {path})") from error
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return StageDecisions(stage.id, builds=decisions.builds)


def fused_job_conf(settings: Settings) -> dict[str, str]:
    """Spark's adaptive execution inside a job that computes fused stages: partitions coalesced, skew split, and
    a small intermediate result broadcast (within the broadcast threshold, with ``--runtime-broadcast on``)."""
    threshold = str(runtime_broadcast_threshold(settings) or -1)
    return {"spark.sql.adaptive.enabled": "true", "spark.sql.adaptive.autoBroadcastJoinThreshold": threshold}


def _output_is_read(stage: Stage, decisions: StageDecisions, analyze: bool) -> bool:
    """Whether anything reads what ``stage`` writes. No stage reads a summary pre-pass (SCAN) stage: it runs for
    the summary its write builds, so its rows go to Spark's ``noop`` sink, unless an exact summary is its written
    keys or ``--analyze`` compares its summaries with them (``SummaryStore.measure_false_positives``)."""
    return stage.operator != "SCAN" or analyze or any(build.kind == "exact" for build in decisions.builds)


def _is_partition_column(scan: Scan, column: str) -> bool:
    """A summary of this scan column can prune whole partitions: it is one of the table's partition columns."""
    return scan.table.partitioned and dict(scan.columns + scan.filter_only).get(column) in scan.table.partition_columns


def _stage_frame(compiler: StageCompiler, store: SummaryStore, stage: Stage, decisions: StageDecisions,
                 probes: list[ProbeRecord], group: str, statistics: StatisticsCollector | None,
                 fused: bool = False, broadcasts: dict[int, str] | None = None):
    """The stage's rows as a DataFrame: its plan compiled with its probes (P_m) on its inputs and, for a sibling's
    summary, on its output, the statistics' observers on its first scans, and ``broadcasts`` (its joins turned
    map-side by measured input sizes). A fused stage is compiled inside its consumer's plan; the hooks of both are
    kept, as their node ids differ."""
    by_input: dict[int, list[SummaryUse]] = {}
    by_partition: dict[int, list[SummaryUse]] = {}
    scans = {id(n): n for n in stage.plan.walk() if isinstance(n, Scan)}
    for use in decisions.uses:
        if use.target.place == "input" and use.target.node_id is not None:
            scan = scans.get(use.target.node_id)
            if scan is not None and _is_partition_column(scan, use.target.column):
                by_partition.setdefault(use.target.node_id, []).append(use)
            else:
                by_input.setdefault(use.target.node_id, []).append(use)
    compiler.partition_pruners.update({
        node_id: (lambda scan, uses=uses: store.partitions_left(scan, uses, probes))
        for node_id, uses in by_partition.items()})
    compiler.input_hooks.update({
        node_id: (lambda df, uses=uses, n=node_id: store.probe(df, uses, probes, f"{group}-in{n}"))
        for node_id, uses in by_input.items()})
    # a broadcast join may skip its other input when the broadcast side is empty: its scans may stop early
    compiler.scan_observers.update(statistics.scan_observers(stage, fused or bool(broadcasts)) if statistics else {})
    compiler.measured_broadcasts.update(broadcasts or {})
    df = compiler.compile(stage.plan)
    output_uses = [u for u in decisions.uses if u.target.place == "output"]
    if output_uses:  # sibling-to-sibling: prune before writing
        df = store.probe(df, output_uses, probes, f"{group}-out")
    return df


def _run_stage(spark, storage: Storage, compiler: StageCompiler, store: SummaryStore, stage: Stage,
               decisions: StageDecisions, path: str, group: str, is_final: bool,
               statistics: StatisticsCollector | None = None, write: bool = True,
               fused: list[_Fused] | None = None, text: tuple[str, tuple[str, ...]] | None = None,
               partition_by: tuple[str, ...] = (), write_format: str = "parquet",
               broadcasts: dict[int, str] | None = None) -> StageMetrics:
    """Run one stage's job: its rows written as parquet (or, for the result with ``text`` = (csv or json, column
    names), in that form; with ``partition_by``, a folder per value as Hive lays out partitions), its summaries
    built and its statistics observed in the same pass."""
    sc = spark.sparkContext
    sc.setJobGroup(group, f"aipq {stage.name} {stage.operator}", interruptOnCancel=True)
    started = time.perf_counter()
    probes: list[ProbeRecord] = []
    try:
        df = _stage_frame(compiler, store, stage, decisions, probes, group, statistics, broadcasts=broadcasts)
        _reset_hooks(compiler)
        if is_final and _final_needs_order(stage):
            df = df.coalesce(1)  # one ordered file: reading it back keeps ORDER BY's order
        observation = Observation(f"{group}-rows")
        # a summary's key sketch is the statistics' sketch of the same column when that is observed anyway
        sketched = statistics.output_sketch_names(stage, df) if statistics else {}
        if statistics:
            df = statistics.observe_output(stage, df)
        df = df.observe(observation, F.count(F.lit(1)).alias("rows"),
                        *store.build_columns(df, decisions.builds, sketched))
        if text is not None and text[0] in TEXT_FORMATS:
            write_text_frame(df, text[1], text[0], path)
        elif write:
            writer = df.write.partitionBy(*partition_by) if partition_by else df.write
            writer.format(write_format).mode("errorifexists").save(path)
        else:
            df.write.format("noop").mode("overwrite").save()
        compiler.stage_schemas[stage.id] = df.schema
        output_bytes = total_bytes(storage, path) or 0
        values = jvm.observed_metrics(observation, keep_in_jvm=store.jvm_resident(decisions.builds))
        if statistics:
            values.update(statistics.output_values(stage))
        rows = int(values["rows"])
        seconds = time.perf_counter() - started
        store.collect(df, decisions.builds, observation, values, sketched)
        if statistics is not None:
            statistics.stage_finished(stage, decisions, values, rows, output_bytes)
        counted = probes + [p for f in fused or [] for p in f.probes]  # fused stages' probes ran in this job
        marks = [p.mark for p in counted if p.mark is not None]
        filter_counts = jvm.filter_row_counts(spark, group, marks) if marks else {}
        for probe in counted:
            probe.finish(filter_counts)
        figures = job_group_figures(spark, group)
    except AipqError:
        raise
    except Exception as error:
        raise spark_error(error, f"stage {stage.name} ({stage.operator})") from error
    finally:
        _reset_hooks(compiler)
        sc.setLocalProperty("spark.jobGroup.id", None)
    return StageMetrics(stage.id, stage.operator, seconds, rows, output_bytes, figures,
                        [store.built[b.key] for b in decisions.builds], probes, decisions)


def _reset_hooks(compiler: StageCompiler) -> None:
    """The compiled stage's hooks are done with: the next stage's plan has its own."""
    compiler.input_hooks, compiler.scan_observers, compiler.partition_pruners = {}, {}, {}
    compiler.measured_broadcasts = {}


def spark_error(error: Exception, where: str) -> Exception:
    """A Spark failure as an aipq error: analysis errors are the query's fault (exit 2), others runtime (1)."""
    from pyspark.errors import AnalysisException

    first = java_message(error)
    missing = _MISSING_FILE.search(first)
    if missing and f"/{stage_cache.FOLDER}/" in missing.group(1):
        return ExecutionError(f"{where} failed: a stage output in the stage-output cache was removed while this "
                              f"command read it ({missing.group(1)})",
                              hint="another command cleared the cache (aipq cache clear); run this one again")
    if missing or "FileNotFoundException" in first:
        where_file = f" ({missing.group(1)})" if missing else ""
        return ExecutionError(f"{where} failed: a data file of a table is gone{where_file}",
                              hint="the table's files changed while this command read them (another command "
                                   "overwrote it) or after it was registered: run it again, register the table "
                                   "again with `aipq table add`, or restore the files")
    if isinstance(error, AnalysisException):
        text = re.sub(r"(\s*SQLSTATE: \w+)?;?( line \d+ pos \d+;?)?\s*$", "", first)
        condition = getattr(error, "getCondition", lambda: None)() or ""
        hint = ANALYSIS_HINTS.get(condition.split(".")[0], "check the expressions of the query")
        error_out = BadInputError(f"invalid query ({where}): {text}", hint=hint)
        named = (re.search(r"routine `([^`]+)`", text) or re.search(r"`(\w+)` requires", text)
                 or re.search(r'Cannot resolve "\(?(\w+)', text) or re.search(r"`(\w+)`", text))
        if named:
            error_out.missing_name = named.group(1)  # where the query names it: the error's position
        return error_out
    return ExecutionError(f"{where} failed on Spark: {first}", hint="rerun with --debug for the full trace")


_MISSING_FILE = re.compile(r"(?:FILE_NOT_EXIST|PATH_NOT_FOUND|FileNotFoundException)\S*[^/]*?((?:file:)?/[^\s`'\"]+)")

ANALYSIS_HINTS = {
    "UNRESOLVED_ROUTINE": "no function of that name in Spark SQL: https://spark.apache.org/docs/latest/api/sql/",
    "DATATYPE_MISMATCH": "check the types of the expressions involved (CAST converts between types)",
    "WRONG_NUM_ARGS": "check the number of arguments: https://spark.apache.org/docs/latest/api/sql/",
}


def remove_work_dir(storage: Storage, record: RunRecord) -> None:
    storage.delete(record.work_dir)
