"""The logical plan: relational operators over uniquely named columns.

Every column in a query gets one internal name (unique across the whole query, so self-joins and repeated
CTE references never clash). Expressions are sqlglot trees whose column references are those internal names,
unqualified; ``render`` turns them into Spark SQL. Nodes are immutable; passes build new trees. Nodes compare
by identity so that one subplan can feed several parents (a CTE read twice becomes one stage read twice).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from aipq.catalog import TableEntry

JoinKind = Literal["inner", "left", "right", "full", "cross", "semi", "anti"]
PhysicalJoin = Literal["repartition", "broadcast"]


def col(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def refs(expression: exp.Expression | None) -> set[str]:
    """Internal column names an expression reads."""
    if expression is None:
        return set()
    return {c.name for c in expression.find_all(exp.Column)}


def render(expression: exp.Expression) -> str:
    """Spark SQL text of an expression over internal column names."""
    return expression.sql(dialect="spark")


def conjuncts(expression: exp.Expression | None) -> list[exp.Expression]:
    if expression is None:
        return []
    if isinstance(expression, exp.And):
        return conjuncts(expression.left) + conjuncts(expression.right)
    if isinstance(expression, exp.Paren):
        return conjuncts(expression.this)
    return [expression]


def and_all(parts: Iterable[exp.Expression]) -> exp.Expression | None:
    """AND of the parts; sqlglot's ``and_`` parenthesizes OR operands so precedence survives rendering."""
    parts = list(parts)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else exp.and_(*parts, copy=False)


def path_to(root: Node, leaf_id: int) -> list[tuple[Node, int]] | None:
    """(node, index of the child taken) from ``root`` down to the node whose id is ``leaf_id``; None if it is not
    below ``root``."""
    if id(root) == leaf_id:
        return []
    for index, child in enumerate(root.children):
        below = path_to(child, leaf_id)
        if below is not None:
            return [(root, index), *below]
    return None


@dataclass(frozen=True, eq=False)
class Node:
    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def output(self) -> tuple[str, ...]:
        raise NotImplementedError

    def walk(self) -> Iterator[Node]:
        """Pre-order, each shared node once."""
        seen: set[int] = set()
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            stack.extend(reversed(node.children))


@dataclass(frozen=True, eq=False)
class Scan(Node):
    """Read a table; ``columns`` maps internal names to the table's column names."""

    table: TableEntry
    alias: str
    columns: tuple[tuple[str, str], ...]
    filters: tuple[exp.Expression, ...] = ()
    # Columns read only to evaluate ``filters`` and not output.
    filter_only: tuple[tuple[str, str], ...] = ()
    # a partitioned table's registered partitions before pruning (``table.partitions`` holds those left); 0 if
    # none were pruned
    all_partitions: int = 0

    @property
    def output(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)


@dataclass(frozen=True, eq=False)
class Values(Node):
    """Literal rows: ``VALUES (…), (…)`` in FROM or INSERT, and the one row of no columns a SELECT without FROM
    reads."""

    names: tuple[str, ...]
    rows: tuple[tuple[exp.Expression, ...], ...]

    @property
    def output(self) -> tuple[str, ...]:
        return self.names


@dataclass(frozen=True, eq=False)
class Generate(Node):
    """LATERAL VIEW [OUTER] explode(…) t AS a[, b]: each input row once per value the generator yields (with
    OUTER, once with NULLs when it yields none), the generated columns after the input's."""

    child: Node
    generator: exp.Expression  # explode, posexplode, inline, stack, json_tuple, … over internal names
    names: tuple[str, ...]
    outer: bool = False

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return self.child.output + self.names


@dataclass(frozen=True, eq=False)
class Filter(Node):
    child: Node
    condition: exp.Expression

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return self.child.output


@dataclass(frozen=True, eq=False)
class Project(Node):
    child: Node
    items: tuple[tuple[str, exp.Expression], ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.items)


