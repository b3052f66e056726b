"""Where a stage input's rows are shuffled: whether they reach the stage's shuffle at all, and which stage's
output the repartition join that shuffles them first could broadcast instead (a join that then runs map-side)."""

from __future__ import annotations

from aipq.planner.logical import Filter, Join, Project, path_to
from aipq.planner.physical import BROADCASTABLE
from aipq.planner.stages import Stage, StageRead


def feeds_shuffle(stage: Stage, leaf_id: int | None) -> bool:
    """Whether a stage input's rows are shuffled in this stage: it has a reduce operator above the input, and
    the input is not the broadcast side of a map-side join on the way (that side is sent whole, not shuffled)."""
    if stage.reduce_node is None or leaf_id is None:
        return False
    path = path_to(stage.reduce_node, leaf_id)
    if path is None:
        return False
    return not any(isinstance(node, Join) and node.physical == "broadcast"
                   and (node.broadcast_side == "left") == (index == 0) for node, index in path)


def broadcastable_partner(stage: Stage, leaf_id: int) -> StageRead | None:
    """The earlier stage's output on the other side of the repartition join that shuffles this input first (the
    deepest on its path), where the join's kind lets that side be broadcast; None otherwise."""
    path = path_to(stage.reduce_node, leaf_id) if stage.reduce_node is not None else None
    joins = [(node, index) for node, index in path or () if isinstance(node, Join) and node.physical != "broadcast"]
    if not joins:
        return None
    join, index = joins[-1]
    side, other = ("right", join.right) if index == 0 else ("left", join.left)
    while isinstance(other, (Project, Filter)):
        other = other.children[0]
    return other if isinstance(other, StageRead) and side in BROADCASTABLE[join.kind] else None
