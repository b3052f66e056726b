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

# The join kinds whose every output row carries one row of that input unchanged, so that a condition on that
# input's columns alone may filter the input instead of the output.
_PRESERVES_LEFT = ("inner", "cross", "left", "semi", "anti")
_PRESERVES_RIGHT = ("inner", "cross", "right")


def with_filter(node: Node, condition: exp.Expression) -> Node:
    """``node`` filtered by ``condition``; a scan takes it as a scan filter, a join block as conditions of
    its own, and a binary join passes each part to the input it reads alone where the join keeps that
    input's rows as they are (a WHERE on the preserved side of an outer join filters that side first)."""
    if isinstance(node, Scan):
        return replace(node, filters=node.filters + tuple(conjuncts(condition)))
    if isinstance(node, JoinBlock):
        return distribute(node.relations, node.conditions, conjuncts(condition))
    if isinstance(node, Join):
        return filtered_join(node, conjuncts(condition))
    if isinstance(node, Filter):
        return with_filter(node.child, exp.and_(node.condition, condition, copy=False))
    return Filter(node, condition)


def filtered_join(join: Join, parts: list[exp.Expression]) -> Node:
    """``join`` with ``parts`` applied: each below it where it reads one preserved input alone, the rest
    above it."""
    left, right, above = [], [], []
    for part in parts:
        reads = refs(part)
        if reads and reads <= set(join.left.output) and join.kind in _PRESERVES_LEFT:
            left.append(part)
        elif reads and reads <= set(join.right.output) and join.kind in _PRESERVES_RIGHT:
            right.append(part)
        else:
            above.append(part)
    if left or right:
        join = replace(join, left=with_filter(join.left, and_all(left)) if left else join.left,
                       right=with_filter(join.right, and_all(right)) if right else join.right)
    condition = and_all(above)
    return Filter(join, condition) if condition is not None else join


def distribute(relations: tuple[Node, ...], kept: tuple[exp.Expression, ...],
               new: list[exp.Expression]) -> JoinBlock:
    """A join block of ``relations`` whose ``new`` conditions go to the one relation each reads alone; the
    others are kept as the block's, each relation also taking what an OR among them implies about it.
    ``kept`` are conditions already distributed so."""
    relations, remaining = list(relations), list(kept)
    for condition in new:
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
            return distribute(node.relations, (), list(node.conditions))
        if isinstance(node, Filter) and isinstance(node.child, (Scan, Join, JoinBlock, Filter)):
            return with_filter(node.child, node.condition)
        return node

    return transform_up(root, push)
