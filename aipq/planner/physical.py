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


def pipeline_bytes(node: Node, sizes: Callable[[str], int | None],
                   read_bytes: Callable[[Node], int | None] | None = None) -> int | None:
    """Bytes read by a map-side pipeline, or None if it is not one (or sizes are unknown). Its inputs are base
    tables, and with ``read_bytes`` (the bytes of another leaf, such as an earlier stage's measured output, or
    None when unknown) other leaves too."""
    total = 0
    for sub in node.walk():
        if isinstance(sub, (Aggregate, Sort, Limit, JoinBlock, Window)):
            return None
        if isinstance(sub, Join) and sub.physical != "broadcast":
            return None
        if isinstance(sub, Scan):
            size = table_bytes(sizes, sub.table)
        elif read_bytes is not None and not sub.children:
            size = read_bytes(sub)
        else:
            continue
        if size is None:
            return None
        total += size
    return total


def _smallest_broadcastable(node: Join, inputs: dict[str, int | None], threshold: int) -> str | None:
    """The side to copy to every task: the smaller of the inputs within ``threshold`` that the join kind can
    build a broadcast hash table from."""
    candidates = [(inputs[side], side) for side in _BROADCASTABLE[node.kind]
                  if inputs[side] is not None and inputs[side] <= threshold]
    return min(candidates)[1] if candidates else None


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
        side = _smallest_broadcastable(node, inputs, broadcast_threshold)
        return replace(node, physical="broadcast", broadcast_side=side) if side else node

    return transform_up(root, choose)


def measured_broadcasts(root: Node, broadcast_threshold: int, sizes: Callable[[str], int | None],
                        read_bytes: Callable[[Node], int | None]) -> dict[int, str]:
    """Repartition joins of a stage's plan that can run map-side now that the stage outputs they read are
    measured (Hive's conditional map join): id of the join → the side to broadcast, an input of earlier stages'
    outputs (``read_bytes``) and small base tables within the threshold."""
    if broadcast_threshold <= 0:
        return {}
    chosen: dict[int, str] = {}
    for node in root.walk():
        if isinstance(node, Join) and node.physical != "broadcast":
            inputs = {"left": pipeline_bytes(node.left, sizes, read_bytes),
                      "right": pipeline_bytes(node.right, sizes, read_bytes)}
            side = _smallest_broadcastable(node, inputs, broadcast_threshold)
            if side:
                chosen[id(node)] = side
    return chosen
