"""Cost-based join order (``--plan cost``): the cheapest join tree of a join block from estimated rows.

Dynamic programming over connected subsets of the block's relations (DPsub, Selinger-style, bushy shapes
allowed) up to ``DP_RELATIONS`` relations, greedy pairing beyond (Fegaras' GOO). A tree is priced as aipq runs
it: a repartition join shuffles both inputs, writes its output as a stage and pays a stage's fixed cost; a join
with an input of base tables at most the broadcast threshold is map-side and costs almost nothing. With
information passing on, a shuffled input is priced after the pruning the block's other relations' summaries
would do (the estimator's Δ: the share of its keys the other relation has), so an order is not penalised for
joining a large input early when a selective summary prunes it anyway.

Row estimates are injected (``RowEstimates``: the estimator's cardinalities over the statistics repository), so
this module stays pure. A subset's rows do not depend on the order it was joined in: they are estimated along
one canonical split (its last relation joined to the rest) with the estimator's equi-join estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aipq.planner.logical import Node
from aipq.planner.physical import pipeline_bytes

DP_RELATIONS = 12  # exhaustive up to this many relations in one block; greedy beyond
WORST_ROWS_FACTOR = 2.0  # a bad-order variant's intermediate results stay below this many times its largest input

# A join tree over relation indexes: a relation, or (left, right).
Shape = int | tuple["Shape", "Shape"]


class RowEstimates(Protocol):
    """What the cost-based order needs of the statistics (``estimator/join_estimates.py`` provides it)."""

    def rows(self, node: Node) -> float | None: ...

    def distinct(self, node: Node, name: str) -> float | None: ...

    def missing_statistics(self, node: Node) -> list[str]: ...

    def from_footers(self, node: Node) -> list[str]: ...


@dataclass(frozen=True)
class JoinCosting:
    """Row estimates and the unit costs a join tree is priced with (seconds; ``estimator/join_estimates.py``
    derives them from the calibrated unit costs)."""

    estimates: RowEstimates
    sizes: Callable[[str], int | None]  # bytes of a table's files (for the broadcast decision)
    broadcast_threshold: int
    passing: bool  # information passing on: shuffled inputs priced after the summaries' pruning
    shuffled_row_seconds: float
    written_row_seconds: float
    stage_seconds: float
    read_byte_seconds: float = 0.0  # a byte read from a table's files or a written stage output
    written_byte_seconds: float = 0.0  # a byte of a stage output written and read back


@dataclass(frozen=True)
class JoinGraph:
    """A join block as the order search sees it: relations, and per key class each member relation's column."""

    relations: tuple[Node, ...]
    classes: tuple[dict[int, str], ...]

    def class_masks(self) -> list[int]:
        return [sum(1 << i for i in members) for members in self.classes]


@dataclass(frozen=True)
class OrderChoice:
    shape: Shape | None  # None: keep the written order
    note: str


