"""What the cost-based join order (``planner/join_order.py``) is priced with: rows and distinct values of a join
block's relations from the statistics repository, and seconds per shuffled row, per written row and per stage
from the calibrated unit costs — the estimator's own figures, before anything runs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from aipq.config import Settings
from aipq.estimator.benefit import materialization_cost
from aipq.estimator.cardinality import Cardinality, StatsLookup
from aipq.estimator.parameters import PAGE_BYTES, Calibration
from aipq.files import FileSource, Sizes
from aipq.planner.join_order import JoinCosting
from aipq.planner.logical import Node, Scan
from aipq.planner.stages import StageDag, StageRead
from aipq.stats.fingerprint import DataFiles, data_files
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.repository import ColumnStats, StatsRepository, TableStats

# Bytes of a shuffled row in the unit costs' pages (docs/decisions.md): join order is chosen before columns are
# pruned, so rows are priced at one nominal width; only ratios between orders matter.
NOMINAL_ROW_BYTES = 24.0


class KnownTables:
    """The repository's statistics of tables, valid only for their files as they are now; each path listed
    and looked up once."""

    def __init__(self, repository: StatsRepository | None, files: FileSource,
                 history_before: float | None = math.inf):
        self.repository = repository
        # earlier runs' stage sizes recorded before this time are used (None: none; a run's own are not)
        self.history_before = history_before
        self.source = files
        self._listed: dict[str, DataFiles] = {}
        self._stats: dict[str, TableStats | None] = {}
        self._stages: dict[str, float | None] = {}  # by subplan key: the rows an earlier run wrote

    def files(self, path: str) -> DataFiles:
        if path not in self._listed:
            self._listed[path] = data_files(self.source, path)
        return self._listed[path]

    def stage_rows(self, dag: StageDag, stage_id: int) -> float | None:
        """The rows a stage with the same subplan wrote in an earlier run over the same table files, if one
        was recorded."""
        if self.repository is None or self.history_before is None:
            return None
        key = stage_plan_key(dag, stage_id)
        if key not in self._stages:
            found = self.repository.stage(key, lambda path: self.files(path).fingerprint)
            earlier = found is not None and found.collected_at < self.history_before
            self._stages[key] = float(found.rows) if earlier else None
        return self._stages[key]

    def stats(self, path: str) -> TableStats | None:
        if self.repository is None:
            return None
        if path not in self._stats:
            fingerprint = self.files(path).fingerprint
            self._stats[path] = self.repository.table(path, fingerprint) if fingerprint else None
        return self._stats[path]


class TableFooters(Protocol):
    """What a table's files tell without reading a row (``engine.statistics.FooterStatistics``)."""

    rows: int
    columns: dict[str, ColumnStats]


class JoinEstimates:
    """``planner.join_order.RowEstimates`` over the repository: a relation's rows and key counts, and which of
    its tables the repository knows nothing of."""

    def __init__(self, tables: KnownTables, dag: StageDag | None = None,
                 measured: dict[int, float] | None = None,
                 measured_distinct: dict[tuple[int, str], float] | None = None,
                 footers: Callable[[Scan], TableFooters | None] | None = None):
        self.tables = tables
        self.dag = dag
        self.measured = measured or {}  # stage id → the rows its output holds (a re-plan's finished stages)
        self.measured_distinct = measured_distinct or {}  # (stage id, column) → distinct keys sketched in it
        self.footers = footers  # a table without statistics: what its files' footers tell
        self._footers: dict[str, TableFooters | None] = {}  # by table path: each table's footers read once
        self.cardinality = Cardinality(StatsLookup(table_rows=self.table_rows, column=self._column,
                                                   stage_rows=self._stage_rows, stage_distinct=self._stage_distinct,
                                                   stage_plan=self._stage_plan))

    def _stage_rows(self, read: StageRead) -> float | None:
        """An earlier stage's output: its rows when it has run, else its own plan's estimate (a stage reads only
        earlier stages)."""
        if read.stage_id in self.measured:
            return self.measured[read.stage_id]
        return self.stage_estimate(read.stage_id) if self.dag is not None else None

    def stage_estimate(self, stage_id: int) -> float | None:
        """A stage's output rows: what the same subplan wrote before over the same files, else, for a predicate
        transfer pass, what its filters and probes are estimated to keep (``ip/transfer._PassKeys``), else its
        plan's estimate."""
        assert self.dag is not None
        known = self.tables.stage_rows(self.dag, stage_id)
        if known is not None:
            return known
        passed = self.dag.transfer_rows.get(stage_id)
        return passed if passed is not None else self.cardinality.rows(self.dag.stage(stage_id).plan)

    def _stage_plan(self, read: StageRead) -> Node | None:
        return self.dag.stage(read.stage_id).plan if self.dag is not None else None

    def _stage_distinct(self, read: StageRead, column: str) -> float | None:
        if (read.stage_id, column) in self.measured_distinct:
            return self.measured_distinct[(read.stage_id, column)]
        return self.cardinality.distinct(self.dag.stage(read.stage_id).plan, column) if self.dag is not None else None

    def _footer(self, scan: Scan) -> TableFooters | None:
        if self.footers is None:
            return None
        if scan.table.path not in self._footers:
            self._footers[scan.table.path] = self.footers(scan)
        return self._footers[scan.table.path]

    def table_rows(self, scan: Scan) -> float | None:
        """The rows of the scan's table before its filters: its statistics', else its files' footers'."""
        stats = self.tables.stats(scan.table.path)
        if stats is not None:
            return float(stats.rows)
        footer = self._footer(scan)
        return float(footer.rows) if footer is not None else None

    def _column(self, scan: Scan, column: str) -> ColumnStats | None:
        stats = self.tables.stats(scan.table.path)
        if stats is not None:
            return stats.columns.get(column)
        footer = self._footer(scan)
        return footer.columns.get(column) if footer is not None else None

    def from_footers(self, node: Node) -> list[str]:
        """The tables under ``node`` estimated from their files' footers, for want of statistics."""
        return sorted({scan.table.qualified_name for scan in node.walk() if isinstance(scan, Scan)
                       and self.tables.stats(scan.table.path) is None and self._footer(scan) is not None})

    def rows(self, node: Node) -> float | None:
        return self.cardinality.rows(node)

    def distinct(self, node: Node, name: str) -> float | None:
        return self.cardinality.distinct(node, name)

    def missing_statistics(self, node: Node) -> list[str]:
        return sorted({scan.table.qualified_name for scan in node.walk()
                       if isinstance(scan, Scan) and self.table_rows(scan) is None})


