"""Join ordering: an unordered JoinBlock becomes a tree of binary Joins, linear, bushy or cost-based.

Equality predicates between columns of different relations form equivalence classes of join keys (in Q5,
``c_nationkey = s_nationkey = n_nationkey`` is one class). Two groups of relations are connected when a class
has members on both sides; joining them uses one key pair per shared class, which also applies the
transitively implied equalities and avoids Cartesian products the written order would cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from aipq.config import PLANS
from aipq.planner.join_order import JoinCosting, JoinGraph, Shape, choose_order
from aipq.planner.logical import Filter, Join, JoinBlock, Node, and_all, refs, transform_up


class KeyClasses:
    """Union-find over column names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def classes(self) -> list[list[str]]:
        groups: dict[str, list[str]] = {}
        for name in self.parent:
            groups.setdefault(self.find(name), []).append(name)
        return list(groups.values())


@dataclass
class Group:
    node: Node
    members: frozenset[int]  # relation indexes
    shape: Shape  # the same tree over relation indexes


def equi_join_classes(block: JoinBlock) -> tuple[KeyClasses, list[exp.Expression]]:
    """Key equivalence classes from column = column predicates across relations; the rest are residuals."""
    owner = {name: i for i, rel in enumerate(block.relations) for name in rel.output}
    classes = KeyClasses()
    residuals = []
    for condition in block.conditions:
        if (isinstance(condition, exp.EQ) and isinstance(condition.this, exp.Column)
                and isinstance(condition.expression, exp.Column)):
            a, b = condition.this.name, condition.expression.name
            if a in owner and b in owner and owner[a] != owner[b]:
                classes.union(a, b)
                continue
        residuals.append(condition)
    return classes, residuals


def join_graph(block: JoinBlock) -> JoinGraph:
    """The block's relations and, per key class, each member relation's (first) column."""
    owner = {name: i for i, rel in enumerate(block.relations) for name in rel.output}
    classes, _ = equi_join_classes(block)
    members = [sorted(names, key=lambda n: (owner[n], n)) for names in classes.classes()]
    return JoinGraph(block.relations, tuple({owner[m]: m for m in reversed(names)} for names in members))


def order_joins(root: Node, shape: str, costing: JoinCosting | None = None,
                notes: list[str] | None = None) -> Node:
    """Every join block as a tree of the given shape; ``cost`` needs ``costing`` (without it, or without
    statistics, the written order) and appends how each block was ordered to ``notes``."""
    if shape not in PLANS:
        raise ValueError(f"unknown plan shape {shape!r}")
    notes = notes if notes is not None else []
    return transform_up(root, lambda n: _join_tree(n, shape, costing, notes) if isinstance(n, JoinBlock) else n)


def _join_tree(block: JoinBlock, shape: str, costing: JoinCosting | None, notes: list[str]) -> Node:
    owner = {name: i for i, rel in enumerate(block.relations) for name in rel.output}
    classes, residuals = equi_join_classes(block)
    class_members = [sorted(members, key=lambda n: (owner[n], n)) for members in classes.classes()]
    pending = [(condition, {owner[n] for n in refs(condition) if n in owner}) for condition in residuals]

    def connected(a: Group, b: Group) -> bool:
        return any(_side(m, a, owner) and _side(m, b, owner) for m in class_members)

    def join(a: Group, b: Group) -> Group:
        left_keys, right_keys = [], []
        for members in class_members:
            on_a, on_b = _side(members, a, owner), _side(members, b, owner)
            if on_a and on_b:
                left_keys.append(on_a[0])
                right_keys.append(on_b[0])
        members = a.members | b.members
        applicable = [c for c, rels in pending if rels and rels <= members and not rels <= a.members
                      and not rels <= b.members]
        residual = and_all(applicable)
        kind = "inner" if left_keys or residual is not None else "cross"
        return Group(Join(a.node, b.node, kind, tuple(left_keys), tuple(right_keys), residual), members,
                     (a.shape, b.shape))

    def build(tree: Shape) -> Group:
        return groups[tree] if isinstance(tree, int) else join(build(tree[0]), build(tree[1]))

    groups = [Group(rel, frozenset({i}), i) for i, rel in enumerate(block.relations)]
    result = _bushy(groups, connected, join) if shape == "bushy" else _linear(groups, connected, join)
    if shape == "cost" and len(groups) > 2:
        if costing is None:
            notes.append("as written: no statistics repository")
        else:
            choice = choose_order(join_graph(block), costing, result.shape)
            notes.append(choice.note)
            if choice.shape is not None:
                result = build(choice.shape)
    leftover = and_all(c for c, rels in pending if not rels)
    return Filter(result.node, leftover) if leftover is not None else result.node


def _side(members: list[str], group: Group, owner: dict[str, int]) -> list[str]:
    return [m for m in members if owner[m] in group.members]


def _linear(groups: list[Group], connected, join) -> Group:
    """Left-deep in written order; a relation not connected to the joined ones waits for one that is."""
    current, remaining = groups[0], groups[1:]
    while remaining:
        pick = next((g for g in remaining if connected(current, g)), remaining[0])
        remaining.remove(pick)
        current = join(current, pick)
    return current


def _bushy(groups: list[Group], connected, join) -> Group:
    """Pair connected groups level by level (in written order), so independent joins become siblings."""
    while len(groups) > 1:
        paired: list[Group] = []
        used: set[int] = set()
        for i, group in enumerate(groups):
            if i in used:
                continue
            partner = next((j for j in range(i + 1, len(groups)) if j not in used
                            and connected(group, groups[j])), None)
            if partner is None:
                paired.append(group)
            else:
                used.update((i, partner))
                paired.append(join(group, groups[partner]))
        if len(paired) == len(groups):  # nothing connected: a Cartesian product is unavoidable
            paired = [join(groups[0], groups[1])] + groups[2:]
        groups = paired
    return groups[0]
