"""One stage's Spark job: its plan compiled with the probes of the summaries it uses and the observers of the
statistics it collects, its rows written (or sent to Spark's ``noop`` sink), and what it measured; run again
when one of aipq's own choices (a broadcast, piggybacked statistics) fails it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Observation
from pyspark.sql.types import StructField, StructType

from aipq import faults
from aipq.engine import jvm, stage_cache
from aipq.engine.compile import StageCompiler
from aipq.engine.jvm import LazyPlan
from aipq.engine.records import StageMetrics
from aipq.engine.session import java_message, sql_conf
from aipq.engine.sink import TEXT_FORMATS, write_text_frame
from aipq.engine.statistics import StatisticsCollector
from aipq.engine.storage import Storage
from aipq.engine.summaries import ProbeRecord, SummaryStore
from aipq.engine.udf_errors import python_udf_failure
from aipq.errors import AipqError, BadInputError, ExecutionError, warn
from aipq.files import total_bytes
from aipq.ip.decisions import StageDecisions, SummaryUse
from aipq.planner.logical import Join, Scan, Sort
from aipq.planner.stages import Stage

# What Spark says when the driver ran out of memory building a broadcast join's table.
BROADCAST_OUT_OF_MEMORY = "Not enough memory to build and broadcast the table"
# Spark's adaptive execution hashes a join input of at most this many shuffled bytes per reduce task (0: never).
HASH_JOIN_SETTING = "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold"
TASK_OUT_OF_MEMORY = ("UNABLE_TO_ACQUIRE_MEMORY", "OutOfMemoryError")
# What Spark says when a job's results sent to the driver pass its limit.
RESULT_TOO_LARGE = "spark.driver.maxResultSize"


@dataclass
class Fused:
    """A stage fused into its consumer (``ip/staging.py``): compiled inside the consumer's plan and run in its
    job, so its probes' row counts come from that job."""

    stage: Stage
    decisions: StageDecisions
    probes: list[ProbeRecord]


@dataclass(frozen=True)
class CollectedRows:
    """A result collected by its stage's job rather than written: its rows as tuples and their Spark schema."""

    rows: list[tuple]
    schema: StructType

    def frame(self, spark, names: list[str]):
        """The rows as a DataFrame of ``spark``, its columns named ``names``, with the types Spark gave them."""
        schema = StructType([StructField(name, column.dataType, column.nullable)
                             for name, column in zip(names, self.schema.fields, strict=True)])
        return spark.createDataFrame(self.rows, schema, verifySchema=False)


@dataclass
class StageJob:
    """What one stage's job writes, where and how."""

    stage: Stage
    decisions: StageDecisions
    path: str
    group: str  # the Spark job group its jobs run under
    is_final: bool = False
    write: bool = True  # its rows written; else sent to Spark's noop sink (a pre-pass nothing reads)
    fused: list[Fused] = field(default_factory=list)  # the stages computed inside its job
    text: tuple[str, tuple[str, ...]] | None = None  # the result as csv or json: (format, column names)
    partition_by: tuple[str, ...] = ()  # the result as a folder per value, as Hive lays out partitions
    write_format: str = "parquet"
    broadcasts: dict[int, str] = field(default_factory=dict)  # joins turned map-side by measured input sizes
    collect: bool = False  # the result's rows come back to the driver instead of being written (a small result)
    collected: CollectedRows | None = None  # the rows it collected, once it ran

    @property
    def stages(self) -> list[Stage]:
        return [self.stage, *(f.stage for f in self.fused)]


