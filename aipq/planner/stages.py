"""Cut a physical logical plan into stages: the paper's MapReduce job plan.

A stage has one reduce-side operator — a repartition JOIN (consecutive joins on the same key share a stage,
as in Hive), a GROUP-BY or a global SORT — plus the map-side pipelines that feed it (scans with filters,
projections and broadcast joins of small tables) and the row-wise operators after it (filters, projections,
broadcast joins, LIMIT) up to its output write. A query with no such operator is one MAP stage. Stages that
read another stage's output do so through ``StageRead`` leaves.

``StageDag`` keeps both graphs of the paper's plan analyzer: the dataflow graph (producer → consumers) and
the dependency graph (consumer → producers), plus each stage's consumer join keys and its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from aipq.planner.logical import (
    Aggregate,
    Join,
    Node,
    QueryPlan,
    Scan,
    Sort,
    Window,
    replace_children,
)

Operator = Literal["JOIN", "GROUP-BY", "SORT", "WINDOW", "MAP", "SCAN"]


@dataclass(frozen=True, eq=False)
class StageRead(Node):
    """Read the output of an earlier stage."""

    stage_id: int
    columns: tuple[str, ...]

    @property
    def output(self) -> tuple[str, ...]:
        return self.columns


@dataclass
class Stage:
    id: int
    operator: Operator
    plan: Node
    reduce_node: Node | None  # the node of ``plan`` that shuffles
    output_columns: tuple[str, ...]
    tables: tuple[str, ...] = ()  # base tables scanned, qualified names
    input_stages: tuple[int, ...] = ()
    join_keys: tuple[tuple[str, ...], ...] = ()  # per reduce-side join input, its key columns
    consumer_keys: tuple[str, ...] = ()  # key columns the consuming JOIN stage joins this output on
    broadcast_joins: int = 0

    @property
    def name(self) -> str:
        return f"S{self.id}"

    def merged_joins(self) -> list[Join]:
        """The repartition joins this stage performs (more than one when they share a key)."""
        return [n for n in self.plan.walk() if isinstance(n, Join) and n.physical == "repartition"]


@dataclass(frozen=True)
class Transfer:
    """One probe of predicate transfer's schedule (``ip/transfer.py``): the summary ``producer`` (a SCAN pass)
    builds of its column ``column`` probes the scan ``node_id`` on ``target_column`` in stage ``stage`` (a later
    pass over that table, or the stage that reads it). ``join_stage`` and ``join_keys`` name the join that
    makes it admissible."""

    producer: int
    column: str
    stage: int
    node_id: int
    target_column: str
    label: str
    join_stage: int
    join_keys: tuple[str, str]


@dataclass
class StageDag:
    stages: list[Stage]  # in execution (topological) order
    plan: QueryPlan
    dataflow: dict[int, list[int]] = field(default_factory=dict)  # producer → consumers
    dependency: dict[int, list[int]] = field(default_factory=dict)  # consumer → producers
    # id of a filtered Scan → the SCAN stage that summarizes its keys in a pre-pass (ip/scan_summaries.py)
    scan_sources: dict[int, int] = field(default_factory=dict)
    # predicate transfer: the passes' probes, in the order they run (empty unless --ip transfer)
    transfers: tuple[Transfer, ...] = ()
    # SCAN stage id → "forward" or "backward": which pass of predicate transfer it is
    transfer_passes: dict[int, str] = field(default_factory=dict)
    # (pass stage id, column) → the keys the pass's filter of that column is sized for (``ip/transfer.py``)
    transfer_keys: dict[tuple[int, str], float] = field(default_factory=dict)
    # pass stage id → the rows the pass is estimated to keep after its filters and probes (``ip/transfer.py``)
    transfer_rows: dict[int, float] = field(default_factory=dict)
    # a write to a partitioned table: the final stage writes a folder per value of these columns
    partition_by: tuple[str, ...] = ()
    write_format: str = "parquet"  # the final stage's format (a table write: the table's)

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, stage_id: int) -> Stage:
        return next(s for s in self.stages if s.id == stage_id)

    def siblings(self, stage_id: int) -> list[int]:
        """Stages feeding the same consumer as this one (the paper's sibling jobs)."""
        result: list[int] = []
        for consumer in self.dataflow.get(stage_id, []):
            result += [p for p in self.dependency.get(consumer, []) if p != stage_id and p not in result]
        return result


def is_reduce_operator(node: Node) -> bool:
    if isinstance(node, Join):
        return node.physical == "repartition"
    return isinstance(node, (Aggregate, Sort, Window))


def _operator(node: Node | None) -> Operator:
    if isinstance(node, Join):
        return "JOIN"
    if isinstance(node, Aggregate):
        return "GROUP-BY"
    if isinstance(node, Sort):
        return "SORT"
    if isinstance(node, Window):
        return "WINDOW"
    return "MAP"


def _same_key_join(parent: Node | None, child: Node) -> bool:
    """Hive puts consecutive joins on the same key in one job; so do we, for inner, semi and anti joins
    (a semi/anti join keeps its left input's partitioning, so the next join on that key needs no shuffle)."""
    if not (isinstance(parent, Join) and isinstance(child, Join)):
        return False
    mergeable = ("inner", "semi", "anti")
    if parent.kind not in mergeable or child.kind not in mergeable or child.physical != "repartition":
        return False
    if parent.kind in ("semi", "anti") and not _contains(parent.left, child):
        return False
    child_side = set(parent.left_keys) if _contains(parent.left, child) else set(parent.right_keys)
    return bool(child_side) and len(child_side) == len(child.left_keys) and (
        child_side <= set(child.left_keys) | set(child.right_keys))


def _contains(root: Node, target: Node) -> bool:
    return any(n is target for n in root.walk())


class _Cutter:
    def __init__(self, root: Node, first_id: int = 1, cut_inputs: frozenset[int] = frozenset()) -> None:
        self.first_id = first_id
        self.cut_inputs = cut_inputs  # node ids of map-side join inputs that are a MAP stage of their own
        self.stages: list[Stage] = []
        self.memo: dict[int, Stage] = {}
        self.parents: dict[int, int] = {}
        for node in root.walk():
            for child in node.children:
                self.parents[id(child)] = self.parents.get(id(child), 0) + 1

    def unshared_below(self, top: Node, target: Node) -> bool:
        """Neither ``top`` nor any node under it down to ``target`` has another parent; otherwise the stage is
        cut at ``target`` itself, once, and every reader applies its own row-wise operators."""
        node = top
        if self.parents.get(id(node), 0) > 1:
            return False
        while node is not target:
            node = node.children[0]
            if self.parents.get(id(node), 0) > 1:
                return False
        return True

    def stage_for(self, top: Node) -> Stage:
        if id(top) in self.memo:
            return self.memo[id(top)]
        reduce_node: Node | None = None
        merged: list[Node] = []

        def mergeable(node: Node) -> bool:
            return any(_same_key_join(m, node) and _direct_input(m, node) for m in merged)

        def visit(node: Node, below_reduce: bool) -> Node:
            nonlocal reduce_node
            if is_reduce_operator(node):
                if reduce_node is None and not below_reduce:
                    reduce_node = node
                    merged.append(node)
                    # the stage's own copy (its inputs are StageReads), so that paths in the stage plan meet it
                    reduce_node = replace_children(node, tuple(visit(c, True) for c in node.children))
                    return reduce_node
                if mergeable(node):
                    merged.append(node)
                    return replace_children(node, tuple(visit(c, True) for c in node.children))
                child = self.stage_for(node)
                return StageRead(child.id, node.output)
            if below_reduce:
                # Row-wise operators right above an earlier reduce operator (e.g. the projection that drops
                # join keys) run in that operator's stage, so its output is written already trimmed.
                # A reduce operator with several parents (a CTE read twice) is one stage its readers share;
                # each reader then applies its own row-wise operators.
                target = _reduce_below_chain(node)
                if target is not None and not mergeable(target) and self.unshared_below(node, target):
                    child = self.stage_for(node)
                    return StageRead(child.id, node.output)
            if id(node) in self.cut_inputs and node is not top:
                return StageRead(self.stage_for(node).id, node.output)
            if not node.children:
                return node
            return replace_children(node, tuple(visit(c, below_reduce) for c in node.children))

        plan = visit(top, False)
        nodes = list(plan.walk())
        stage = Stage(
            id=len(self.stages) + self.first_id,
            operator=_operator(reduce_node),
            plan=plan,
            reduce_node=reduce_node,
            output_columns=top.output,
            tables=tuple(dict.fromkeys(n.table.qualified_name for n in nodes if isinstance(n, Scan))),
            input_stages=tuple(dict.fromkeys(n.stage_id for n in nodes if isinstance(n, StageRead))),
            broadcast_joins=sum(1 for n in nodes if isinstance(n, Join) and n.physical == "broadcast"),
        )
        self.stages.append(stage)
        self.memo[id(top)] = stage
        return stage


def _reduce_below_chain(node: Node) -> Node | None:
    """The reduce operator under a chain of single-input row-wise operators starting at ``node``, if any."""
    while len(node.children) == 1 and not is_reduce_operator(node):
        node = node.children[0]
    return node if is_reduce_operator(node) else None


def _direct_input(parent: Node, child: Node) -> bool:
    """``child`` feeds ``parent`` through row-wise operators only (no other reduce operator between)."""
    for side in parent.children:
        node = side
        while True:
            if node is child:
                return True
            if is_reduce_operator(node) or len(node.children) != 1:
                break
            node = node.children[0]
    return False


def cut_stages(plan: QueryPlan, finished: Sequence[Stage] = (), cut_inputs: frozenset[int] = frozenset()) -> StageDag:
    """The plan's stages; with ``finished`` (stages of an earlier plan of the same query that have run, which
    ``plan`` reads through ``StageRead`` leaves: a re-plan) those first, and the new ones numbered after them.
    Each map-side join input in ``cut_inputs`` (node ids) is a MAP stage of its own (``ip/written_scans.py``)."""
    cutter = _Cutter(plan.root, max((s.id for s in finished), default=0) + 1, cut_inputs)
    cutter.stage_for(plan.root)
    dag = StageDag(stages=[replace(s, consumer_keys=()) for s in finished] + cutter.stages, plan=plan)
    for stage in dag.stages:
        dag.dependency[stage.id] = list(stage.input_stages)
        for producer in stage.input_stages:
            dag.dataflow.setdefault(producer, []).append(stage.id)
    for stage in dag.stages:
        _annotate_join_keys(dag, stage)
    return dag


def _annotate_join_keys(dag: StageDag, stage: Stage) -> None:
    joins = stage.merged_joins()
    keys = []
    for join in joins:
        keys += [join.left_keys, join.right_keys]
        for side, side_keys in ((join.left, join.left_keys), (join.right, join.right_keys)):
            for node in side.walk():
                if isinstance(node, StageRead) and set(side_keys) <= set(node.columns):
                    producer = dag.stage(node.stage_id)
                    if not producer.consumer_keys:
                        producer.consumer_keys = tuple(side_keys)
    stage.join_keys = tuple(keys)