class _Pricing:
    """Rows, key counts and join costs of subsets of one block's relations (bitmasks), memoized."""

    def __init__(self, graph: JoinGraph, costing: JoinCosting, rows: list[float], broadcast_bytes: list[int | None]):
        self.costing = costing
        self.base_rows = rows
        self.masks = graph.class_masks()
        self.distinct: list[dict[int, float]] = []  # per class: relation → distinct keys
        for members in graph.classes:
            counts = {}
            for index, column in members.items():
                known = costing.estimates.distinct(graph.relations[index], column)
                counts[index] = max(1.0, min(known if known is not None else rows[index], rows[index]))
            self.distinct.append(counts)
        self.broadcast_bytes = broadcast_bytes
        self._rows: dict[int, float] = {}
        self._shuffled: dict[int, float] = {}
        self.full = (1 << len(rows)) - 1

    def rows(self, subset: int) -> float:
        """Rows of the join of ``subset``: the last relation joined to the rest (one canonical split, so that
        every tree over the subset is priced with the same rows)."""
        if subset not in self._rows:
            members = [i for i in range(len(self.base_rows)) if subset >> i & 1]
            if len(members) == 1:
                self._rows[subset] = max(self.base_rows[members[0]], 1.0)
            else:
                last = next((i for i in reversed(members) if self.connected(subset ^ 1 << i, 1 << i)
                             and self.is_connected(subset ^ 1 << i)), members[-1])
                self._rows[subset] = self.join_rows(subset ^ 1 << last, 1 << last)
        return self._rows[subset]

    def join_rows(self, a: int, b: int) -> float:
        """|A| |B| / the largest key count of the most selective key class they share: a multi-column key
        (partsupp's part and supplier) is not taken as independent columns, as the estimator's equi-join
        estimate does (``estimator/cardinality``)."""
        divisor = 1.0
        for klass, mask in enumerate(self.masks):
            if mask & a and mask & b:
                divisor = max(divisor, self.keys(a, klass) or 1.0, self.keys(b, klass) or 1.0)
        return max(self.rows(a) * self.rows(b) / divisor, 1.0)

    def keys(self, subset: int, klass: int) -> float | None:
        inside = [d for i, d in self.distinct[klass].items() if subset >> i & 1]
        return min(min(inside), self.rows(subset)) if inside else None

    def connected(self, a: int, b: int) -> bool:
        return any(mask & a and mask & b for mask in self.masks)

    def is_connected(self, subset: int) -> bool:
        """Whether the subset's relations join without a Cartesian product."""
        reached = subset & -subset
        grown = True
        while grown:
            grown = False
            for mask in self.masks:
                if mask & reached and mask & subset & ~reached:
                    reached |= mask & subset
                    grown = True
        return reached == subset

    def shuffled(self, subset: int) -> float:
        """Rows of ``subset`` that reach a shuffle: with information passing, after each other relation's
        summary keeps only the keys it has."""
        if subset not in self._shuffled:
            self._shuffled[subset] = self._pruned_rows(subset)
        return self._shuffled[subset]

    def _pruned_rows(self, subset: int) -> float:
        rows = self.rows(subset)
        if not self.costing.passing:
            return rows
        for other in range(len(self.base_rows)):
            if subset >> other & 1:
                continue
            share = 1.0
            for klass, mask in enumerate(self.masks):
                if not mask & subset or other not in self.distinct[klass]:
                    continue
                mine = self.keys(subset, klass)
                if mine:
                    share = min(share, self.distinct[klass][other] / mine)
            rows *= min(share, 1.0)
        return max(rows, 1.0)

    def broadcastable(self, subset: int) -> bool:
        threshold = self.costing.broadcast_threshold
        if threshold <= 0:
            return False
        total = 0
        for index, size in enumerate(self.broadcast_bytes):
            if subset >> index & 1:
                if size is None:
                    return False
                total += size
        return total <= threshold

    def join_cost(self, a: int, b: int) -> float:
        costing = self.costing
        out = self.rows(a | b)
        if self.broadcastable(a) or self.broadcastable(b):
            return costing.written_row_seconds * 0.1 * out  # map-side: rows pass through the stage
        return (costing.shuffled_row_seconds * (self.shuffled(a) + self.shuffled(b))
                + costing.written_row_seconds * out + costing.stage_seconds)

    def oriented(self, a: int, b: int, shapes: dict[int, Shape]) -> Shape:
        """The smaller input on the left: its stages run first (stages follow the tree left to right), so their
        summaries can prune the larger input before it is shuffled (Ives & Taylor's feed-forward order; Hive
        likewise streams the largest table last)."""
        if self.rows(a) > self.rows(b):
            a, b = b, a
        return (shapes[a], shapes[b])

    def shape_cost(self, shape: Shape) -> tuple[int, float]:
        if isinstance(shape, int):
            return 1 << shape, 0.0
        left, left_cost = self.shape_cost(shape[0])
        right, right_cost = self.shape_cost(shape[1])
        return left | right, left_cost + right_cost + self.join_cost(left, right)


def _dynamic_programming(pricing: _Pricing) -> dict[int, tuple[float, Shape]]:
    """The cheapest tree of every connected subset, smallest subsets first."""
    count = len(pricing.base_rows)
    best: dict[int, tuple[float, Shape]] = {1 << i: (0.0, i) for i in range(count)}
    for subset in sorted(range(1, pricing.full + 1), key=lambda s: bin(s).count("1")):
        if subset in best or not pricing.is_connected(subset):
            continue
        low = subset & -subset
        found: tuple[float, Shape] | None = None
        part = (subset - 1) & subset
        while part:
            if part & low:
                rest = subset ^ part
                if part in best and rest in best and pricing.connected(part, rest):
                    cost = best[part][0] + best[rest][0] + pricing.join_cost(part, rest)
                    if found is None or cost < found[0]:
                        found = (cost, pricing.oriented(part, rest, {part: best[part][1], rest: best[rest][1]}))
            part = (part - 1) & subset
        if found is not None:
            best[subset] = found
    return best