class StageRunner:
    """Runs stages' jobs on one session, with the run's compiler (stage outputs by path, fused stages' frames)
    and summary store."""

    def __init__(self, spark, storage: Storage, compiler: StageCompiler, store: SummaryStore):
        self.spark = spark
        self.storage = storage
        self.compiler = compiler
        self.store = store
        # a table column's [min, max] where the statistics know it (None: never known)
        self.column_bounds: Callable[[Scan, str], tuple[object, object] | None] | None = None

    # ---- the stage's rows as a DataFrame ----------------------------------------------------------------------
    def frame(self, stage: Stage, decisions: StageDecisions, probes: list[ProbeRecord], group: str,
              statistics: StatisticsCollector | None, broadcasts: dict[int, str] | None = None):
        """The stage's rows as a DataFrame (``plan``, analysed)."""
        return self.plan(stage, decisions, probes, group, statistics, False, broadcasts).frame()

    def plan(self, stage: Stage, decisions: StageDecisions, probes: list[ProbeRecord], group: str,
             statistics: StatisticsCollector | None, fused: bool = False,
             broadcasts: dict[int, str] | None = None) -> LazyPlan:
        """The stage's rows: its plan compiled with its probes (P_m) on its inputs and, for a sibling's summary,
        on its output, the statistics' observers on its first scans, and ``broadcasts`` (its joins turned
        map-side by measured input sizes). A fused stage is compiled inside its consumer's plan; the hooks of both
        are kept, as their node ids differ."""
        self._install_probes(stage, decisions, probes, group)
        compiler = self.compiler
        # a broadcast join may skip its other input when the broadcast side is empty: its scans may stop early
        compiler.scan_observers.update(statistics.scan_observers(stage, fused or bool(broadcasts))
                                       if statistics else {})
        compiler.measured_broadcasts.update(broadcasts or {})
        plan = compiler.plan(stage.plan)
        output_uses = [u for u in decisions.uses if u.target.place == "output"]
        if output_uses:  # sibling-to-sibling: prune before writing
            return LazyPlan.of(self.store.probe(plan.frame(), output_uses, probes, f"{group}-out"))
        return plan

    def _install_probes(self, stage: Stage, decisions: StageDecisions, probes: list[ProbeRecord],
                        group: str) -> None:
        """The compiler's hooks for the summaries the stage probes its inputs with: a partition column's prunes
        whole partitions (it filters rows where a transfer pass kept the scan's rows), any other's filters the
        scan's rows."""
        by_input: dict[int, list[SummaryUse]] = {}
        by_partition: dict[int, list[SummaryUse]] = {}
        scans = {id(n): n for n in stage.plan.walk() if isinstance(n, Scan)}
        for use in decisions.uses:
            if use.target.place == "input" and use.target.node_id is not None:
                scan = scans.get(use.target.node_id)
                prunes = (scan is not None and _is_partition_column(scan, use.target.column)
                          and not self.compiler.kept.kept(scan))
                chosen = by_partition if prunes else by_input
                chosen.setdefault(use.target.node_id, []).append(use)
        store = self.store
        self.compiler.partition_pruners.update({
            node_id: (lambda scan, uses=uses: store.partitions_left(scan, uses, probes))
            for node_id, uses in by_partition.items()})
        self.compiler.input_hooks.update({
            node_id: (lambda df, uses=uses, n=node_id: store.probe(df, uses, probes, f"{group}-in{n}",
                                                                   self._key_domain(scans.get(n))))
            for node_id, uses in by_input.items()})

    def _key_domain(self, scan: Scan | None) -> Callable[[str], tuple[object, object] | None]:
        """A probed scan's columns' [min, max] as the statistics know them, so that a summary's key range over
        most of a column is not pushed into the scan (``narrows``)."""
        bounds = self.column_bounds
        if scan is None or bounds is None:
            return lambda column: None
        sources = dict(scan.columns + scan.filter_only)
        return lambda column: bounds(scan, sources[column]) if column in sources else None

    def reset_hooks(self) -> None:
        """The compiled stage's hooks are done with: the next stage's plan has its own."""
        compiler = self.compiler
        compiler.input_hooks, compiler.scan_observers, compiler.partition_pruners = {}, {}, {}
        compiler.measured_broadcasts, compiler.one_task_sorts = {}, set()

    # ---- running one job --------------------------------------------------------------------------------------
    def run(self, job: StageJob, statistics: StatisticsCollector | None) -> StageMetrics:
        """Run one stage's job: its rows written, its summaries built and its statistics observed in the same
        pass."""
        stage = job.stage
        sc = self.spark.sparkContext
        sc.setJobGroup(job.group, f"aipq {stage.name} {stage.operator}", interruptOnCancel=True)
        started = time.perf_counter()
        probes: list[ProbeRecord] = []
        try:
            sorted_in_one_task = job.is_final and isinstance(stage.plan, Sort)
            if sorted_in_one_task:  # one ordered file: sorted where it is written
                self.compiler.one_task_sorts = {id(stage.plan)}
            df = self.frame(stage, job.decisions, probes, job.group, statistics, broadcasts=job.broadcasts)
            self.reset_hooks()
            if job.is_final and not sorted_in_one_task and any(isinstance(n, Sort) for n in stage.plan.walk()):
                df = df.coalesce(1)  # one ordered file: reading it back keeps ORDER BY's order
            # a summary's key sketch is the statistics' sketch of the same column when that is observed anyway
            sketched = statistics.output_sketch_names(stage, df) if statistics else {}
            if statistics:
                df = statistics.observe_output(stage, df)
            df, observation = jvm.observe(df, f"{job.group}-rows", ["count(1) AS rows"],
                                          self.store.build_columns(df, job.decisions.builds, sketched))
            self._write(df, job)
            if not job.is_final:  # read back by a later stage
                self.compiler.stage_schemas[stage.id] = df.schema
            return self._measured(job, df, observation, sketched, statistics, probes, started)
        except AipqError:
            raise
        except Exception as error:
            raise spark_error(error, f"stage {stage.name} ({stage.operator})") from error
        finally:
            self.reset_hooks()
            sc.setLocalProperty("spark.jobGroup.id", None)

    @staticmethod
    def _write(df, job: StageJob) -> None:
        if job.collect:
            job.collected = CollectedRows([tuple(row) for row in df.collect()], df.schema)
        elif job.text is not None and job.text[0] in TEXT_FORMATS:
            write_text_frame(df, job.text[1], job.text[0], job.path)
        elif job.write:
            writer = df.write.partitionBy(*job.partition_by) if job.partition_by else df.write
            writer.format(job.write_format).mode("errorifexists").save(job.path)
        else:
            df.write.format("noop").mode("overwrite").save()

    def _measured(self, job: StageJob, df, observation: Observation, sketched: dict,
                  statistics: StatisticsCollector | None, probes: list[ProbeRecord], started: float) -> StageMetrics:
        """What the written job measured: its rows, bytes, summaries, probes' row counts and shuffle."""
        stage, decisions = job.stage, job.decisions
        output_bytes = total_bytes(self.storage, job.path) or 0
        values = jvm.observed_metrics(observation, keep_in_jvm=self.store.jvm_resident(decisions.builds))
        if statistics:
            values.update(statistics.output_values(stage))
        rows = int(values["rows"])
        seconds = time.perf_counter() - started
        self.store.collect(df, decisions.builds, observation, values, sketched)
        if statistics is not None:
            statistics.stage_finished(stage, decisions, values, rows, output_bytes)
        counted = probes + [p for f in job.fused for p in f.probes]  # fused stages' probes ran in this job
        marks = [p.mark for p in counted if p.mark is not None]
        filter_counts = jvm.filter_row_counts(self.spark, job.group, marks) if marks else {}
        for probe in counted:
            probe.finish(filter_counts)
        return StageMetrics(stage.id, stage.operator, seconds, rows, output_bytes,
                            summaries=[self.store.built[b.key] for b in decisions.builds], probes=probes,
                            decisions=decisions, job_group=job.group)

    def run_recovering(self, job: StageJob, statistics: StatisticsCollector | None) -> StageMetrics:
        """Run a stage so that none of aipq's own choices fails it: a join input aipq broadcast that the driver
        had not the memory for runs again with repartition joins, a join input hashed in a reduce task that the
        task had not the memory for runs again sorted, and piggybacked statistics that fail run it again without
        them."""
        try:
            if self.compiler.broadcasts_allowed and _broadcasts_anything(job) and faults.failing("broadcast"):
                raise ExecutionError(f"stage {job.stage.name} ({job.stage.operator}) failed on Spark: "
                                     f"{BROADCAST_OUT_OF_MEMORY} (AIPQ_FAIL_AT)")
            if self._hashes_joins() and faults.failing("hash-join"):
                raise ExecutionError(f"stage {job.stage.name} ({job.stage.operator}) failed on Spark: "
                                     f"{TASK_OUT_OF_MEMORY[0]} (AIPQ_FAIL_AT)")
            if job.collect and faults.failing("result-size"):
                raise ExecutionError(f"stage {job.stage.name} ({job.stage.operator}) failed on Spark: the results "
                                     f"are bigger than {RESULT_TOO_LARGE} (AIPQ_FAIL_AT)")
            return self.run(job, statistics)
        except BadInputError:
            raise
        except AipqError as error:
            if job.collect and RESULT_TOO_LARGE in error.message:
                return self._written_instead(job, statistics)
            if BROADCAST_OUT_OF_MEMORY in error.message and self.compiler.broadcasts_allowed:
                return self._without_broadcasts(job, statistics)
            if self._hashes_joins() and any(sign in error.message for sign in TASK_OUT_OF_MEMORY):
                return self._without_hash_joins(job, statistics)
            if statistics is None or not any(statistics.observes(s) for s in job.stages):
                raise
            statistics.disable(error.message)  # statistics never fail a query: run the stage without
            self._start_over(job)
            return self.run(job, statistics)

    def _written_instead(self, job: StageJob, statistics: StatisticsCollector | None) -> StageMetrics:
        """A result expected small that was larger than the driver takes: written after all, as any other."""
        self._start_over(job)
        job.collect = False
        return self.run_recovering(job, statistics)

    def _without_broadcasts(self, job: StageJob, statistics: StatisticsCollector | None) -> StageMetrics:
        warn(f"stage {job.stage.name} ({job.stage.operator}): the driver had not the memory to broadcast a join "
             f"input; the stage runs again with repartition joins (the driver's memory is AIPQ_DRIVER_MEMORY, "
             f"{self.spark.conf.get('spark.driver.memory', '1g')})")
        self._start_over(job)
        job.broadcasts.clear()
        self.compiler.broadcasts_allowed = False
        try:
            with sql_conf(self.spark, {"spark.sql.adaptive.autoBroadcastJoinThreshold": "-1"}):
                return self.run_recovering(job, statistics)
        finally:
            self.compiler.broadcasts_allowed = True

    def _hashes_joins(self) -> bool:
        """Whether the job about to run may hash a join input per reduce task (adaptive execution converts)."""
        conf = self.spark.conf.get
        return (conf("spark.sql.adaptive.enabled", "false") == "true"
                and conf(HASH_JOIN_SETTING, "0").strip().lower() not in ("0", "0b"))

    def _without_hash_joins(self, job: StageJob, statistics: StatisticsCollector | None) -> StageMetrics:
        warn(f"stage {job.stage.name} ({job.stage.operator}): a join input hashed in a reduce task had not the "
             "memory it needed; the stage runs again with sort-merge joins (--hash-joins off)")
        self._start_over(job)
        with sql_conf(self.spark, {HASH_JOIN_SETTING: "0"}):
            return self.run_recovering(job, statistics)

    def _start_over(self, job: StageJob) -> None:
        self.storage.delete(job.path)
        for fused in job.fused:
            fused.probes.clear()

    # ---- a stage read from the stage-output cache -------------------------------------------------------------
    def summaries_of_output(self, stage: Stage, decisions: StageDecisions, path: str, group: str) -> StageDecisions:
        """The summaries a reused stage would have built while writing: the Bloom filters the cache entry offers
        (built when it was written), the others from its cached output in one pass, observed as a stage's write
        observes them (later stages' edges count on them). What was built, as the stage's decisions."""
        store, spark = self.store, self.spark
        left = store.take_offered(path, decisions.builds)
        if not left:
            return StageDecisions(stage.id, builds=decisions.builds)
        spark.sparkContext.setJobGroup(group, f"aipq {stage.name} summaries of its cached output",
                                       interruptOnCancel=True)
        try:
            df = spark.read.parquet(path)
            observed, observation = jvm.observe(df, f"{group}-summaries", ["count(1) AS rows"],
                                                store.build_columns(df, left, {}))
            observed.write.format("noop").mode("overwrite").save()
            values = jvm.observed_metrics(observation, keep_in_jvm=store.jvm_resident(left))
            store.collect(df, left, observation, values, {})
        except AipqError:
            raise
        except Exception as error:
            raise spark_error(error, f"stage {stage.name} (summaries of its cached output at {path})") from error
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        return StageDecisions(stage.id, builds=decisions.builds)

    def parquet_rows(self) -> Callable[[str], int]:
        """The rows of parquet files at a path (from their footers), to check a cached output before reading it."""
        return lambda path: self.spark.read.parquet(path).count()


