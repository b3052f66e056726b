"""Re-optimization's plan (``aipq/reoptimizer.py`` decides when to re-optimize): the logical plan of a query
some of whose stages have run, with each finished join of a block's relations standing in that block as one
relation that reads the stage's output, so that ordering the joins again plans only the work not yet done.

A finished stage is matched to the plan built again from the query by its base-table scans: internal column
names are unique in a query, so a scan of the stage's plan names the scan of the rebuilt plan it came from.
Whatever cannot be matched exactly (a stage over part of a relation, relations sharing scans, a column the
stage's output dropped and no equal one stands for) leaves the plan as it was: re-planning is an
optimization, never a risk to the rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sqlglot import exp

from aipq.planner.joins import equi_join_classes
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    JoinBlock,
    Node,
    Project,
    Scan,
    Sort,
    col,
    refs,
    transform_up,
)
from aipq.planner.stages import StageDag, StageRead


def _scan_names(scan: Scan) -> frozenset[str]:
    return frozenset(name for name, _ in scan.columns + scan.filter_only)


def covered_scans(dag: StageDag, stage_id: int) -> list[Scan]:
    """The base-table scans a stage's output derives from, through the stages it reads."""
    found: list[Scan] = []
    stack: list[Node] = [dag.stage(stage_id).plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Scan):
            found.append(node)
        elif isinstance(node, StageRead):
            stack.append(dag.stage(node.stage_id).plan)
        else:
            stack.extend(node.children)
    return found


def _top_is_inner_join(node: Node) -> bool:
    while isinstance(node, (Project, Filter)):
        node = node.child
    return isinstance(node, Join) and node.kind == "inner"


class _Collapser:
    """Finds, per join block of the rebuilt plan, the finished stages that joined some of its relations."""

    def __init__(self, root: Node, dag: StageDag, finished: Iterable[int]):
        self.dag = dag
        scans = [n for n in root.walk() if isinstance(n, Scan)]
        self.owner = {name: id(scan) for scan in scans for name in _scan_names(scan)}
        # the largest finished joins first: a later stage covers the earlier ones it read
        self.finished: list[tuple[int, frozenset[int]]] = []
        for stage_id in finished:
            if not _top_is_inner_join(dag.stage(stage_id).plan):
                continue
            covered = self.covered(stage_id)
            if covered:
                self.finished.append((stage_id, covered))
        self.covering = dict(self.finished)
        self.finished.sort(key=lambda item: -len(item[1]))
        self.collapsed: list[int] = []
        self.failed = False

    def covered(self, stage_id: int) -> frozenset[int] | None:
        found = set()
        for scan in covered_scans(self.dag, stage_id):
            names = _scan_names(scan)
            owners = {self.owner.get(name) for name in names}
            if not names or len(owners) != 1 or None in owners:
                return None
            found |= owners
        return frozenset(found)

    def block(self, block: JoinBlock) -> Node:
        scans = [self.relation_scans(relation) for relation in block.relations]
        if any(not s for s in scans) or sum(len(s) for s in scans) != len(frozenset().union(*scans)):
            return block  # a relation without scans (VALUES), or relations sharing a subplan
        for stage_id, covered in self.finished:
            inside = [i for i, s in enumerate(scans) if s <= covered]
            if len(inside) < 2 or frozenset().union(*(scans[i] for i in inside)) != covered:
                continue
            collapsed = self._replace(block, inside, stage_id)
            if collapsed is None:
                self.failed = True
                return block
            self.collapsed.append(stage_id)
            return self.block(collapsed)
        return block

    def relation_scans(self, relation: Node) -> frozenset[int]:
        """The rebuilt plan's scans under a block relation (a finished stage's read: the scans it covered)."""
        found: set[int] = set()
        for node in relation.walk():
            if isinstance(node, Scan):
                found.add(id(node))
            elif isinstance(node, StageRead):
                found |= self.covering.get(node.stage_id, frozenset())
        return frozenset(found)

    def _replace(self, block: JoinBlock, inside: list[int], stage_id: int) -> JoinBlock | None:
        """The block with relations ``inside`` replaced by a read of the stage that joined them; its conditions
        between those relations dropped (the stage applied them), the others reading the stage's columns."""
        stage = self.dag.stage(stage_id)
        read = StageRead(stage_id, stage.output_columns)
        available = set(stage.output_columns)
        names_inside = set().union(*(block.relations[i].output for i in inside))
        classes, _ = equi_join_classes(block)
        stand_in: dict[str, str] = {}
        for members in classes.classes():
            present = sorted(m for m in members if m in available)
            for member in members:
                if member in names_inside and member not in available and present:
                    stand_in[member] = present[0]
        conditions = []
        for condition in block.conditions:
            names = refs(condition)
            if names and names <= names_inside:
                continue
            missing = {n for n in names & names_inside if n not in available}
            if missing - stand_in.keys():
                return None
            if missing:
                condition = condition.transform(
                    lambda node, missing=missing: col(stand_in[node.name]) if isinstance(node, exp.Column)
                    and node.name in missing else node)
            conditions.append(condition)
        relations = [read if i == inside[0] else relation for i, relation in enumerate(block.relations)
                     if i == inside[0] or i not in inside]
        return replace(block, relations=tuple(relations), conditions=tuple(conditions))


def collapse_finished(root: Node, dag: StageDag, finished: Iterable[int]) -> tuple[Node, list[int]] | None:
    """``root`` (a query's plan with its join blocks unordered) with every join of block relations that a
    finished stage of ``dag`` computed replaced by a read of its output, and the stages so used; None when a
    finished join cannot stand in its block (the plan is then kept as it is)."""
    collapser = _Collapser(root, dag, finished)
    if not collapser.finished:
        return root, []
    new_root = transform_up(root, lambda n: collapser.block(n) if isinstance(n, JoinBlock) else n)
    if collapser.failed:
        return None
    return new_root, collapser.collapsed


def references_resolve(root: Node) -> bool:
    """Whether every column an operator reads is one its inputs output (a re-planned plan is checked before it
    runs: a name a finished stage did not keep would otherwise fail in Spark)."""
    for node in root.walk():
        inputs = set().union(*(set(child.output) for child in node.children)) if node.children else None
        if inputs is None:
            continue
        read: set[str] = set()
        if isinstance(node, Filter):
            read = refs(node.condition)
        elif isinstance(node, Project):
            read = set().union(*(refs(e) for _, e in node.items))
        elif isinstance(node, Join):
            read = set(node.left_keys) | set(node.right_keys) | refs(node.residual)
        elif isinstance(node, JoinBlock):
            read = set().union(*(refs(c) for c in node.conditions))
        elif isinstance(node, Aggregate):
            read = set().union(*(refs(e) for _, e in node.groups + node.aggregates))
        elif isinstance(node, Sort):
            read = {key.column for key in node.keys}
        if not read <= inputs:
            return False
    return True
