"""Small tables that a filtered table's keys reach through a join, summarized in a pre-pass like filtered tables.

TPC-H Q21 keeps the suppliers of one nation; its lineitem ``l1`` joins supplier, not nation, and the nation's
filter reaches it only through supplier. A pre-pass over supplier semi-joined with the filtered nation reads the
suppliers that can reach the result and summarizes their ``s_suppkey``, which prunes ``l1`` before its shuffle
as a filter on supplier itself would. This is predicate transfer's forward pass (``ip/transfer.py``) kept to
small tables and done as one plan per table: the semi joins are map-side, in the pre-pass's own job, and the
benefit estimator decides, as for any pre-pass, whether it runs and where its summaries probe.

A table T is reached from a filtered (or already reached) table F when ``ip/transfer.py``'s admissibility has
an edge F → T: F's keys may prune T's scan. Then every row of T that reaches the result has a matching row of
F that passes F's filters, so T semi-joined with the reduced F holds every such row, and its keys summarize T
as soundly as a filter of T's own would (by induction over the hops).
"""

from __future__ import annotations

from dataclasses import replace

from aipq.files import Sizes, table_bytes
from aipq.ip.transfer import Edge, admissible_edges, joined_scans, within_bound
from aipq.planner.logical import Join, Node, Scan
from aipq.planner.stages import StageDag


def reached_scans(dag: StageDag, filtered: list[Scan], max_bytes: int, sizes: Sizes,
                  hops: int) -> dict[int, tuple[Scan, Node]]:
    """Scan node id → (scan, the plan its pre-pass reads) for each unfiltered table of at most ``max_bytes`` that
    the filtered scans' keys reach through at most ``hops`` joins (``--scan-reach``: each hop is one more semi
    join in the pre-pass and one more table it reads)."""
    if hops <= 0:
        return {}
    small = [s for s in joined_scans(dag) if within_bound(table_bytes(sizes, s.table), max_bytes)]
    pool = {id(s): s for s in small} | {id(s): s for s in filtered}
    if len(pool) < 2:
        return {}
    edges = admissible_edges(dag, list(pool.values()))
    reduced: dict[int, Node] = {id(s): s for s in filtered}
    found: dict[int, tuple[Scan, Node]] = {}
    for _ in range(hops):
        level: dict[int, Node] = {}
        for scan in small:
            if id(scan) in reduced:
                continue
            incoming = [e for e in edges if e.target == id(scan) and e.source in reduced]
            plan = _semi_joined(scan, incoming, reduced)
            if plan is not scan:
                level[id(scan)] = plan
                found[id(scan)] = (scan, plan)
        if not level:
            break
        reduced.update(level)
    return found


def _semi_joined(scan: Scan, incoming: list[Edge], reduced: dict[int, Node]) -> Node:
    """``scan`` semi-joined (map-side) with a copy of each reduced table an edge comes from; one edge per source
    table, and none whose columns would share a name with the scan's."""
    plan: Node = scan
    seen: set[int] = set()
    for edge in incoming:
        if edge.source in seen:
            continue
        source = _copy(reduced[edge.source])
        if set(source.output) & set(scan.output):
            continue
        seen.add(edge.source)
        plan = Join(plan, source, "semi", (edge.target_column,), (edge.column,), physical="broadcast",
                    broadcast_side="right")
    return plan


def _copy(plan: Node) -> Node:
    """The plan with new nodes: a pre-pass's copy of a table is not the scan the query's stages read."""
    if isinstance(plan, Scan):
        return replace(plan)
    if isinstance(plan, Join):
        return replace(plan, left=_copy(plan.left), right=_copy(plan.right))
    raise TypeError(f"a reduced table is scans and semi joins, not {type(plan).__name__}")