def output_is_read(stage: Stage, decisions: StageDecisions, analyze: bool) -> bool:
    """Whether anything reads what ``stage`` writes. No stage reads a summary pre-pass (SCAN) stage: it runs for
    the summary its write builds, so its rows go to Spark's ``noop`` sink, unless an exact summary is its written
    keys or ``--analyze`` compares its summaries with them (``SummaryStore.measure_false_positives``)."""
    return stage.operator != "SCAN" or analyze or any(build.kind == "exact" for build in decisions.builds)


def _is_partition_column(scan: Scan, column: str) -> bool:
    """A summary of this scan column can prune whole partitions: it is one of the table's partition columns."""
    return scan.table.partitioned and dict(scan.columns + scan.filter_only).get(column) in scan.table.partition_columns


def _broadcasts_anything(job: StageJob) -> bool:
    """Whether a stage's job (its fused stages' too) joins a side map-side, as planned or as measured."""
    joins = [n for s in job.stages for n in s.plan.walk() if isinstance(n, Join)]
    return bool(job.broadcasts) or any(j.physical == "broadcast" for j in joins)


def spark_error(error: Exception, where: str) -> Exception:
    """A Spark failure as an aipq error: analysis errors are the query's fault (exit 2), others runtime (1)."""
    from pyspark.errors import AnalysisException

    udf = python_udf_failure(error)
    if udf is not None:
        failure = ExecutionError(f"{where} failed: a Python UDF raised {udf.exception}"
                                 + (f" ({udf.where})" if udf.where else ""),
                                 hint="fix the UDF or the rows it fails on; --debug shows its Python traceback")
        failure.add_note(f"the UDF's Python traceback (in Spark's Python worker):\n{udf.traceback}")
        return failure
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
        return _analysis_error(error, first, where)
    return ExecutionError(f"{where} failed on Spark: {first}", hint="rerun with --debug for the full trace")


