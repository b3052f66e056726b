"""Push single-relation predicates of a join block down to the relation they read (map-side filtering)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from aipq.planner.logical import Filter, Join, JoinBlock, Node, Scan, conjuncts, refs, transform_up


def with_filter(node: Node, condition: exp.Expression) -> Node:
    """``node`` filtered by ``condition``; a scan takes it as a scan filter, and it passes below a semi or
    anti join (which only removes rows of its left input) to that input."""
    if isinstance(node, Scan):
        return replace(node, filters=node.filters + tuple(conjuncts(condition)))
    if isinstance(node, Join) and node.kind in ("semi", "anti") and refs(condition) <= set(node.left.output):
        return replace(node, left=with_filter(node.left, condition))
    if isinstance(node, Filter):
        return with_filter(node.child, exp.and_(node.condition, condition, copy=False))
    return Filter(node, condition)


def push_down_filters(root: Node) -> Node:
    def push(node: Node) -> Node:
        if isinstance(node, JoinBlock):
            relations = list(node.relations)
            remaining = []
            for condition in node.conditions:
                reads = refs(condition)
                owner = next((i for i, rel in enumerate(relations) if reads and reads <= set(rel.output)), None)
                if owner is None:
                    remaining.append(condition)
                else:
                    relations[owner] = with_filter(relations[owner], condition)
            return JoinBlock(tuple(relations), tuple(remaining))
        if isinstance(node, Filter) and isinstance(node.child, (Scan, Join, Filter)):
            return with_filter(node.child, node.condition)
        return node

    return transform_up(root, push)
