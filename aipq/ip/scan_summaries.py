"""Filtered base tables as summary producers: aipq's step beyond the paper's job outputs.

In the paper only a job's output builds a summary, so the first join of a query prunes nothing: TPC-H Q9's
first stage shuffles all of lineitem to join it with the 5 % of parts whose name holds "green". A filtered
table small enough to read twice can summarize its keys before any stage runs: a SCAN stage reads it with its
map-side filters and writes its key columns, building the summary in that write (the same T_r as any stage's;
no stage reads the rows, so they go to Spark's ``noop`` sink unless an exact summary or ``--analyze`` needs them
on disk, ``engine/executor.py``), and the join stage probes its other input with it before the shuffle (P_m).
The key sets are exactly the values the filtered scan feeds its join, so ``ip/candidates.py`` admits
the same places as for a stage output on that path; a SCAN stage no edge can use is not added.

This is what Spark's own runtime filters do for inputs of 10 GB and more; here the benefit estimator decides
(its cost is the extra read of the small table, ``estimator/edge_inputs.py``), and a SCAN stage whose summary no
strategy builds is not run (``engine/executor.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aipq.config import Settings
from aipq.files import Sizes, table_bytes
from aipq.ip.candidates import PRUNING_JOINS, find_candidates
from aipq.ip.reached_scans import reached_scans
from aipq.ip.scan_stages import with_scan_stages
from aipq.ip.staging import surely_written
from aipq.planner.logical import Join, Node, Scan
from aipq.planner.physical import read_share
from aipq.planner.stages import StageDag

# Strategies that pass information from filtered scans; HIP is the paper's baseline and keeps to job outputs.
SCAN_STRATEGIES = ("always", "oracle", "adaptive")


# A filtered table may also be read twice when it is at most this share of the query's largest table: the
# bound grows with the data (TPC-H SF 10's part, 66 MB against lineitem's 2.4 GB) while a table as large as the
# one it would prune is never read twice (docs/decisions.md).
SCAN_SUMMARY_SHARE_OF_LARGEST = 1 / 8


def scan_summary_bound(dag: StageDag, max_bytes: int, sizes: Callable[[str], int | None]) -> int:
    """The largest table a filtered scan's pre-pass may read: ``--scan-summaries``, or a share of the query's
    largest table when that is more."""
    return read_twice_bound(max_bytes, _largest_table_bytes(dag, sizes))


def read_twice_bound(max_bytes: int, largest: int) -> int:
    """``scan_summary_bound`` given the query's largest table's bytes."""
    return max(max_bytes, int(largest * SCAN_SUMMARY_SHARE_OF_LARGEST))


def filtered_scans(dag: StageDag, max_bytes: int, sizes: Callable[[str], int | None],
                   max_read_bytes: int = 0) -> list[Scan]:
    """Scans with map-side filters in stages that join, of tables at most ``max_bytes``, or whose pre-pass reads
    at most ``max_read_bytes`` of the columns it needs (and not of the query's largest table): a wide table's
    pre-pass reads a few of its columns (TPC-H Q2's part, beyond an eighth of partsupp at SF 10)."""
    found: dict[int, Scan] = {}
    largest = _largest_table_bytes(dag, sizes)
    for stage in dag.stages:
        if not any(isinstance(n, Join) and n.kind in PRUNING_JOINS for n in stage.plan.walk()):
            continue
        for node in stage.plan.walk():
            if isinstance(node, Scan) and node.filters and may_read_twice(node, sizes, max_bytes, max_read_bytes,
                                                                          largest):
                found.setdefault(id(node), node)
    return list(found.values())


def may_read_twice(scan: Scan, sizes: Callable[[str], int | None], max_bytes: int, max_read_bytes: int,
                   largest: int) -> bool:
    """Whether a pre-pass may read ``scan``'s table: at most ``max_bytes`` of files, or, when not the largest
    table (``largest`` bytes), at most ``max_read_bytes`` of the columns the pass reads."""
    size = table_bytes(sizes, scan.table)
    if size is None:
        return False
    return size <= max_bytes or (size < largest and size * read_share(scan, with_filter_columns=True) <= max_read_bytes)


def _largest_table_bytes(dag: StageDag, sizes: Callable[[str], int | None]) -> int:
    return max((largest_table_bytes(stage.plan, sizes) for stage in dag.stages), default=0)


def largest_table_bytes(root: Node, sizes: Callable[[str], int | None]) -> int:
    """The bytes of the largest table a plan reads."""
    return max((table_bytes(sizes, n.table) or 0 for n in root.walk() if isinstance(n, Scan)), default=0)


def add_scan_summaries(dag: StageDag, settings: Settings, sizes: Sizes) -> StageDag:
    """``dag`` with a SCAN stage, run before the others, for each filtered scan whose keys some stage may use, and
    for each small table their keys reach (``ip/reached_scans.py``)."""
    if settings.ip not in SCAN_STRATEGIES or settings.scan_summaries <= 0:
        return dag  # 0 turns pre-passes off, whatever the tables' sizes
    bound = scan_summary_bound(dag, settings.scan_summaries, sizes)
    scans = filtered_scans(dag, bound, sizes, settings.scan_summaries)
    if not scans:
        return dag
    reached = reached_scans(dag, scans, bound, sizes, settings.scan_reach)
    scans += [scan for scan, _ in reached.values()]
    inputs = {node_id: plan for node_id, (_, plan) in reached.items()}
    first = max(s.id for s in dag.stages) + 1
    trial = _with_scans(dag, {id(scan): (first + i, scan, scan.output) for i, scan in enumerate(scans)}, inputs)
    keys: dict[int, list[str]] = {}
    producers = set(trial.scan_sources.values())
    for candidate in find_candidates(trial, surely_written(trial, settings)):
        columns = keys.setdefault(candidate.producer, []) if candidate.producer in producers else None
        if columns is not None and candidate.column not in columns:
            columns.append(candidate.column)
    kept = [(scan, tuple(keys[first + i])) for i, scan in enumerate(scans) if first + i in keys]
    if not kept:
        return dag
    # consecutive ids for the scans kept
    return _with_scans(dag, {id(scan): (first + i, scan, columns) for i, (scan, columns) in enumerate(kept)}, inputs)


def _with_scans(dag: StageDag, scans: dict[int, tuple[int, Scan, tuple[str, ...]]],
                inputs: dict[int, Node]) -> StageDag:
    return replace(with_scan_stages(dag, list(scans.values()), inputs),
                   scan_sources={node_id: stage_id for node_id, (stage_id, _, _) in scans.items()})