@dataclass(frozen=True, eq=False)
class JoinBlock(Node):
    """An unordered multi-way inner join, as written in FROM/WHERE; ``order_joins`` turns it into Joins."""

    relations: tuple[Node, ...]
    conditions: tuple[exp.Expression, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return self.relations

    @property
    def output(self) -> tuple[str, ...]:
        return tuple(name for rel in self.relations for name in rel.output)


@dataclass(frozen=True, eq=False)
class Join(Node):
    """A binary join: equi-keys pairwise (left_keys[i] = right_keys[i]) plus an optional residual."""

    left: Node
    right: Node
    kind: JoinKind
    left_keys: tuple[str, ...] = ()
    right_keys: tuple[str, ...] = ()
    residual: exp.Expression | None = None
    physical: PhysicalJoin = "repartition"
    # For broadcast joins: which input is copied to every task.
    broadcast_side: Literal["left", "right"] | None = None
    # Keys compare with <=> (NULL matches NULL), as INTERSECT and EXCEPT need.
    null_safe: bool = False

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def output(self) -> tuple[str, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.output
        return self.left.output + self.right.output

    def condition(self) -> exp.Expression | None:
        equal = exp.NullSafeEQ if self.null_safe else exp.EQ
        keys = [equal(this=col(lk), expression=col(rk)) for lk, rk in zip(self.left_keys, self.right_keys)]
        return and_all(keys + conjuncts(self.residual))


@dataclass(frozen=True, eq=False)
class Union(Node):
    """UNION ALL by position; ``names`` are the output column names (the inputs keep their own)."""

    inputs: tuple[Node, ...]
    names: tuple[str, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    @property
    def output(self) -> tuple[str, ...]:
        return self.names


@dataclass(frozen=True, eq=False)
class Aggregate(Node):
    """GROUP BY ``groups`` computing ``aggregates``; a group key that is a plain column keeps its name. With
    ``grouping_sets`` (GROUPING SETS, ROLLUP, CUBE: each set as group names), the rows of every set, a group
    column outside a row's set NULL in it."""

    child: Node
    groups: tuple[tuple[str, exp.Expression], ...]
    aggregates: tuple[tuple[str, exp.Expression], ...]
    grouping_sets: tuple[tuple[str, ...], ...] | None = None

    def grouped_in_every_set(self, name: str) -> bool:
        """Whether every output row has ``name`` as a group value (not NULLed by a grouping set without it)."""
        return any(n == name for n, _ in self.groups) and (
            self.grouping_sets is None or all(name in s for s in self.grouping_sets))

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.groups) + tuple(n for n, _ in self.aggregates)


@dataclass(frozen=True, eq=False)
class Window(Node):
    """Window functions (``fn OVER (PARTITION BY … ORDER BY …)``) computed over ``child``'s rows, one column each
    beside the child's columns: Hive runs them as a job of their own, partitioned by the PARTITION BY keys."""

    child: Node
    items: tuple[tuple[str, exp.Window], ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return self.child.output + tuple(n for n, _ in self.items)

    def partition_keys(self) -> set[str]:
        """Columns every item partitions by: rows dropped for such a column's value take whole partitions with
        them, so the other rows' window values stay as they were."""
        keys: set[str] | None = None
        for _, window in self.items:
            mine = {e.name for e in window.args.get("partition_by") or [] if isinstance(e, exp.Column)}
            keys = mine if keys is None else keys & mine
        return keys or set()


@dataclass(frozen=True)
class SortKey:
    column: str
    descending: bool = False
    nulls_first: bool | None = None  # None: the dialect default (Hive/Spark: nulls first when ascending)


@dataclass(frozen=True, eq=False)
class Sort(Node):
    child: Node
    keys: tuple[SortKey, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return self.child.output


@dataclass(frozen=True, eq=False)
class Limit(Node):
    child: Node
    count: int

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[str, ...]:
        return self.child.output


def top_limit(node: Node) -> int | None:
    """The LIMIT that bounds ``node``'s rows from its top (under projections and sorts), if any."""
    while isinstance(node, Project | Sort):
        node = node.child
    return node.count if isinstance(node, Limit) else None


@dataclass(frozen=True)
class QueryPlan:
    """A planned query: the operator tree and the names users see for its output columns."""

    root: Node
    output_names: tuple[str, ...]
    column_sources: dict[str, str] = field(default_factory=dict)  # internal name → "alias.column", for display
    join_order: tuple[str, ...] = ()  # how each join block was ordered (``--plan cost``), for explain
    preaggregations: tuple[str, ...] = ()  # where GROUP BYs were pre-aggregated below a join, for explain
    shared: frozenset[int] = frozenset()  # ids of subplans computed once for several readers (``planner/shared``)
    shared_notes: tuple[str, ...] = ()  # what was shared, for explain

    def __post_init__(self) -> None:
        assert len(self.output_names) == len(self.root.output), "one visible name per output column"


def replace_children(node: Node, children: tuple[Node, ...]) -> Node:
    """The same operator over new children."""
    from dataclasses import replace

    if isinstance(node, Scan):
        return node
    if isinstance(node, JoinBlock):
        return replace(node, relations=children)
    if isinstance(node, Union):
        return replace(node, inputs=children)
    if isinstance(node, Join):
        return replace(node, left=children[0], right=children[1])
    return replace(node, child=children[0])


def transform_up(root: Node, fn) -> Node:
    """Apply ``fn`` bottom-up; shared subplans are rewritten once and stay shared."""
    memo: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        key = id(node)
        if key not in memo:
            new_children = tuple(visit(c) for c in node.children)
            if any(a is not b for a, b in zip(new_children, node.children)):
                node = replace_children(node, new_children)
            memo[key] = fn(node)
        return memo[key]

    return visit(root)
