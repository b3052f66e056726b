"""Where information passing is admissible: which stage outputs can summarize a join key, and which rows
elsewhere in the DAG those summaries may prune without changing the result.

A summary holds the values of column ``s`` in producer stage P's output. It may remove a row r from an input
X (column x) when every result row derived from r needs x equal to some value of s. That holds when X and P
meet at an inner or semi join J on a key pair (a, b) such that x reaches a and s reaches b through operators
that keep the value and only ever drop rows for it:

- filters, sorts, renames, inner joins (through a join key the value also travels to the other input: the
  transitive passing of the query's key equivalence classes), the left input of semi and anti joins (and a
  semi join's own key into its right input), aggregates grouped by the column, stage boundaries;
- never through outer joins (neither side), the right input of an anti join (NOT EXISTS / NOT IN), aggregates
  not grouped by the column, LIMIT or UNION — there a removed row could change the result.

Joins whose keys compare NULLs as equal (INTERSECT, EXCEPT) pass nothing: a probe drops the NULL keys that
such a join matches.

A filtered base table's SCAN stage (``ip/scan_summaries.py``) is a producer like a stage output: its keys
are the values its scan feeds the join. Where that join is map-side (broadcast) below the stage's shuffle, the
join itself drops the same rows as early, so the scan's summary has no place in that stage.

Pruning inside a stage that feeds several consumers, or at a leaf shared by two paths of one stage, would
change what the other reader sees, so such places are not targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from aipq.planner.logical import Aggregate, Filter, Join, Node, Project, Scan, Sort, Window
from aipq.planner.stages import Stage, StageDag, StageRead

Place = Literal["input", "output"]
# Joins across which one input's keys may prune the other.
PRUNING_JOINS = ("inner", "semi")
Relation = Literal["child-to-parent", "sibling-to-sibling", "filtered-scan", "transitive", "transfer"]


@dataclass(frozen=True)
class Target:
    """A place whose rows a summary can prune: a stage input before the shuffle, or a stage's output before
    it is written."""

    stage: int
    place: Place
    column: str
    node_id: int | None = None  # the Scan/StageRead leaf in the stage plan, for inputs
    label: str = ""
    path: tuple[int, ...] = ()  # the stages the trace entered through their outputs to get here
    reads: int | None = None  # for a StageRead input: the stage it reads

    @property
    def key(self) -> tuple:
        return (self.stage, self.place, self.node_id, self.column)

    @property
    def stable_key(self) -> tuple:
        """The same place in every plan of the same query (``key`` holds a plan node's object id, which names
        the node in one plan only)."""
        return (self.stage, self.place, self.label, self.column)


@dataclass(frozen=True)
class Candidate:
    producer: int  # the stage whose output column is summarized
    column: str
    target: Target
    relation: Relation
    join_stage: int  # the stage whose join makes the pruning valid
    join_keys: tuple[str, str]
    # deeper targets on the same path: if the summary is used on any of them, this target is already pruned
    covered_by: tuple[tuple, ...] = ()
    # stages above the producer on the path that may be fused: each holds a subset of its keys when written
    nearer: tuple[int, ...] = ()

    def describe(self) -> str:
        where = "before the shuffle" if self.target.place == "input" else "before its write"
        return (f"{self.relation}: S{self.producer}.{self.column} prunes {self.target.label} on "
                f"{self.target.column} {where} (join in S{self.join_stage} on {self.join_keys[0]} = "
                f"{self.join_keys[1]})")


@dataclass
class _Trace:
    targets: list[Target] = field(default_factory=list)
    # (stage, column, path): a stage output the values pass through, and the stages entered to reach it
    producers: list[tuple[int, str, tuple[int, ...]]] = field(default_factory=list)


class CandidateFinder:
    # a producer whose keys a written stage above it on the path also holds (a subset) is left to that stage
    prefer_nearest = True

    def __init__(self, dag: StageDag, descend: bool = True, written: Callable[[int], bool] = lambda stage: True):
        self.dag = dag
        self.descend = descend  # follow values into the stages that produced a stage's inputs
        # whether a stage's output is surely written (and so may build a summary): a stage that may be fused into
        # its consumer leaves the producers below it their edges, for when it builds none
        self.written = written
        self.order = {s.id: i for i, s in enumerate(dag.stages)}
        self.scans = set(dag.scan_sources.values())
        # counted on first use: a finder that stays inside one stage (``leaf_columns``, asked by the estimator
        # for every edge it prices) reads one stage's leaves and no stage's readers
        self._leaf_uses: dict[int, dict[int, int]] = {}
        self._readers: dict[int, int] | None = None

    def leaf_uses(self, stage_id: int) -> dict[int, int]:
        """How many times each leaf of the stage's plan occurs in it (a shared leaf once per path)."""
        if stage_id not in self._leaf_uses:
            self._leaf_uses[stage_id] = _leaf_uses(self.dag.stage(stage_id).plan)
        return self._leaf_uses[stage_id]

    def single_reader(self, stage_id: int) -> bool:
        if self._readers is None:
            self._readers = {}
            for stage in self.dag.stages:
                for node in all_nodes(stage.plan):
                    if isinstance(node, StageRead):
                        self._readers[node.stage_id] = self._readers.get(node.stage_id, 0) + 1
        return self._readers.get(stage_id, 0) == 1 and stage_id != self.dag.final.id

    def trace(self, stage_id: int, node: Node, column: str, out: _Trace, seen: set,
              path: tuple[int, ...] = ()) -> None:
        key = (stage_id, id(node), column)
        if key in seen:
            return
        seen.add(key)
        if isinstance(node, Scan):
            if column in node.output and self.leaf_uses(stage_id).get(id(node), 0) == 1:
                label = node.table.name if node.alias == node.table.name else f"{node.table.name} {node.alias}"
                out.targets.append(Target(stage_id, "input", column, id(node), label, path))
            scan_stage = self.dag.scan_sources.get(id(node))
            if scan_stage is not None and scan_stage != stage_id and column in node.output:
                out.producers.append((scan_stage, column, path))
            return
        if isinstance(node, StageRead):
            if self.leaf_uses(stage_id).get(id(node), 0) == 1:
                out.targets.append(Target(stage_id, "input", column, id(node), f"S{node.stage_id}", path,
                                          reads=node.stage_id))
            out.producers.append((node.stage_id, column, path))
            if self.descend and self.single_reader(node.stage_id):
                producer = self.dag.stage(node.stage_id)
                inner = path + (producer.id,)
                out.targets.append(Target(producer.id, "output", column, None, f"S{producer.id} output", inner))
                self.trace(producer.id, producer.plan, column, out, seen, inner)
            return
        if isinstance(node, (Filter, Sort)):
            self.trace(stage_id, node.child, column, out, seen, path)
        elif isinstance(node, Project):
            source = dict(node.items).get(column)
            if isinstance(source, exp.Column):
                self.trace(stage_id, node.child, source.name, out, seen, path)
        elif isinstance(node, Aggregate):
            # below a grouping set that leaves the key out, a row's group covers every key: none may go
            source = dict(node.groups).get(column)
            if isinstance(source, exp.Column) and source.name == column and node.grouped_in_every_set(column):
                self.trace(stage_id, node.child, column, out, seen, path)
        elif isinstance(node, Join):
            self.trace_join(stage_id, node, column, out, seen, path)
        elif isinstance(node, Window) and column in node.partition_keys():
            self.trace(stage_id, node.child, column, out, seen, path)
        # Limit, Union and anything else: the value's rows cannot be pruned below here.

    def trace_join(self, stage_id: int, join: Join, column: str, out: _Trace, seen: set,
                   path: tuple[int, ...]) -> None:
        on_left = column in join.left.output
        if join.kind in ("inner", "cross"):
            side, keys, other, other_keys = ((join.left, join.left_keys, join.right, join.right_keys) if on_left
                                             else (join.right, join.right_keys, join.left, join.left_keys))
            self.trace(stage_id, side, column, out, seen, path)
            for key, paired in zip(keys, other_keys):
                if key == column:
                    self.trace(stage_id, other, paired, out, seen, path)
        elif join.kind == "semi" and on_left:
            self.trace(stage_id, join.left, column, out, seen, path)
            for key, paired in zip(join.left_keys, join.right_keys):
                if key == column:
                    self.trace(stage_id, join.right, paired, out, seen, path)
        elif join.kind == "anti" and on_left:
            self.trace(stage_id, join.left, column, out, seen, path)
        # outer joins: stop

    def candidates(self) -> list[Candidate]:
        found: dict[tuple, Candidate] = {}
        for stage in self.dag.stages:
            for join in all_nodes(stage.plan):
                if not isinstance(join, Join) or join.kind not in PRUNING_JOINS or join.null_safe:
                    continue
                for a, b in zip(join.left_keys, join.right_keys):
                    left, right = _Trace(), _Trace()
                    self.trace(stage.id, join.left, a, left, set())
                    self.trace(stage.id, join.right, b, right, set())
                    for producers, targets in ((right.producers, left.targets), (left.producers, right.targets)):
                        for producer, column, path in producers:
                            usable = [t for t in targets if self.order[t.stage] > self.order[producer]
                                      and not self.joined_already(producer, t, stage, join)]
                            for target in usable:
                                nearer = _nearer(producer, path, producers, target, self.order)
                                if self.prefer_nearest and any(self.written(other) for other in nearer):
                                    continue
                                relation = self.relation(producer, target, stage.id)
                                covered_by = tuple(t.key for t in _deeper(target, usable))
                                candidate = Candidate(producer, column, target, relation, stage.id, (a, b),
                                                      covered_by, nearer if self.prefer_nearest else ())
                                found.setdefault((producer, column, target.key), candidate)
        return list(found.values())

    def joined_already(self, producer: int, target: Target, stage: Stage, join: Join) -> bool:
        """A filtered scan's keys on a target of the same stage that a map-side join below the shuffle meets:
        the join drops those rows itself before anything costly happens to them."""
        if producer not in self.scans or target.stage != stage.id or join.physical != "broadcast":
            return False
        return stage.reduce_node is None or any(n is join for c in stage.reduce_node.children for n in c.walk())

    def relation(self, producer: int, target: Target, join_stage: int) -> Relation:
        if producer in self.scans:
            same_stage = target.place == "input" and target.stage == join_stage
            return "filtered-scan" if same_stage else "transitive"
        inputs = self.dag.dependency.get(join_stage, [])
        if target.place == "input" and target.stage == join_stage and producer in inputs:
            return "child-to-parent"
        if producer in inputs and (target.stage in inputs or (target.path and target.path[0] in inputs)):
            return "sibling-to-sibling"
        return "transitive"


