"""Physical join choice: map-side (broadcast) for small base-table inputs, repartition otherwise.

A join input qualifies for broadcast when it is a map-side pipeline over base tables only (scans, filters,
projections and broadcast joins among them) whose files total at most the threshold. The planner decides and
the executor enforces it (Spark's own automatic broadcast is off in aipq's stages), so every later component —
the IP planner and the benefit estimator — knows each stage's physical join.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aipq.files import table_bytes
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    Scan,
    Sort,
    Window,
    transform_up,
)

# Which inputs Spark can broadcast for each join kind (the build side must not be the preserved side).
_BROADCASTABLE = {
    "inner": ("right", "left"),
    "cross": ("right", "left"),
    "left": ("right",),
    "semi": ("right",),
    "anti": ("right",),
    "right": ("left",),
    "full": (),
}


def pipeline_bytes(node: Node, sizes: Callable[[str], int | None]) -> int | None:
    """Bytes read by a map-side base-table pipeline, or None if it is not one (or sizes are unknown)."""
    total = 0
    for sub in node.walk():
        if isinstance(sub, (Aggregate, Sort, Limit, JoinBlock, Window)):
            return None
        if isinstance(sub, Join) and sub.physical != "broadcast":
            return None
        if isinstance(sub, Scan):
            size = table_bytes(sizes, sub.table)
            if size is None:
                return None
            total += size
    return total


def at_most_one_row(node: Node) -> bool:
    """An aggregate without grouping (a scalar subquery's value), possibly filtered or projected."""
    while isinstance(node, (Project, Filter, Limit)):
        if isinstance(node, Limit) and node.count <= 1:
            return True
        node = node.children[0]
    return isinstance(node, Aggregate) and not node.groups


def choose_physical_joins(root: Node, broadcast_threshold: int, sizes: Callable[[str], int | None]) -> Node:
    """Broadcast small base-table pipelines; always broadcast a one-row input (there is no key to
    repartition a scalar subquery's value on, and copying one row costs nothing)."""
    def choose(node: Node) -> Node:
        if not isinstance(node, Join):
            return node
        for side in _BROADCASTABLE[node.kind]:
            if at_most_one_row(node.left if side == "left" else node.right):
                return replace(node, physical="broadcast", broadcast_side=side)
        if broadcast_threshold <= 0:
            return node
        inputs = {"left": pipeline_bytes(node.left, sizes), "right": pipeline_bytes(node.right, sizes)}
        candidates = [(inputs[side], side) for side in _BROADCASTABLE[node.kind]
                      if inputs[side] is not None and inputs[side] <= broadcast_threshold]
        if not candidates:
            return node
        _, side = min(candidates)
        return replace(node, physical="broadcast", broadcast_side=side)

    return transform_up(root, choose)
