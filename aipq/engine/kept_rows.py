"""Scan once: the rows a predicate-transfer pass kept of its table, read by the stage that joins that table
instead of the table again (issue 83's first item).

A transfer pass (``ip/transfer.py``) reads a table with its filters and the probes of earlier passes, and builds
Bloom filters of its keys. Robust Predicate Transfer's ``create_bf`` operator then serves as the scan source of
the join, so each table is read once; here the pass's filtered rows, with every column the query reads of the
table, are kept in Spark's cache (memory, spilling to disk), and the compiler reads them wherever that scan is
compiled again: in a later pass over the same table (the backward pass reads the forward pass's rows) and in the
stage that joins it, which still probes them with the filters that reach the table later in the schedule. Kept
rows are a pass's output, a superset of what the joins need (a pass keeps every row that reaches the result), so
reading them gives the same rows as reading the table. They are unpersisted when the run ends, failed or not.

A pass that keeps rows runs as an action of its own, after the passes before it have run: its cache is then built
by the action's thread, never inside one of Spark's subquery threads, where a relation's builder holds a lock
while it waits for the subqueries of the relation's plan (``pass_job.run_alone``). Tables too small to be worth
that action are read again instead (``--transfer-keep``).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from aipq.engine.statistics import StatisticsCollector
from aipq.files import table_bytes
from aipq.planner.logical import Scan
from aipq.planner.stages import Stage, StageDag

HOW_KEPT = "Spark's cache, memory and disk"


def kept_frame(frame: DataFrame) -> DataFrame:
    """The way a pass's rows are kept: ``frame`` in Spark's cache, what does not fit in memory spilled to the
    executors' disks. Filled by the pass's own action (the aggregate that builds its filters), found by Spark
    wherever its plan recurs (the plans stay as they are, with the probes' row counts), read back by column; a
    local checkpoint or a write would cut the lineage but run a second job or a write (docs/decisions)."""
    return frame.persist(StorageLevel.MEMORY_AND_DISK)


def rows_to_keep(dag: StageDag, stage: Stage, statistics: StatisticsCollector | None,
                 sizes: Callable[[str], int | None], least_bytes: int) -> Scan | None:
    """The scan whose filtered rows the transfer pass ``stage`` keeps for the stages that read it again, or None.
    A pass keeps them when its table's files hold ``least_bytes`` or more (``--transfer-keep``; negative: never),
    unless the run collects the table's statistics: those observe the raw table read, which the stage that joins
    the table would then not make."""
    if stage.id not in dag.transfer_passes or least_bytes < 0:
        return None
    scans = [node for node in stage.plan.walk() if isinstance(node, Scan)]
    if len(scans) != 1:
        return None
    scan = scans[0]
    if least_bytes > 0 and (table_bytes(sizes, scan.table) or 0) < least_bytes:
        return None
    if statistics is not None and statistics.would_observe_scan(scan):
        return None
    return scan


class KeptRows:
    """The kept rows of one run, by the scan they are the rows of (the compiler substitutes them for it)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[Scan, DataFrame, int]] = {}  # id(scan) → (scan, cached frame, pass id)
        self._superseded: list[DataFrame] = []
        self.keeping: tuple[Scan, int] | None = None  # while a keeping pass compiles: its scan and stage id
        self._served: list[int] = []  # passes whose kept rows were compiled into a plan since ``take_served``

    def frame(self, scan: Scan) -> DataFrame | None:
        """The rows kept of ``scan``, if a pass kept them (noting that a plan reads them)."""
        found = self._kept.get(id(scan))
        if found is None or found[0] is not scan:  # the scan object itself is held: its id is never reused
            return None
        self._served.append(found[2])
        return found[1]

    def kept(self, scan: Scan) -> bool:
        found = self._kept.get(id(scan))
        return found is not None and found[0] is scan

    def keep(self, scan: Scan, frame: DataFrame) -> DataFrame:
        """``frame`` (the keeping pass's rows of ``scan``, probed) cached for the plans compiled from now on; the
        rows an earlier pass kept of it are freed once the pass job that reads them has run."""
        assert self.keeping is not None and self.keeping[0] is scan
        earlier = self._kept.get(id(scan))
        if earlier is not None:
            self._superseded.append(earlier[1])
        cached = kept_frame(frame)
        self._kept[id(scan)] = (scan, cached, self.keeping[1])
        return cached

    def take_served(self) -> list[int]:
        """The passes whose kept rows the plans compiled since the last call read, in order, once each."""
        served, self._served = list(dict.fromkeys(self._served)), []
        return served

    def drop_superseded(self) -> None:
        """Free the rows a later pass over the same table has since kept (its job has read them)."""
        superseded, self._superseded = self._superseded, []
        for frame in superseded:
            frame.unpersist(blocking=False)

    def release(self) -> None:
        """The run is over: every kept frame is freed."""
        self.drop_superseded()
        kept, self._kept = self._kept, {}
        for _, frame, _ in kept.values():
            frame.unpersist(blocking=False)
