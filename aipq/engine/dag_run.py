"""What one run of a stage DAG is given (``RunOptions``, a ``StageListener``, a ``Reoptimizer``) and the state
its steps share (``DagRun``; ``StageStep``, one stage on its way through them): its work directory and paths,
its IP planner, the rows and bytes each stage wrote, the stages fused into a consumer's job."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from aipq.config import Settings
from aipq.engine import jvm
from aipq.engine.adaptive_joins import hash_join_bytes
from aipq.engine.compile import StageCompiler
from aipq.engine.context import RunContext
from aipq.engine.pass_job import PassJob
from aipq.engine.records import RunRecord, StageMetrics
from aipq.engine.session import stage_sql_conf, table_rows, user_runtime_conf
from aipq.engine.sink import TEXT_FORMATS
from aipq.engine.stage_cache import CacheKey, StageCache
from aipq.engine.stage_job import Fused, StageRunner
from aipq.engine.statistics import StatisticsCollector
from aipq.engine.storage import join
from aipq.engine.summaries import SummaryStore
from aipq.engine.work_dirs import new_work_dir
from aipq.estimator.edge_inputs import RunState, SessionFacts, adaptive_estimator
from aipq.estimator.parameters import PAGE_BYTES, parse_memory, sort_buffer_pages
from aipq.files import FileSource, Sizes
from aipq.ip.candidates import distinct_bound
from aipq.ip.decisions import StageDecisions
from aipq.ip.planner import IpPlanner
from aipq.ip.strategies import PredicateTransfer, Strategy
from aipq.planner.logical import Node
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
    collect_rows: int = 0  # a final stage expected to have at most this many rows sends them to the driver



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
    lookups, not sparkContext.getConf(), which copies the whole conf over py4j on every run)."""
    shape = jvm.cluster_shape(spark)
    return SessionFacts(table_rows=lambda entry: table_rows(spark, files, entry), files=files,
                        parallelism=shape.task_slots, executors=shape.executors, executor_cores=shape.executor_cores,
                        executor_memory=shape.executor_memory,
                        memory_fraction=float(spark.conf.get("spark.memory.fraction", "0.6")))



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