def _analysis_error(error: Exception, first: str, where: str) -> BadInputError:
    text = re.sub(r"(\s*SQLSTATE: \w+)?;?( line \d+ pos \d+;?)?\s*$", "", first)
    condition = getattr(error, "getCondition", lambda: None)() or ""
    hint = ANALYSIS_HINTS.get(condition.split(".")[0], "check the expressions of the query")
    error_out = BadInputError(f"invalid query ({where}): {text}", hint=hint)
    named = (re.search(r"routine `([^`]+)`", text) or re.search(r"`(\w+)` requires", text)
             or re.search(r'Cannot resolve "\(?(\w+)', text) or re.search(r"`(\w+)`", text))
    if named:
        error_out.missing_name = named.group(1)  # where the query names it: the error's position
    return error_out


_MISSING_FILE = re.compile(r"(?:FILE_NOT_EXIST|PATH_NOT_FOUND|FileNotFoundException)\S*[^/]*?((?:file:)?/[^\s`'\"]+)")

ANALYSIS_HINTS = {
    "UNRESOLVED_ROUTINE": "no function of that name in Spark SQL: https://spark.apache.org/docs/latest/api/sql/",
    "DATATYPE_MISMATCH": "check the types of the expressions involved (CAST converts between types)",
    "WRONG_NUM_ARGS": "check the number of arguments: https://spark.apache.org/docs/latest/api/sql/",
}
