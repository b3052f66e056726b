"""The benefit estimator's inputs for one edge, from what is known when the decision is made (the paper's cost
estimator): sizes of stages that already ran in this run, the statistics repository for base tables and for
stage subplans seen before, the summaries' own key sketches, and documented defaults for the rest.

Every figure records its source (``measured``, ``repository``, ``files``, ``default``), and explain shows them.
Defaults, when nothing better is known:

- rows per base table: the parquet footers' count (Spark reads only metadata); row width: 8 bytes per
  fixed-width column, 24 per string column without a measured width;
- a scan's filters, and the filters and map-side joins between a probed input and its stage's shuffle, keep
  the share ``estimator/cardinality.py`` estimates from the columns' NDV and min/max (its documented default
  shares where the repository has no statistics);
- key overlap without both sketches: the containment assumption of query optimizers — the smaller key set lies
  inside the larger. Before the summary exists (Algorithm 1) the same, when an earlier run of the producer's
  subplan gave its key count; with only a bound on its keys, no key in common, the best case, so that a
  summary is built whenever it could pay, and Algorithm 2 decides with the real figures. (The best case with a
  known key count built summaries that Algorithm 2 then never used: TPC-H Q2's two with broadcast joins cost
  0.14 s for nothing.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.config import Settings
from aipq.estimator.benefit import EdgeEstimate, EdgeInputs, best_estimate, materialization_cost
from aipq.estimator.cardinality import Cardinality, StatsLookup, kept_distinct
from aipq.estimator.join_estimates import KnownTables
from aipq.estimator.overlap import KeyRange, common_keys, span_keys
from aipq.estimator.parameters import PAGE_BYTES, Calibration, parse_memory, sort_buffer_pages
from aipq.estimator.selectivity import value_bounds
from aipq.estimator.shuffled_inputs import broadcastable_partner, feeds_shuffle
from aipq.files import FileSource, NoFiles
from aipq.ip.candidates import Candidate, Target, distinct_bound, leaf_columns
from aipq.ip.decisions import NO_PRUNING, BuiltInfo, Pruning
from aipq.planner.logical import Join, Scan
from aipq.planner.physical import ESTIMATE_MARGIN
from aipq.planner.reducers import reduce_tasks, stage_input_bytes
from aipq.planner.stages import Stage, StageDag, StageRead
from aipq.stats import sketches
from aipq.stats.fingerprint import DataFiles
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.repository import StatsRepository

STRING_WIDTH = 24.0
FIXED_WIDTH = 8.0


@dataclass
class KeySet:
    """What is known of the keys on one side of an edge."""

    distinct: float
    sketch: bytes | None = None
    source: str = "default"
    bound: bool = False  # only an upper bound (rows of an input) is known


@dataclass
class ProbedInput:
    rows: float
    bytes: float
    splits: float
    keys: KeySet
    feeds_shuffle: bool
    source: str
    shuffle_share: float = 1.0  # of its rows, the share that reaches the stage's shuffle
    partition_bytes: float = 0.0  # the key is a partition column: bytes of the partitions a summary could skip


@dataclass
class RunState:
    """What the executor knows so far in a run."""

    rows_written: dict[int, int] = field(default_factory=dict)
    stage_paths: dict[int, str] = field(default_factory=dict)
    output_sketches: dict[tuple[int, str], bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionFacts:
    """What the estimator reads from the running Spark session and its storage, injected so that it runs
    without one: a base table's row count (parquet footers), the data files at a path, and the cluster: task
    slots (Spark's default parallelism), executors (N, 1 in local mode: the driver's JVM), the cores of one
    executor (the tasks that share its memory) and its memory with Spark's memory fraction (B)."""

    table_rows: Callable[[TableEntry], int] | None = None
    files: FileSource = field(default_factory=NoFiles)
    parallelism: int = 2
    executors: int = 1
    executor_cores: int | None = None  # None: all task slots share one JVM (local mode)
    executor_memory: str | None = None  # the memory of the JVM that runs tasks (the driver's in local mode)
    memory_fraction: float | None = None


def adaptive_estimator(dag: StageDag, settings: Settings, repository: StatsRepository | None,
                       calibration: Calibration, session: Callable[[], SessionFacts],
                       state: RunState | None = None, known: KnownTables | None = None) -> EdgeEstimator | None:
    """The benefit estimator strategy ``adaptive`` decides with (None under any other strategy): over what is
    known before a run (explain), or reading a run's ``state`` as it grows; ``session`` is asked only then."""
    if settings.ip != "adaptive":
        return None
    return EdgeEstimator(dag, settings, repository, calibration, state, session(), known)


