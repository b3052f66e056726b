"""The statistics collector (the paper's piggybacked collection, section 3.3): statistics computed by the
query's own scans and stage-output writes, in the same pass, then stored in the repository. A scan's statistics
come from ``jvm.ColumnSketcher``, an accumulator fed by an always-true predicate on the raw read, which keeps the
scan in generated code (over a columnar scan, the session extension ``aipq.spark.SketchBatches`` feeds it batch
by batch instead); stage outputs' keys are sketched by another such predicate in the write's generated code
(``observe_output``). Spark merges the tasks' sketches (HLL sketches union losslessly).

Per table: rows, bytes, files, splits. Per collected column: HLL sketch (lg_k configurable), NDV estimate,
nulls, average width (from the rows), min and max: from the parquet footers' row-group statistics (no data read;
unknown for a column some row group has none for), else, for other formats, observed from the rows in the same
pass. Per stage output: rows, bytes and the NDV of the keys its consumer joins on, under a canonical key of the
stage's subplan. A table's observation counts only if it saw every row (a LIMIT or an empty broadcast side can
stop a scan early): its row count must equal the table's.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from aipq.catalog import TableEntry
from aipq.engine import jvm
from aipq.engine.context import RunContext
from aipq.engine.footers import FooterStatistics, footer_statistics
from aipq.engine.session import read_table, table_rows
from aipq.errors import AipqError, warn
from aipq.files import FileSource
from aipq.ip.decisions import StageDecisions, drops_output_rows
from aipq.planner.logical import Join, Limit, Scan
from aipq.planner.stages import Stage, StageDag
from aipq.stats import sketches
from aipq.stats.fingerprint import data_files
from aipq.stats.plan_key import stage_plan_key, tables_under
from aipq.stats.planner import TableNeed, plan_statistics
from aipq.stats.repository import ColumnStats, StageStats, StatsRepository, TableStats

_FOOTER_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aipq-footers")
# Storing statistics (reading the sketches from the JVM, NDV estimates, the subplan's key, repository writes:
# 0.07 s per TPC-H Q5 run on this machine) overlaps the next stage's Spark job. Tables and stage outputs have a
# thread each, so that the estimator, which waits for tables' statistics (``settle_tables``), never waits behind
# a stage's.
_STORER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aipq-stats")
_STAGE_STORER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aipq-stage-stats")
_SECONDS_LOCK = threading.Lock()

FIXED_WIDTHS = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8, "float": 4, "double": 8, "date": 4,
                "timestamp": 8, "timestamp_ntz": 8, "boolean": 1}


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _fixed_width(data_type: str) -> float | None:
    if data_type in FIXED_WIDTHS:
        return float(FIXED_WIDTHS[data_type])
    decimal = re.fullmatch(r"decimal\((\d+),\s*\d+\)", data_type)
    if decimal:
        return 8.0 if int(decimal.group(1)) <= 18 else 16.0
    return None


def sketched_values(column: str, data_type: str) -> tuple[str, str | None, bool, str]:
    """What ``jvm.ColumnSketcher`` gets for a column: the SQL of the value to sketch (the same expression as every
    other sketch of it), for other types without a fixed width the SQL of each value's width, whether the value
    is text, and the column it reads."""
    quoted = _quoted(column)
    text = data_type == "string"
    width = None if text or _fixed_width(data_type) is not None else f"octet_length(CAST({quoted} AS STRING))"
    return sketches.sketch_input_sql(column, data_type), width, text, column


def bound_metrics(column: str, data_type: str, prefix: str) -> list[Column]:
    """Min and max computed from the rows, for a table without parquet footers."""
    if data_type.startswith(("array", "map", "struct", "binary")):
        return []
    quoted = _quoted(column)
    return [F.min(F.col(quoted)).alias(f"{prefix}_min"), F.max(F.col(quoted)).alias(f"{prefix}_max")]


def _text(value) -> str | None:
    return None if value is None else str(value)


@dataclass
class _TableObservation:
    need: TableNeed
    sketcher: jvm.ColumnSketcher  # sketches, row and null counts, widths: inside the scan's generated code
    observation: Observation | None  # min and max from the rows (None: parquet, whose footers give them)
    columns: list[tuple[str, str]]  # (column, type) collected
    may_stop_early: bool = True  # LIMIT or a broadcast join in the stage: check the row count
    footers: Future | None = None  # → dict of the min and max the parquet footers gave, read beside the scan


def may_stop_early(stage: Stage) -> bool:
    """Whether a scan in this stage might not read every row: a LIMIT stops it, and a broadcast join whose
    build side is empty can skip its streamed side. Scans feeding a shuffle or a broadcast read everything."""
    return any(isinstance(n, Limit) or (isinstance(n, Join) and n.physical == "broadcast")
               for n in stage.plan.walk())


@dataclass
class StatisticsCollector:
    """One run's collection: which scans to observe, and what to store once each stage has run."""

    spark: object
    dag: StageDag
    needs: list[TableNeed]
    repository: StatsRepository
    files: FileSource
    lg_k: int = sketches.DEFAULT_LG_K
    collected_by: str = ""
    recollect: bool = False
    table_rows: Callable[[TableNeed], int] | None = None
    seconds: float = 0.0
    collected_tables: list[str] = field(default_factory=list)
    output_sketches: dict[tuple[int, str], bytes] = field(default_factory=dict)  # (stage, key) → HLL, this run
    _pending: list[_TableObservation] = field(default_factory=list)
    _storing_tables: list[Future] = field(default_factory=list)
    _storing_stages: list[Future] = field(default_factory=list)
    _claimed: set[str] = field(default_factory=set)
    _altered: set[int] = field(default_factory=set)
    _output_sketchers: dict[int, tuple[jvm.ColumnSketcher, list[str]]] = field(default_factory=dict)
    _observing: set[int] = field(default_factory=set)  # stages whose plan carries this run's sketches
    _footers: dict[str, FooterStatistics | None] = field(default_factory=dict)  # by table path
    disabled: bool = False

    def observes(self, stage: Stage) -> bool:
        """Whether collecting statistics added anything to the stage's Spark plan."""
        return stage.id in self._observing

    def disable(self, reason: str) -> None:
        """Collect nothing more in this run (what was stored stays): a stage failed with sketches in its plan and
        runs again without them, since statistics must never fail a query."""
        warn(f"collecting statistics failed ({reason}); this run goes on without collecting them")
        self.disabled = True
        self._pending = []
        self._output_sketchers.clear()

    def follow(self, dag: StageDag, needs: list[TableNeed]) -> None:
        """The run was re-planned: observe the new plan's scans of the tables not yet observed."""
        self.dag = dag
        self.needs = needs

    def scan_observers(self, stage: Stage, stops_early: bool = False) -> dict[int, Callable[[DataFrame], DataFrame]]:
        """For the first scan of each table that lacks statistics: wrap the raw table read in an observation.
        With ``stops_early`` (a fused stage, run inside its consumer's job, whose LIMIT or broadcast join may stop
        its scans early; a join broadcast once its input was measured) its observations are checked against the
        table's rows."""
        observers: dict[int, Callable[[DataFrame], DataFrame]] = {}
        for need, mine in self._observable(stage):
            self._claimed.add(need.entry.path)
            types = dict(need.entry.columns)
            wanted = need.columns if self.recollect else need.missing
            columns = [(c, types.get(c.lower(), "string")) for c in wanted]
            early = stops_early or may_stop_early(stage)
            observers[mine[0]] = (lambda df, need=need, columns=columns, early=early:
                                  self._observe_table(df, need, columns, early))
            self._observing.add(stage.id)
        return observers

    def column_bounds(self, scan: Scan, column: str) -> tuple[object, object] | None:
        """A table column's min and max as the repository held them when the run was planned, else as its
        parquet footers tell (None: neither knows)."""
        need = next((n for n in self.needs if n.entry.path == scan.table.path), None)
        known = need.known if need is not None else None
        stats = (known.columns.get(column) or known.columns.get(column.lower())) if known is not None else None
        if stats is None:
            footers = self._table_footers(scan.table)
            stats = footers.columns.get(column.lower()) if footers is not None else None
        return (stats.min_value, stats.max_value) if stats is not None else None

    def _table_footers(self, entry: TableEntry) -> FooterStatistics | None:
        """A table's footer statistics, read once per run."""
        if entry.path not in self._footers:
            self._footers[entry.path] = footer_statistics(self.spark, self.files, entry)
        return self._footers[entry.path]

    def would_observe(self, stage: Stage) -> bool:
        """Whether ``scan_observers`` would observe a scan of ``stage`` (a table it reads lacks statistics)."""
        return any(True for _ in self._observable(stage))

    def would_observe_scan(self, scan: Scan) -> bool:
        """Whether a stage reading ``scan`` would observe its raw table read (its table lacks statistics)."""
        return not self.disabled and any(id(scan) in need.scans and self._collecting(need) for need in self.needs)

    def _collecting(self, need: TableNeed) -> bool:
        """Whether the run still collects the statistics of ``need``'s table: not yet claimed by a stage, asked
        for, and of files whose fingerprint can tell later whether they still hold."""
        return (need.entry.path not in self._claimed and (need.collect or self.recollect)
                and bool(need.files.fingerprint))

    def _observable(self, stage: Stage) -> Iterator[tuple[TableNeed, list[int]]]:
        """Each table lacking statistics that ``stage`` reads whole and not yet claimed, with its scans there."""
        if self.disabled:
            return
        # a scan that partition pruning left with some partitions only reads part of its table
        scan_ids = {id(n) for n in stage.plan.walk() if not (isinstance(n, Scan) and n.all_partitions)}
        for need in self.needs:
            if not self._collecting(need):
                continue
            mine = [s for s in need.scans if s in scan_ids]
            if mine:
                yield need, mine

    def _observe_table(self, df: DataFrame, need: TableNeed, columns: list[tuple[str, str]],
                       early: bool = True) -> DataFrame:
        # parquet footers give min and max without a per-row aggregate; read on a thread while the stage runs,
        # since on the driver they cost a tenth of a second per table through py4j, 10 ms in one JVM call
        footers = None
        if need.entry.format == "parquet":
            footers = _FOOTER_READER.submit(jvm.parquet_footer_statistics, self.spark, need.files.paths,
                                            [c for c, _ in columns])
        # with no column to collect, a constant still counts the rows
        values = [sketched_values(c, t) for c, t in columns] or [("CAST(NULL AS BIGINT)", None, False, None)]
        sketcher = jvm.ColumnSketcher(self.spark, self.lg_k, values)
        df = sketcher.observe(df)
        bounds = [] if footers else [m for i, (c, t) in enumerate(columns) for m in bound_metrics(c, t, f"c{i}")]
        observation = None
        if bounds:  # not parquet: min and max from the rows, at observe's price
            observation = Observation(f"aipq-stats-{len(self._pending)}-{need.entry.name}")
            df = df.observe(observation, *bounds)
        self._pending.append(_TableObservation(need, sketcher, observation, columns, early, footers))
        return df

    def observe_output(self, stage: Stage, df: DataFrame) -> DataFrame:
        """``df`` feeding the sketches of the keys the stage's consumer joins on as its rows are written.

        A ``jvm.ColumnSketcher`` in the write's generated code hashes each distinct key once per task; an
        ``hll_sketch_agg`` metric of the write's observation hashed every row, outside generated code."""
        names = self.output_sketch_names(stage, df)
        if not names or self.disabled:
            return df
        self._observing.add(stage.id)
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        # no widths: only the sketches are kept; the source lets a write of a bare columnar scan sketch batches
        values = [(sketches.sketch_input_sql(c, types[c]), None, types[c] == "string", c) for c in names]
        sketcher = jvm.ColumnSketcher(self.spark, self.lg_k, values)
        self._output_sketchers[stage.id] = (sketcher, list(names.values()))
        return sketcher.observe(df)

    def output_values(self, stage: Stage) -> dict[str, bytes]:
        """Once the stage has written: each observed key sketch by its metric name."""
        sketcher, names = self._output_sketchers.pop(stage.id, (None, []))
        if sketcher is None:
            return {}
        return {name: figure.sketch or sketches.empty(self.lg_k) for name, figure in zip(names, sketcher.results())}

    @staticmethod
    def output_sketch_names(stage: Stage, df: DataFrame) -> dict[str, str]:
        """Column → metric name of each key sketch ``observe_output`` feeds (summaries reuse them)."""
        names = set(df.columns)
        return {c: f"k{i}_hll" for i, c in enumerate(stage.consumer_keys) if c in names}

    def stage_finished(self, stage: Stage, decisions: StageDecisions, observed: dict, rows: int,
                       bytes_written: int) -> None:
        """Keep the stage's output key sketches for this run's later stages; store its output statistics and
        whatever table observations completed with it on the storing threads (``settle`` waits for them)."""
        for i, column in enumerate(stage.consumer_keys):
            if observed.get(f"k{i}_hll"):
                self.output_sketches[(stage.id, column)] = bytes(observed[f"k{i}_hll"])
        self._storing_tables += [_STORER.submit(self._timed, self._store_table, pending) for pending in self._pending]
        self._pending = []
        reads = set(self.dag.dependency.get(stage.id, []))
        if reads & self._altered or drops_output_rows(decisions):
            # sibling/transitive pruning removed rows the subplan itself would keep: not its true size
            self._altered.add(stage.id)
        else:
            self._storing_stages.append(_STAGE_STORER.submit(self._timed, self._store_stage, stage, rows,
                                                             bytes_written))

    def settle(self) -> None:
        """Wait until everything submitted for storing is stored; a failure to store raises here."""
        self.settle_tables()
        stages, self._storing_stages = self._storing_stages, []
        self._wait(stages)

    def settle_tables(self) -> None:
        """Wait until the table statistics submitted so far are stored: the estimator reads them from the
        repository. The statistics of this run's own stages need no wait, since the estimator has their rows and
        key sketches from the run (``RunState``); ``settle`` stores them by the end of the run."""
        tables, self._storing_tables = self._storing_tables, []
        self._wait(tables)

    @staticmethod
    def _wait(storing: list[Future]) -> None:
        """Statistics never fail a query: a failure to store them is a warning."""
        for future in storing:
            try:
                future.result()
            except Exception as error:
                text = error.message if isinstance(error, AipqError) else f"{type(error).__name__}: {error}"
                warn(f"statistics were not stored ({text}); the query's result is not affected")

    def _timed(self, store: Callable, *arguments) -> None:
        started = time.perf_counter()
        store(*arguments)
        with _SECONDS_LOCK:  # two storing threads add to it
            self.seconds += time.perf_counter() - started

    def output_distinct(self) -> dict[tuple[int, str], float]:
        """Distinct values of each stage output key this run sketched so far, by (stage id, column)."""
        return {key: sketches.estimate(sketch) for key, sketch in self.output_sketches.items()}

    def _store_stage(self, stage: Stage, rows: int, bytes_written: int) -> None:
        inputs = {t.path: data_files(self.files, t.path).fingerprint for t in tables_under(self.dag, stage.id)}
        columns = {c: round(sketches.estimate(self.output_sketches[(stage.id, c)]), 1)
                   for c in stage.consumer_keys if (stage.id, c) in self.output_sketches}
        self.repository.save_stage(StageStats(
            stage_plan_key(self.dag, stage.id), f"{stage.name} {stage.operator}", inputs, rows, bytes_written,
            columns, time.time(), self.collected_by))

    def collect_in_one_pass(self, frame, need: TableNeed, columns: list[tuple[str, str]]) -> None:
        """A table's statistics from a pass of its own (``aipq stats collect``, ANALYZE TABLE): observed as the
        table is read into Spark's noop sink, then stored."""
        df = self._observe_table(frame, need, columns, early=False)
        df.write.format("noop").mode("overwrite").save()
        self._store_table(self._pending.pop())

    def _store_table(self, pending: _TableObservation) -> None:
        need = pending.need
        sketched = pending.sketcher.results()
        bounds = jvm.observed_metrics(pending.observation) if pending.observation is not None else {}
        footers = pending.footers.result() if pending.footers is not None else {}
        rows = sketched[0].rows
        if pending.may_stop_early and self.table_rows is not None and rows != self.table_rows(need):
            return  # the scan stopped early (LIMIT, empty broadcast side): not the table's statistics
        files = data_files(self.files, need.entry.path)
        if files.fingerprint != need.files.fingerprint:
            return  # the data changed while the query ran
        now = time.time()
        known = self.repository.table(need.entry.path, files.fingerprint)
        stats = TableStats(need.entry.path, need.entry.qualified_name, files.fingerprint, rows, files.bytes,
                           files.files, files.splits(parallelism=self.spark.sparkContext.defaultParallelism),
                           now, self.collected_by, dict(known.columns) if known else {})
        for index, ((column, data_type), figures) in enumerate(zip(pending.columns, sketched)):
            footer = footers.get(column)
            if footer is not None:
                low, high = footer.min, footer.max
            else:  # observed, or unknown: parquet files written without statistics for this column
                low, high = _text(bounds.get(f"c{index}_min")), _text(bounds.get(f"c{index}_max"))
            width = _fixed_width(data_type)
            if width is None:
                width = figures.width_sum / figures.present if figures.present else 0.0
            sketch = figures.sketch
            stats.columns[column] = ColumnStats(
                column, data_type, rows, rows - figures.present, sketches.estimate(sketch) if sketch else 0.0,
                self.lg_k, round(width, 2), low, high, sketch, now, self.collected_by,
                figures.sample if data_type == "string" else None)
        self.repository.save_table(stats)
        self.collected_tables.append(need.entry.qualified_name)