def _greedy(pricing: _Pricing, groups: dict[int, tuple[float, Shape]]) -> dict[int, tuple[float, Shape]]:
    """Join the connected pair whose join costs least until none is left (GOO)."""
    groups = dict(groups)
    while True:
        pairs = [(pricing.join_cost(a, b), a, b) for a in groups for b in groups if a < b and pricing.connected(a, b)]
        if not pairs:
            return groups
        cost, a, b = min(pairs)
        merged = (groups[a][0] + groups[b][0] + cost, pricing.oriented(a, b, {a: groups[a][1], b: groups[b][1]}))
        del groups[a], groups[b]
        groups[a | b] = merged


def _components(pricing: _Pricing, count: int) -> list[int]:
    """Relations grouped by key-class connectivity (several only when the block needs a Cartesian product)."""
    components = [1 << i for i in range(count)]
    merged = True
    while merged:
        merged = False
        for i in range(len(components)):
            for j in range(i + 1, len(components)):
                if pricing.connected(components[i], components[j]):
                    components[i] |= components.pop(j)
                    merged = True
                    break
            if merged:
                break
    return components


def _pricing(graph: JoinGraph, costing: JoinCosting) -> _Pricing | str:
    """The block's pricing, or why it cannot be priced."""
    estimates = costing.estimates
    missing = sorted({name for relation in graph.relations for name in estimates.missing_statistics(relation)})
    if missing:
        return f"no statistics for {', '.join(missing)} (a run collects them)"
    rows = [estimates.rows(relation) for relation in graph.relations]
    if any(r is None for r in rows):
        return "a relation's rows cannot be estimated"
    broadcast_bytes = [pipeline_bytes(relation, costing.sizes) for relation in graph.relations]
    return _Pricing(graph, costing, [float(r) for r in rows], broadcast_bytes)


def choose_order(graph: JoinGraph, costing: JoinCosting, written: Shape) -> OrderChoice:
    """The cheapest tree for the block, or the written order (with the reason) when statistics are missing."""
    pricing = _pricing(graph, costing)
    if isinstance(pricing, str):
        return OrderChoice(None, f"as written: {pricing}")
    count = len(graph.relations)
    singles = {1 << i: (0.0, i) for i in range(count)}
    trees = _dynamic_programming(pricing) if count <= DP_RELATIONS else _greedy(pricing, singles)
    parts = []
    for component in _components(pricing, count):
        parts.append(trees[component] if component in trees else _greedy(pricing, {
            m: t for m, t in singles.items() if m & component})[component])
    parts.sort(key=lambda part: pricing.rows(_mask(part[1])))
    shape = parts[0][1]
    for _, part_shape in parts[1:]:
        shape = (shape, part_shape)
    _, cost = pricing.shape_cost(shape)
    _, written_cost = pricing.shape_cost(written)
    method = "dynamic programming" if count <= DP_RELATIONS else "greedy"
    footers = sorted({name for relation in graph.relations for name in costing.estimates.from_footers(relation)})
    source = f"; {', '.join(footers)} from their files' footers (no statistics yet)" if footers else ""
    return OrderChoice(shape, f"cost-based ({method} over {count} relations): estimated {cost:.3g} s, "
                              f"{pricing.rows(pricing.full):,.0f} rows out; as written {written_cost:.3g} s{source}")


def worst_connected_order(graph: JoinGraph, costing: JoinCosting) -> list[int] | None:
    """A written order in which every relation has a join condition with one before it, chosen greedily so that
    its left-deep tree costs the most while no intermediate result is estimated above ``WORST_ROWS_FACTOR``
    times the largest relation (a bad order that still finishes): a query written in a bad order, for benchmarks
    and tests. None without statistics or when the block needs a Cartesian product."""
    pricing = _pricing(graph, costing)
    if isinstance(pricing, str):
        return None
    count = len(graph.relations)
    cap = WORST_ROWS_FACTOR * max(pricing.base_rows)
    worst: tuple[float, list[int]] | None = None
    for first in range(count):
        order, joined, cost = [first], 1 << first, 0.0
        while len(order) < count:
            options = [(pricing.join_cost(joined, 1 << i), i) for i in range(count)
                       if i not in order and pricing.connected(joined, 1 << i)
                       and pricing.rows(joined | 1 << i) <= cap]
            if not options:
                break
            step, pick = max(options)
            order.append(pick)
            joined |= 1 << pick
            cost += step
        if len(order) == count and (worst is None or cost > worst[0]):
            worst = (cost, order)
    return worst[1] if worst else None


def _mask(shape: Shape) -> int:
    return 1 << shape if isinstance(shape, int) else _mask(shape[0]) | _mask(shape[1])