class EdgeEstimator:
    """The IP planner's estimator for one run (or for explain, before anything ran)."""

    def __init__(self, dag: StageDag, settings: Settings, repository: StatsRepository | None,
                 calibration: Calibration, state: RunState | None = None, session: SessionFacts | None = None,
                 known: KnownTables | None = None):
        self.dag = dag
        self.settings = settings
        self.repository = repository
        self.calibration = calibration
        self.state = state or RunState()
        self.session = session or SessionFacts()
        self.sort_buffer = self._sort_buffer_pages()
        # tables' files and statistics, listed and looked up once per estimator: every candidate edge asks again,
        # and tables (and stage outputs once written) do not change during a run; ``known``: a planner's, shared
        self.known = known or KnownTables(repository, self.session.files)
        self._stages: dict[int, object] = {}
        self._plan_texts: dict[int, str] = {}  # each stage's canonical text, shared by the stages above it
        self._planning: set[int] = set()  # stages whose plan's rows are being estimated
        # the pruning chosen so far, as the IP planner hands it with the edge being priced (the repository keeps
        # only unpruned subplans' figures; a place already probed holds fewer rows)
        self.pruning: Pruning = NO_PRUNING
        self.cardinality = Cardinality(StatsLookup(
            table_rows=lambda scan: self._table_rows(scan)[0], column=self._column_stats,
            stage_rows=self._stage_rows, stage_distinct=self._stage_distinct,
            stage_plan=lambda read: self.dag.stage(read.stage_id).plan))

    def _files(self, path: str) -> DataFiles:
        return self.known.files(path)

    def __call__(self, candidate: Candidate, built: BuiltInfo | None,
                 pruning: Pruning = NO_PRUNING) -> EdgeEstimate | None:
        self.pruning = pruning
        with self.cardinality.held():
            return self._estimate(candidate, built)

    def _estimate(self, candidate: Candidate, built: BuiltInfo | None) -> EdgeEstimate | None:
        probed = self.probed_input(candidate)
        if probed is None or probed.rows <= 0:
            return None
        summary = self.summary_keys(candidate, built)
        common, overlap = self._overlap(candidate, summary, probed.keys, built)
        inputs = EdgeInputs(
            probed_bytes=probed.bytes, probed_rows=probed.rows, probed_splits=probed.splits,
            probed_distinct=max(probed.keys.distinct, 1.0), summary_distinct=max(summary.distinct, 1.0),
            common_distinct=common, shuffle_partitions=self.reduce_tasks(self._shuffling_stage(candidate.target)),
            sort_buffer_pages=self.sort_buffer, nodes=self.session.executors,
            partials=self.reduce_tasks(candidate.producer),
            feeds_shuffle=probed.feeds_shuffle, shuffle_share=probed.shuffle_share, place=candidate.target.place,
            summary_is_bound=summary.bound, partition_pages=probed.partition_bytes / PAGE_BYTES,
            summary_rows=self.producer_rows(candidate.producer, candidate.column) if built is None else 0.0,
            cores=self._parallelism(), prepass_pages=self.prepass_pages(candidate.producer) if built is None else None,
            savings_share=1.0 / (1.0 + self.settings.margin),
            sources={"probed size": probed.source, "probed keys": probed.keys.source,
                     "summary keys": summary.source, "overlap": overlap,
                     "shuffle share": "estimated: filters and map-side joins between the input and the shuffle"
                     if probed.shuffle_share < 1.0 else "all its rows",
                     "unit costs": self.calibration.source})
        fixed = built.size_bytes if built is not None and built.size_bytes else self.settings.bloom_size
        return best_estimate(inputs, self.calibration, self.settings.alpha, fixed)

    def _overlap(self, candidate: Candidate, summary: KeySet, probed: KeySet,
                 built: BuiltInfo | None) -> tuple[float, str]:
        """The probed keys the summary holds, and how that is known."""
        if built is None and summary.bound:
            return 0.0, "best case before it is built (its keys only bounded): no key in common"
        if built is not None and summary.sketch is not None and probed.sketch is not None:
            return sketches.intersection_estimate(summary.sketch, probed.sketch), "HLL intersection of both sketches"
        when = " before it is built" if built is None else ""
        span = self._key_span(candidate)
        if span is None:
            return min(summary.distinct, probed.distinct), "containment assumption" + when
        return (common_keys(summary.distinct, probed.distinct, span),
                f"containment within the {span:,.0f} keys of its table in the probed column's range{when}")

    def _key_span(self, candidate: Candidate) -> float | None:
        """The keys of the summary's table within the probed column's range (``overlap.span_keys``), where the
        probed input is a scan and the summary's keys come from one, both columns with bounds."""
        target = candidate.target
        probed = self._key_range(self._target_leaf(target), target.column) if target.place == "input" else None
        domain = next((self._key_range(leaf, column) for leaf, column
                       in leaf_columns(self.dag, candidate.producer, candidate.column) if isinstance(leaf, Scan)), None)
        return span_keys(domain, probed) if probed is not None and domain is not None else None

    def _target_leaf(self, target: Target) -> object | None:
        """The Scan or StageRead leaf an input place probes (None for an output place)."""
        return next((n for n in self.dag.stage(target.stage).plan.walk() if id(n) == target.node_id), None)

    def _key_range(self, leaf: object, column: str) -> KeyRange | None:
        """A scanned column's distinct values and numeric bounds in the repository, else None."""
        if not isinstance(leaf, Scan):
            return None
        stats = self._column_stats(leaf, dict(leaf.columns + leaf.filter_only).get(column, column))
        if stats is None:
            return None
        low, high = value_bounds(stats)
        if not isinstance(low, float) or not isinstance(high, float) or stats.ndv <= 0:
            return None
        return KeyRange(stats.ndv, low, high)

    # ---- the summary's side ---------------------------------------------------------------------------
    def summary_keys(self, candidate: Candidate, built: BuiltInfo | None) -> KeySet:
        if built is not None and built.items is not None:
            return KeySet(float(built.items), built.sketch, "measured: the summary's own keys")
        known = self._stage_stats(candidate.producer)
        if known is not None and candidate.column in known.columns:
            share = self.pruning.after(candidate.producer)
            return KeySet(kept_distinct(known.columns[candidate.column], known.rows, share), None,
                          "repository: same subplan in an earlier query" + _scaled(share))
        bound = self._distinct_bound(candidate.producer, candidate.column)
        estimated = self._estimated_keys(candidate.producer, candidate.column)
        if estimated is not None and estimated < bound[0]:
            return KeySet(estimated, None, "estimated: the cardinality of its subplan")
        return KeySet(bound[0], None, bound[1], bound=True)

    def _estimated_keys(self, stage_id: int, column: str) -> float | None:
        """The keys of a stage with no history, from the cardinality of its subplan, where its inputs' filters
        or joins leave fewer than the bound (an input's rows). A stage fused into its reader is never measured,
        and priced at the bound its summary would look too coarse to pay for its write (Q10's customer ⋈ orders,
        a quarter's orders, at all of orders' keys). A filtered table's pre-pass keeps the bound, and with it the
        best case before it runs (Algorithm 1), unless its keys come through a join (a reached table's semi
        joins, ``ip/reached_scans.py``): the table's rows would make every such pre-pass look worth its read."""
        if not self._priced_from_plan(stage_id):
            return None
        plan = self.dag.stage(stage_id).plan
        distinct, rows = self.cardinality.distinct(plan, column), self.cardinality.rows(plan)
        if distinct is None or rows is None:
            return distinct
        return kept_distinct(distinct, rows, self.pruning.within(stage_id))

    def _priced_from_plan(self, stage_id: int) -> bool:
        """Whether a stage with no stored run is priced from its plan's estimates: all but a filtered table's
        pre-pass, which keeps its bounds (``_estimated_keys``)."""
        stage = self.dag.stage(stage_id)
        return stage.operator != "SCAN" or any(isinstance(n, Join) for n in stage.plan.walk())

    def prepass_pages(self, stage_id: int) -> float | None:
        """A SCAN stage's pages (it runs for its summary alone): its table's rows × the widths of the columns it
        reads, its keys and its filters' columns (parquet reads no others), else None."""
        stage = self.dag.stage(stage_id)
        if stage.operator != "SCAN":
            return None
        pages = 0.0
        for scan in (n for n in stage.plan.walk() if isinstance(n, Scan)):
            rows, _ = self._table_rows(scan)
            filtered = {c.name for f in scan.filters for c in f.find_all(exp.Column)}
            read = [name for name, _ in scan.columns + scan.filter_only
                    if name in stage.output_columns or name in filtered]
            pages += (rows or 0.0) * self._row_width(scan, read) / PAGE_BYTES
        return pages

    def materialization_seconds(self, stage_id: int) -> float:
        """Writing ``stage_id``'s output and reading it back (``benefit.materialization_cost``), from its
        expected size."""
        stage = self.dag.stage(stage_id)
        output = self._stage_output(stage, stage.output_columns[0], shuffled=False)
        pages = output.bytes / PAGE_BYTES if output is not None else 0.0
        return materialization_cost(pages, self._parallelism(), self.calibration)

    def producer_rows(self, stage_id: int, column: str) -> float:
        """Rows the producer will write (each passes through the summary's aggregates): as its subplan wrote
        before, else its plan's estimate where that is known (as for its keys, ``_estimated_keys``), else the bound
        on its keys. A fused stage is never stored: at the bound, Q8's part ⋈ lineitem was priced at building its
        summary from all of lineitem's rows, not the ones part's filter leaves."""
        known = self._stage_stats(stage_id)
        if known is not None:
            return float(known.rows) * self.pruning.after(stage_id)
        planned = self._planned_rows(stage_id) if self._priced_from_plan(stage_id) else None
        return planned if planned is not None else self._distinct_bound(stage_id, column)[0]

    def _distinct_bound(self, stage_id: int, column: str) -> tuple[float, str]:
        """At most as many distinct keys as any input the column's values come from has rows."""
        found = distinct_bound(self.dag, stage_id, column, self.state.rows_written.get, self._table_rows)
        return found if found is not None else (1e6, "default")

    def _stage_stats(self, stage_id: int):
        """What an earlier run of the stage's subplan wrote, looked up once per estimator."""
        if self.repository is None:
            return None
        if stage_id not in self._stages:
            self._stages[stage_id] = self.repository.stage(stage_plan_key(self.dag, stage_id, self._plan_texts),
                                                           lambda p: self._files(p).fingerprint)
        return self._stages[stage_id]

    # ---- the probed side ------------------------------------------------------------------------------
    def probed_input(self, candidate: Candidate) -> ProbedInput | None:
        target = candidate.target
        stage = self.dag.stage(target.stage)
        if target.place == "output":
            return self._after_earlier_summaries(self._stage_output(stage, target.column, shuffled=True), target)
        leaf = self._target_leaf(target)
        shuffled = feeds_shuffle(stage, target.node_id)
        if isinstance(leaf, Scan):
            probed = self._scan(leaf, target.column, shuffled)
        elif isinstance(leaf, StageRead):
            probed = self._stage_output(self.dag.stage(leaf.stage_id), target.column, shuffled)
        else:
            return None
        if probed is not None and shuffled and stage.reduce_node is not None:
            probed.shuffle_share = self.cardinality.reach(stage.reduce_node, target.node_id)
        return self._after_earlier_summaries(probed, target)

    def joined_map_side_at_run(self, target: Target, producer: int) -> bool:
        """Whether the repartition join that would shuffle this input place is expected to run map-side with
        ``producer``'s output as its other input: that output estimated within the runtime broadcast threshold
        with the planner's margin (Hive's conditional map join, ``planner/physical.measured_broadcasts``; Spark's
        adaptive execution likewise). The join then drops the rows a summary of ``producer`` would, where they
        are read: in Spark's plan of the same part, which broadcasts the small side, the summary adds nothing."""
        threshold = self.settings.broadcast_threshold if self.settings.runtime_broadcast == "on" else 0
        partner = broadcastable_partner(self.dag.stage(target.stage), target.node_id)
        if threshold <= 0 or target.place != "input" or partner is None or partner.stage_id != producer:
            return False
        output = self._stage_output(self.dag.stage(producer), next(iter(partner.columns), ""), shuffled=False)
        return output is not None and output.bytes * ESTIMATE_MARGIN <= threshold

    def _after_earlier_summaries(self, probed: ProbedInput | None, target: Target) -> ProbedInput | None:
        """What reaches this edge's probe once the summaries chosen before it at the same place have probed:
        fewer rows and pages, the same share of them matching (independent keys)."""
        share = self.pruning.at(target)
        if probed is None or share >= 1.0:
            return probed
        probed.rows *= share
        probed.bytes *= share
        probed.source += f", × {share:.3g} kept by the summaries chosen before it at this place"
        return probed

    def _scan(self, scan: Scan, column: str, shuffled: bool) -> ProbedInput | None:
        entry = scan.table
        source_column = dict(scan.columns + scan.filter_only).get(column)
        files = self._files(entry.path)
        stats = self._table_stats(entry.path)
        rows, source = self._table_rows(scan)
        if rows is None:
            return None
        if scan.filters:  # the probe runs after the scan's filters
            rows = self.cardinality.rows(scan) or rows
            source += ", its filters' selectivity estimated"
        width = self._row_width(scan, [name for name, _ in scan.columns + scan.filter_only])
        keys = KeySet(rows, None, "default: every row a distinct key")
        if stats and source_column in stats.columns:
            column_stats = stats.columns[source_column]
            keys = KeySet(column_stats.ndv, column_stats.sketch, "repository: the column's HLL sketch")
        splits = stats.splits if stats else files.splits(parallelism=self._parallelism())
        probed = ProbedInput(rows, rows * width, max(splits, 1), keys, shuffled, source)
        if entry.partitioned and source_column in entry.partition_columns:
            probed.partition_bytes = float(sum(self._files(path).bytes for path in entry.data_paths()))
        return probed

    def _stage_output(self, stage: Stage, column: str, shuffled: bool) -> ProbedInput | None:
        written = self.state.rows_written.get(stage.id)
        path = self.state.stage_paths.get(stage.id)
        if written is not None and path:
            files = self._files(path)
            rows, source = float(written), "measured: the stage's output"
            sketch = self.state.output_sketches.get((stage.id, column))
            keys = (KeySet(sketches.estimate(sketch), sketch, "measured: the stage output's key sketch")
                    if sketch else KeySet(rows, None, "default: every row a distinct key"))
            width = FIXED_WIDTH * max(len(stage.output_columns), 1)
            return ProbedInput(rows, rows * width, max(files.splits(parallelism=self._parallelism()), 1), keys,
                               shuffled, source)
        known = self._stage_stats(stage.id)
        if known is not None:
            share = self.pruning.after(stage.id)
            rows = float(known.rows) * share
            distinct = kept_distinct(known.columns.get(column, float(known.rows)), known.rows, share)
            source = "repository: same subplan in an earlier query" + _scaled(share)
            return ProbedInput(rows, FIXED_WIDTH * max(len(stage.output_columns), 1) * rows,
                               max(1.0, known.bytes / (128 << 20)), KeySet(distinct, None, source), shuffled, source)
        planned = self._planned_rows(stage.id)
        if planned is not None:
            source = "estimated: its plan's cardinality (no run of its subplan stored)"
            distinct = self._estimated_keys(stage.id, column)
            keys = KeySet(min(distinct, planned) if distinct is not None else planned, None, source)
            return ProbedInput(planned, planned * FIXED_WIDTH * max(len(stage.output_columns), 1), 1.0, keys,
                               shuffled, source)
        rows, source = self._distinct_bound(stage.id, column)
        return ProbedInput(rows, rows * FIXED_WIDTH * max(len(stage.output_columns), 1), 1.0,
                           KeySet(rows, None, "default: every row a distinct key"), shuffled, source)

    def _planned_rows(self, stage_id: int) -> float | None:
        """The rows of a stage output known neither from this run nor from the repository: the cardinality
        estimate of its plan, its inputs' figures as known (stages before it likewise, recursively).

        Under ``adaptive`` a stage that a sibling or transitive summary pruned is never stored (its rows are not
        its subplan's), so without this its output was priced at the rows of the key's input table: lineitem's 6 M
        for Q8's S1 output, which holds about 44 thousand, crediting S11.o_orderkey with 7.4 s saved further on."""
        # not cached: the figures below change as stages finish and as summaries are chosen
        if stage_id in self._planning:  # a stage's plan reads only earlier stages; this guards anyway
            return None
        self._planning.add(stage_id)
        try:
            rows = self.cardinality.rows(self.dag.stage(stage_id).plan)
            return rows * self.pruning.within(stage_id) if rows is not None else None
        finally:
            self._planning.discard(stage_id)

    # ---- what the cardinality estimates read ------------------------------------------------------------
    def _column_stats(self, scan: Scan, column: str):
        stats = self._table_stats(scan.table.path)
        return stats.columns.get(column) if stats is not None else None

    def _stage_rows(self, read: StageRead) -> float | None:
        if read.stage_id in self.state.rows_written:
            return float(self.state.rows_written[read.stage_id])
        known = self._stage_stats(read.stage_id)
        if known is not None:
            return float(known.rows) * self.pruning.after(read.stage_id)
        return self._planned_rows(read.stage_id)

    def _stage_distinct(self, read: StageRead, column: str) -> float | None:
        sketch = self.state.output_sketches.get((read.stage_id, column))
        if sketch:
            return sketches.estimate(sketch)
        known = self._stage_stats(read.stage_id)
        if known is not None and column in known.columns:
            return kept_distinct(known.columns[column], known.rows, self.pruning.after(read.stage_id))
        if known is not None or read.stage_id in self.state.rows_written:
            return None
        return self.cardinality.distinct(self.dag.stage(read.stage_id).plan, column)  # as the plan's inputs hold

    # ---- helpers -------------------------------------------------------------------------------------------
    def _table_stats(self, path: str):
        """The repository's statistics of a table, if they match its files as they are now."""
        return self.known.stats(path)

    def _table_rows(self, scan: Scan) -> tuple[float | None, str]:
        files = self._files(scan.table.path)
        stats = self._table_stats(scan.table.path)
        if stats is not None:
            return float(stats.rows), "repository"
        if self.session.table_rows is not None:
            return float(self.session.table_rows(scan.table)), "files: parquet footers"
        if files.bytes:  # explain, before Spark starts: parquet holds about half a row's in-memory width
            width = sum(self._type_width(t) for _, t in scan.table.columns) or FIXED_WIDTH
            return files.bytes * 2 / width, "files: estimated from their size"
        return None, "unknown"

    def _row_width(self, scan: Scan, names: list[str]) -> float:
        """Bytes a row of the scan's columns ``names`` (internal names) takes: measured widths, else by type."""
        entry = scan.table
        stats = self._table_stats(entry.path)
        table_names = dict(scan.columns + scan.filter_only)
        width = 0.0
        for name in names:
            column = table_names[name]
            known = stats.columns.get(column) if stats else None
            width += known.width if known else self._type_width(dict(entry.columns).get(column, "string"))
        return width

    @staticmethod
    def _type_width(data_type: str) -> float:
        return STRING_WIDTH if data_type in ("string", "binary") else FIXED_WIDTH

    def _shuffling_stage(self, target: Target) -> int:
        """The stage whose shuffle the pruned rows would reach: the target's own for an input, the reader's
        for a stage's output."""
        if target.place == "input":
            return target.stage
        return next(iter(self.dag.dataflow.get(target.stage, [])), target.stage)

    def reduce_tasks(self, stage_id: int) -> int:
        """r for a stage: as the executor will choose it (``planner/reducers.py``), from the sizes of its
        inputs that are written; the most (``shuffle_partitions``) while one is not."""
        if self.settings.reducer_bytes <= 0:
            return self.settings.shuffle_partitions
        return reduce_tasks(self.settings, stage_input_bytes(self.dag.stage(stage_id), self._written_bytes,
                                                             self._path_bytes), self._parallelism())

    def _path_bytes(self, path: str) -> int | None:
        files = self._files(path)
        return files.bytes if files.fingerprint else None

    def _written_bytes(self, stage_id: int) -> int | None:
        if stage_id not in self.state.rows_written or stage_id not in self.state.stage_paths:
            return None
        return self._files(self.state.stage_paths[stage_id]).bytes

    def _parallelism(self) -> int:
        return self.session.parallelism

    def _sort_buffer_pages(self) -> float:
        conf = dict(self.settings.spark_conf)
        memory = self.session.executor_memory or conf.get("spark.driver.memory", "1g")
        fraction = self.session.memory_fraction or float(conf.get("spark.memory.fraction", 0.6))
        return sort_buffer_pages(parse_memory(memory), fraction, self.session.executor_cores or self._parallelism())


def _scaled(share: float) -> str:
    return "" if share >= 1.0 else f", × {share:.3g} for the pruning chosen in or below it"