def _nearer(producer: int, path: tuple[int, ...], producers, target: Target,
            order: dict[int, int]) -> tuple[int, ...]:
    """The other stages on the same path, above this producer and finished before the target: each holds a
    subset of its keys (its rows come from this producer's through inner joins and filters)."""
    return tuple(sorted({other for other, _, _ in producers
                         if other != producer and other in path and order[other] < order[target.stage]}))


def _deeper(target: Target, targets: list[Target]) -> list[Target]:
    """The targets that make ``target`` redundant when used: pruning a stage's inputs already prunes its output,
    and pruning its output (or inputs) already prunes its reader's input. A strategy that cannot use them (HIP
    passes child-to-parent only) still uses ``target``."""
    def below(stage_id: int, path: tuple[int, ...]) -> list[Target]:
        prefix = path + (stage_id,)
        return [t for t in targets if t.path[:len(prefix)] == prefix]

    if target.reads is not None:
        return below(target.reads, target.path)
    if target.place == "output":
        return [t for t in below(target.stage, target.path[:-1]) if t.place == "input"]
    return []


def all_nodes(root: Node):
    """Every node occurrence (a shared leaf once per path)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _leaf_uses(root: Node) -> dict[int, int]:
    uses: dict[int, int] = {}
    for node in all_nodes(root):
        if not node.children:
            uses[id(node)] = uses.get(id(node), 0) + 1
    return uses


def find_candidates(dag: StageDag, written: Callable[[int], bool] = lambda stage: True) -> list[Candidate]:
    """The admissible edges; ``written`` tells which stages surely write their output (by default all do)."""
    return CandidateFinder(dag, written=written).candidates()


def leaf_sources(dag: StageDag, stage_id: int, column: str) -> list[Node]:
    """The Scan/StageRead leaves of one stage that an output column's values come from (each one bounds the
    number of distinct values: they must exist in all of them)."""
    return [leaf for leaf, _ in leaf_columns(dag, stage_id, column)]


def leaf_columns(dag: StageDag, stage_id: int, column: str) -> list[tuple[Node, str]]:
    """``leaf_sources`` with the column's name in each leaf's output."""
    finder = CandidateFinder(dag, descend=False)
    stage = dag.stage(stage_id)
    out = _Trace()
    finder.trace(stage_id, stage.plan, column, out, set())
    leaves = {id(n): n for n in all_nodes(stage.plan) if not n.children}
    return [(leaves[t.node_id], t.column) for t in out.targets if t.node_id in leaves]


def distinct_bound(dag: StageDag, stage_id: int, column: str, stage_rows: Callable[[int], float | None],
                   table_rows: Callable[[Scan], tuple[float | None, str]]) -> tuple[float, str] | None:
    """An upper bound on the distinct values of ``stage_id.column``, with where it came from: at most as many as
    any input its values come from has rows (a stage's output as written, a base table's rows). The one rule
    that Bloom filter sizing (engine) and the benefit estimator share; None when no input's size is known."""
    bounds = []
    for leaf in leaf_sources(dag, stage_id, column):
        if isinstance(leaf, StageRead):
            rows = stage_rows(leaf.stage_id)
            if rows is not None:
                bounds.append((float(rows), "measured: rows of its input stage"))
        elif isinstance(leaf, Scan):
            rows, source = table_rows(leaf)
            if rows is not None:
                bounds.append((float(rows), f"{source}: rows of its input table"))
    return min(bounds, default=None)
