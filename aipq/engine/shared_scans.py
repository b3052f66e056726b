"""Shared scans of a batch (precision sharing, Krishnamurthy et al.): a table that several queries of a batch read
is read once, with every column any of them reads, and kept in Spark's cache (memory, spilling to disk) for all of
them; each query selects its columns and applies its own filters on it, so its rows are those of its own read."""

from __future__ import annotations

from dataclasses import dataclass

from aipq.catalog import TableEntry
from aipq.engine.session import read_table
from aipq.planner.logical import Scan
from aipq.planner.stages import StageDag


@dataclass
class SharedScan:
    entry: TableEntry
    columns: frozenset[str]
    frame: object = None  # the cached DataFrame, once made


def table_key(entry: TableEntry) -> tuple[str, tuple[str, ...]]:
    """A table as read: its name and the data paths (partitions) the read covers."""
    return (entry.qualified_name, entry.data_paths())


def plan_shared_scans(dags: list[StageDag]) -> dict[tuple[str, tuple[str, ...]], SharedScan]:
    """The tables more than one of ``dags`` reads (whole: a scan of pruned partitions reads its own), with the
    union of the columns they read."""
    readers: dict[tuple, set[int]] = {}
    shared: dict[tuple, SharedScan] = {}
    for index, dag in enumerate(dags):
        for stage in dag.stages:
            for node in stage.plan.walk():
                if isinstance(node, Scan) and node.table.source == "aipq":
                    key = table_key(node.table)
                    readers.setdefault(key, set()).add(index)
                    columns = frozenset(src for _, src in node.columns + node.filter_only)
                    found = shared.setdefault(key, SharedScan(node.table, frozenset()))
                    found.columns |= columns
    return {key: scan for key, scan in shared.items() if len(readers[key]) > 1 and scan.columns}


def start_shared_scans(spark, scans: dict[tuple, SharedScan]) -> None:
    """Each shared table's read, cached: it fills while the first query that reads it runs."""
    from pyspark import StorageLevel

    for scan in scans.values():
        columns = sorted(scan.columns)
        scan.frame = read_table(spark, scan.entry).select(*[f"`{c}`" for c in columns]).persist(
            StorageLevel.MEMORY_AND_DISK)


def stop_shared_scans(scans: dict[tuple, SharedScan]) -> None:
    for scan in scans.values():
        if scan.frame is not None:
            scan.frame.unpersist()
            scan.frame = None
