"""Push single-relation predicates of a join block down to the relation they read (map-side filtering).

A predicate over several relations whose every OR branch also constrains one relation alone implies that
relation's part: from ``(n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND
n2.n_name = 'FRANCE')`` (TPC-H Q7) each nation scan gets ``n_name = 'FRANCE' OR n_name = 'GERMANY'``. The
derived filter is pushed down and the original stays where it was, so results are unchanged; what changes is
that a small table becomes a filtered one, whose keys can then prune the large inputs it joins with.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from aipq.planner.logical import Filter, Join, JoinBlock, Node, Scan, and_all, conjuncts, refs, transform_up


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


def implied_filter(condition: exp.Expression, columns: set[str]) -> exp.Expression | None:
    """What ``condition`` implies about a relation with ``columns`` alone: for an OR whose every branch has
    conjuncts reading only those columns, the OR of those conjuncts (a TRUE branch makes its own part TRUE);
    otherwise None."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if not isinstance(condition, exp.Or):
        return None
    parts = []
    for branch in condition.flatten():
        own = [c for c in conjuncts(branch) if refs(c) and refs(c) <= columns]
        if not own:
            return None
        parts.append(and_all(c.copy() for c in own))
    return exp.or_(*parts, copy=False)


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
                    for i, relation in enumerate(relations):
                        implied = implied_filter(condition, set(relation.output))
                        if implied is not None:
                            relations[i] = with_filter(relation, implied)
                else:
                    relations[owner] = with_filter(relations[owner], condition)
            return JoinBlock(tuple(relations), tuple(remaining))
        if isinstance(node, Filter) and isinstance(node.child, (Scan, Join, Filter)):
            return with_filter(node.child, node.condition)
        return node

    return transform_up(root, push)