def collector_for(context: RunContext, dag: StageDag, collected_by: str) -> StatisticsCollector | None:
    """What this run collects in passing (None with statistics off)."""
    settings = context.settings
    if settings.statistics == "off":
        return None
    if context.repository is None:
        warn(f"{context.home} is read-only: this run neither collects nor stores statistics")
        return None
    spark = context.spark
    needs = plan_statistics(dag, context.repository, context.storage, settings.stats_columns)
    return StatisticsCollector(spark, dag, needs, context.repository, context.storage, settings.stats_lg_k,
                               collected_by,
                               recollect=settings.statistics == "recollect",
                               table_rows=lambda need: table_rows(spark, context.storage, need.entry))


def collect_table(context: RunContext, entry, columns: list[str] | None, collected_by: str) -> TableStats | None:
    """``aipq stats collect``: one explicit pass over a table (like ANALYZE), for the given or all columns."""
    names = columns or [name for name, _ in entry.columns]
    spark, repository = context.spark, StatsRepository(context.home)
    need = TableNeed(entry, data_files(context.storage, entry.path), tuple(names), tuple(names), None)
    collector = StatisticsCollector(spark, None, [need], repository, context.storage,  # type: ignore[arg-type]
                                    context.settings.stats_lg_k, collected_by)
    types = dict(entry.columns)
    collector.collect_in_one_pass(read_table(spark, entry), need,
                                  [(c, types.get(c.lower(), "string")) for c in names])
    return repository.table(entry.path, need.files.fingerprint)