def stage_row_estimates(dag: StageDag, tables: KnownTables) -> dict[int, float | None]:
    """Each stage's output rows as estimated before it runs: the rows the same subplan wrote in an earlier run
    over the same files, else from the tables' statistics, earlier stages by their own estimates rather than
    their measured rows. What a stage's actual rows are compared with (``q_error``)."""
    estimates = JoinEstimates(tables, dag)
    return {stage.id: estimates.stage_estimate(stage.id) for stage in dag.stages}


def stage_estimate_figures(dag: StageDag, tables: KnownTables, measured: dict[int, tuple[bool, int]] | None = None,
                           kept: dict[int, float] | None = None) -> dict[int, dict]:
    """Per stage, its output rows as estimated before it ran (``stage_row_estimates``) times the share of them
    its summaries were expected to keep (``kept``, by stage id), and, for a stage ``measured`` as written (by stage
    id: whether written, rows written), how far off they were: the q-error of its rows (a fused stage's rows are
    not counted)."""
    figures: dict[int, dict] = {}
    for stage_id, subplan_rows in stage_row_estimates(dag, tables).items():
        share = (kept or {}).get(stage_id, 1.0)
        rows = None if subplan_rows is None else subplan_rows * share
        figure: dict = {"estimated_rows": None if rows is None else round(rows, 1),
                        "estimated_from": "an earlier run of the same subplan"
                        if tables.stage_rows(dag, stage_id) is not None else "the tables' statistics"}
        if subplan_rows is not None and share < 1.0:
            figure["estimated_subplan_rows"] = round(subplan_rows, 1)
        written, actual = (measured or {}).get(stage_id, (False, 0))
        if rows is not None and written:
            figure["q_error"] = round(q_error(rows, actual), 2)
        figures[stage_id] = figure
    return figures


def q_error(estimate: float, actual: float) -> float:
    """How far an estimate is off, as a factor either way (Moerkotte et al.'s q-error; a count below one row
    counts as one)."""
    estimate, actual = max(estimate, 1.0), max(actual, 1.0)
    return max(estimate / actual, actual / estimate)


def join_costing(settings: Settings, tables: KnownTables, calibration: Calibration, cores: int,
                 estimates: JoinEstimates | None = None) -> JoinCosting:
    """Unit costs of a join tree: a shuffled row is written, sent and read (C_W + C_T + C_R per page), a stage
    output's row written and read back, and a repartition join's stage pays a job's fixed cost
    (``benefit.materialization_cost`` of nothing); spread over the cores."""
    costs = calibration.costs
    page_share = NOMINAL_ROW_BYTES / PAGE_BYTES / max(cores, 1)
    return JoinCosting(
        estimates=estimates or JoinEstimates(tables), sizes=Sizes(tables.source),
        broadcast_threshold=settings.broadcast_threshold, passing=settings.ip != "off",
        shuffled_row_seconds=(costs.c_write + costs.c_transfer + costs.c_read) * page_share,
        written_row_seconds=(costs.c_write + costs.c_read) * page_share,
        stage_seconds=materialization_cost(0.0, cores, calibration),
        read_byte_seconds=costs.c_read / PAGE_BYTES / max(cores, 1),
        written_byte_seconds=(costs.c_write + costs.c_read) / PAGE_BYTES / max(cores, 1))
