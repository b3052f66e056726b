"""Rows and distinct values of a plan's subtrees, from the statistics repository: how much of a stage input
reaches the stage's shuffle.

The benefit model prices the pages a summary keeps out of the shuffle. A probed input's rows do not all reach
it: the scan's own filters drop some first, and on the way to the shuffle a map-side (broadcast) join with a
filtered table can drop most (TPC-H Q8's lineitem meets the 1/150 of parts of one type before its shuffle, so a
summary pruning lineitem saves little shuffling there). Pricing the whole input made such summaries look worth
their pre-pass. The estimates are the textbook ones (System R, Selinger et al. 1979): a filter's selectivity
from the columns' distinct counts and min/max (an equality keeps 1/NDV; a range the covered share of
[min, max]); an equi-join keeps |L| |R| / max(NDV_L, NDV_R) rows; a column's distinct values are at most the
rows that carry it. Without statistics a predicate keeps its documented default share (``DEFAULT_*``).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlglot import exp

from aipq.estimator.selectivity import (
    DEFAULT_OTHER,
    Selectivity,
    _bound,
    _date_part,
    _shape,
    _tighter,
    value_bounds,
)
from aipq.planner.logical import Aggregate, Filter, Join, Limit, Node, Project, Scan, conjuncts, path_to
from aipq.planner.stages import StageRead
from aipq.stats.repository import ColumnStats


@dataclass
class StatsLookup:
    """Where the estimates come from: the caller's access to the repository and to the run so far."""

    table_rows: Callable[[Scan], float | None]
    column: Callable[[Scan, str], ColumnStats | None]  # by the table's column name
    stage_rows: Callable[[StageRead], float | None]
    stage_distinct: Callable[[StageRead, str], float | None]
    # the plan of the stage a read reads (None: not known), so a column's table statistics are found through it
    stage_plan: Callable[[StageRead], Node | None] = lambda read: None








class Cardinality(Selectivity):
    """Row and distinct-value estimates over one stage's plan."""

    def __init__(self, lookup: StatsLookup):
        self.lookup = lookup
        # figures of one outermost estimate, by (kind, node id, column): estimates nest (a join's rows need its
        # inputs' rows and key NDVs, a stage read its stage's plan), so each node is priced once rather than in
        # time exponential in the plan's depth; cleared when the outermost call returns, since the figures a
        # lookup gives change as stages finish
        self._memo: dict[tuple[str, int, str], float | None] = {}
        self._depth = 0

    def _memoized(self, kind: str, node: Node, name: str, compute) -> float | None:
        key = (kind, id(node), name)
        if key in self._memo:
            return self._memo[key]
        self._depth += 1
        try:
            value = compute()
        finally:
            self._depth -= 1
        if self._depth == 0:
            self._memo.clear()
        else:
            self._memo[key] = value
        return value

    @contextmanager
    def held(self) -> Iterator[None]:
        """Keep the figures for the block's estimates, which all see one state (the estimator's run state and
        pruning do not change inside it): the candidates of one edge ask for the same subplans' rows again."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._memo.clear()

    # ---- where a column comes from ------------------------------------------------------------------------
    def _scan_column(self, node: Node, name: str) -> tuple[Scan, str] | None:
        """The scan and table column an internal name reads, through renames, joins and earlier stages."""
        found = self._scan_read(node, name)
        return (found[0], found[1]) if found else None

    def _scan_read(self, node: Node, name: str) -> tuple[Scan, str, str] | None:
        """The scan, table column and the scan's own name for it that an internal name reads."""
        found = self._defining(node, name)
        if found is None or not isinstance(found[0], Scan):
            return None
        scan, scanned = found
        return scan, dict(scan.columns + scan.filter_only)[scanned], scanned

    def _defining(self, node: Node, name: str) -> tuple[Node, str] | None:
        """The node that computes a column, and its name there: through earlier stages, renames, joins, filters
        and group keys down to an aggregate, a computed projection or the scan that reads it."""
        if isinstance(node, Scan):
            return (node, name) if name in dict(node.columns + node.filter_only) else None
        if isinstance(node, StageRead):
            plan = self.lookup.stage_plan(node)
            return self._defining(plan, name) if plan is not None and name in plan.output else None
        if isinstance(node, Project):
            item = dict(node.items).get(name)
            if isinstance(item, exp.Column):
                return self._defining(node.child, item.name)
            return (node, name) if item is not None else None
        if isinstance(node, Aggregate) and name in dict(node.aggregates):
            return node, name
        for child in node.children:
            if name in child.output or isinstance(child, Scan) and name in dict(child.filter_only):
                return self._defining(child, name)
        return None

    def _column_stats(self, node: Node, name: str) -> ColumnStats | None:
        found = self._scan_column(node, name)
        return self.lookup.column(*found) if found else None

    # ---- rows ----------------------------------------------------------------------------------------------
    def rows(self, node: Node) -> float | None:
        return self._memoized("rows", node, "", lambda: self._rows(node))

    def _rows(self, node: Node) -> float | None:
        if isinstance(node, Scan):
            rows = self.lookup.table_rows(node)
            if rows is None:
                return None
            return rows * self.conjunction(node, list(node.filters))
        if isinstance(node, StageRead):
            return self.lookup.stage_rows(node)
        if isinstance(node, Filter):
            rows = self.rows(node.child)
            return None if rows is None else rows * self.selectivity(node.child, node.condition)
        if isinstance(node, Join):
            return self._join_rows(node)
        if isinstance(node, Aggregate):
            rows = self.rows(node.child)
            if rows is None or not node.groups:
                return None if rows is None else 1.0
            groups = 1.0
            for _, expression in node.groups:
                distinct = self.expression_distinct(node.child, expression)
                groups *= distinct if distinct is not None else rows
            return min(rows, groups) * len(node.grouping_sets or (None,))  # at most that many rows per set
        if isinstance(node, Limit):
            rows = self.rows(node.child)
            return None if rows is None else min(rows, float(node.count))  # LIMIT keeps at most its count
        if len(node.children) == 1:
            return self.rows(node.children[0])
        return None

    def _join_rows(self, join: Join) -> float | None:
        left, right = self.rows(join.left), self.rows(join.right)
        if left is None or right is None:
            return None
        if not join.left_keys:
            return left * right
        inner = self._inner_rows(join, left, right)
        if join.kind == "inner":
            return inner
        if join.kind in ("semi", "anti"):
            found = self.match_share(join, "left") * self.residual_share(join)
            return left * (found if join.kind == "semi" else 1.0 - found)
        if join.kind == "left":
            return max(inner, left)
        if join.kind == "right":
            return max(inner, right)
        return max(inner, left, right)

    def _inner_rows(self, join: Join, left: float, right: float) -> float:
        """An inner equi-join's rows, |L| |R| / max(NDV_L, NDV_R) (containment). With several key pairs the
        truth lies between two such figures: the most selective single key's (the other keys only remove more
        rows), and the key combination's, its distinct values at most the product of the keys' and at most the
        rows (every combination taken as distinct, the fewest rows containment allows). Without statistics of
        key combinations, their geometric mean: at most the square root of their ratio off either way (TPC-H
        Q9's partsupp ⋈ lineitem on part and supplier is the upper figure, Q5's supplier ⋈ lineitem on
        supplier and nation the lower, TPC-DS's store_sales ⋈ store_returns on item and ticket the lower)."""
        pairs = list(zip(join.left_keys, join.right_keys))
        single = min(left * right / max(self._key_distinct(join.left, lk, left),
                                        self._key_distinct(join.right, rk, right), 1.0) for lk, rk in pairs)
        if len(pairs) == 1:
            return single
        combined = left * right / max(self._combined_distinct(join.left, join.left_keys, left),
                                      self._combined_distinct(join.right, join.right_keys, right), 1.0)
        return math.sqrt(single * min(combined, single))

    def _combined_distinct(self, node: Node, keys: tuple[str, ...], rows: float) -> float:
        """Distinct combinations of several key columns: at most the product of their distinct values, and at
        most the rows."""
        return min(rows, math.prod(self._key_distinct(node, key, rows) for key in keys))

    @staticmethod
    def residual_share(join: Join) -> float:
        """The share of a semi or anti join's key matches that also meet its residual condition.

        The condition relates a row to its matches (TPC-H Q21: another line of the same order from another
        supplier), which column statistics cannot price: ``l3.l_suppkey <> l1.l_suppkey`` holds for almost every
        pair, but the matches of a late line include that line itself. Taking every match as meeting it priced
        Q21's ``NOT EXISTS`` at 0 rows (about a fifth survive), so every stage after it looked empty."""
        return 1.0 if join.residual is None else DEFAULT_OTHER

    def _key_distinct(self, node: Node, name: str, rows: float) -> float:
        distinct = self.distinct(node, name)
        return rows if distinct is None else distinct

    def match_share(self, join: Join, side: str) -> float:
        """The share of one side's rows whose key the other side has, the most selective key pair: NDV_other over
        the keys' domain (the larger of the two columns' distinct values in their whole tables), each side's
        filters taken as independent of the other's keys; without both tables' statistics, NDV_other / NDV_this
        (the containment assumption, which takes a filtered side's keys to be all among the other's;
        docs/decisions.md)."""
        this, other = (join.left, join.right) if side == "left" else (join.right, join.left)
        these, others = (join.left_keys, join.right_keys) if side == "left" else (join.right_keys, join.left_keys)
        this_rows, other_rows = self.rows(this), self.rows(other)
        if this_rows is None or other_rows is None or not these:
            return 1.0
        shares = []
        for t, o in zip(these, others):
            domain = self._key_domain(this, t, other, o) or self._key_distinct(this, t, this_rows)
            shares.append(min(1.0, self._key_distinct(other, o, other_rows) / max(domain, 1.0)))
        return min(shares)

    def _key_domain(self, this: Node, this_key: str, other: Node, other_key: str) -> float | None:
        """The distinct values two join keys are drawn from: the larger of their columns' counts in their tables
        (None unless both are known)."""
        counts = [stats.ndv for stats in (self._column_stats(this, this_key), self._column_stats(other, other_key))
                  if stats is not None and stats.ndv > 0]
        return max(counts) if len(counts) == 2 else None

    # ---- distinct values -------------------------------------------------------------------------------------
    def distinct(self, node: Node, name: str) -> float | None:
        """Distinct values of an output column of ``node``."""
        return self._memoized("distinct", node, name, lambda: self._distinct(node, name))

    def _distinct(self, node: Node, name: str) -> float | None:
        rows = self.rows(node)
        if isinstance(node, StageRead):
            known = self.lookup.stage_distinct(node, name)
            return known if known is not None else rows
        if isinstance(node, Scan):
            stats = self._column_stats(node, name)
            known = stats.ndv if stats is not None and stats.ndv > 0 else None
            listed = _listed_values(node.filters, name)  # a filter naming the values leaves at most those
            known = listed if known is None else known if listed is None else min(known, listed)
            if known is None:
                return rows
            return known if rows is None else min(known, rows)
        if isinstance(node, Aggregate) and name in dict(node.aggregates):
            return self._aggregate_distinct(node, dict(node.aggregates)[name], rows)
        if isinstance(node, Join) and node.kind == "inner" and name in node.left_keys + node.right_keys:
            pairs = list(zip(node.left_keys, node.right_keys))
            pair = next(p for p in pairs if name in p)
            values = [self.distinct(node.left, pair[0]), self.distinct(node.right, pair[1])]
            known = [v for v in values if v is not None]
            return min(known) if known else rows
        if isinstance(node, Project):
            item = dict(node.items).get(name)
            below = self.expression_distinct(node.child, item) if item is not None else None
        elif isinstance(node, Join) and node.kind in ("inner", "semi"):
            below = self._joined_distinct(node, name)
        else:
            child = next((c for c in node.children if name in c.output), None)
            below = self.distinct(child, name) if child is not None else None
        if below is None:
            return rows
        return below if rows is None else min(below, rows)

    def _joined_distinct(self, join: Join, name: str) -> float | None:
        """A column's distinct values after an inner or semi join: those of the side it comes from, as many as
        survive when the join keeps the share of that side's rows whose key the other side has (Cardenas)."""
        side = "left" if name in join.left.output else "right"
        child = join.left if side == "left" else join.right
        distinct, rows = self.distinct(child, name), self.rows(child)
        if distinct is None or rows is None:
            return distinct
        return kept_distinct(distinct, rows, self.match_share(join, side))

    def expression_distinct(self, node: Node, expression: exp.Expression) -> float | None:
        """Distinct values of an expression over ``node``'s columns: a column's own; a literal's one; the
        calendar years (or at most 12 months) a date column's min/max span; else at most the product of its
        columns' distinct counts (each value of the expression comes from one combination of them)."""
        if isinstance(expression, exp.Column):
            return self.distinct(node, expression.name)
        if isinstance(expression, exp.Literal):
            return 1.0
        part, column = _date_part(expression)
        if part is not None and column is not None:
            return self._date_part_distinct(node, part, column)
        columns = {c.name for c in expression.find_all(exp.Column)}
        if not columns:
            return None
        product: float | None = 1.0
        for name in columns:
            distinct = self.distinct(node, name)
            product = None if distinct is None or product is None else product * distinct
        listed = self._listed_expression_values(node, expression, columns)
        if listed is None or product is None:
            return listed if product is None else product
        return min(listed, product)

    def _listed_expression_values(self, node: Node, expression: exp.Expression, columns: set[str]) -> float | None:
        """How many values a scan's filter ``expression IN (literals)`` (or ``= literal``) leaves the expression
        of one column (TPC-H Q22's ``SUBSTRING(c_phone, 1, 2)``: seven country codes, not a code per phone)."""
        found = self._scan_read(node, next(iter(columns))) if len(columns) == 1 else None
        if found is None:
            return None
        scan, _, name = found
        shape = _shape(expression)
        counts = [float(len(part.expressions)) if isinstance(part, exp.In) else 1.0
                  for condition in scan.filters for part in conjuncts(condition)
                  if (isinstance(part, exp.In) and part.expressions
                      and all(isinstance(e, exp.Literal) for e in part.expressions)
                      or isinstance(part, exp.EQ) and isinstance(part.expression, exp.Literal))
                  and {c.name for c in part.this.find_all(exp.Column)} == {name} and _shape(part.this) == shape]
        return min(counts) if counts else None

    def _date_part_distinct(self, node: Node, part: str, column: str) -> float | None:
        distinct = self.distinct(node, column)
        if part == "month":
            return min(12.0, distinct) if distinct is not None else 12.0
        stats = self._column_stats(node, column)
        low, high = value_bounds(stats)
        if not isinstance(low, float) or not isinstance(high, float):
            return distinct
        low, high = self._filtered_range(node, column, low, high)
        years = datetime.date.fromordinal(int(high)).year - datetime.date.fromordinal(int(low)).year + 1 \
            if 1 <= low <= high <= datetime.date.max.toordinal() else None
        if years is None:
            return distinct
        return float(years) if distinct is None else min(float(years), distinct)

    def _filtered_range(self, node: Node, column: str, low: float, high: float) -> tuple[float, float]:
        """A column's [low, high] narrowed by the range filters of the scan it is read from."""
        found = self._scan_read(node, column)
        if found is None:
            return low, high
        scan, _, name = found
        for condition in scan.filters:
            for part in conjuncts(condition):
                bound = _bound(part)
                if bound is not None and bound[0] == name:
                    low, high = _tighter(low, bound[1], max), _tighter(high, bound[2], min)
        return low, high











    # ---- what reaches the shuffle ----------------------------------------------------------------------
    def reach(self, root: Node, leaf_id: int) -> float:
        """The share of a leaf's rows (after its own filters) that reach ``root`` (the stage's reduce node, whose
        input is shuffled): broadcast inner and semi joins keep the share whose key the other side has; filters
        keep their selectivity."""
        share = 1.0
        path = path_to(root, leaf_id)
        if path is None:
            return 1.0
        for node, index in path[1:]:  # the root itself runs after the shuffle
            if isinstance(node, Join) and node.physical == "broadcast" and node.kind in ("inner", "semi"):
                share *= self.match_share(node, "left" if index == 0 else "right")
                if node.kind == "semi":
                    share *= self.residual_share(node)
            elif isinstance(node, Filter):
                share *= self.selectivity(node.child, node.condition)
        return max(min(share, 1.0), 0.0)


def _listed_values(filters, name: str) -> float | None:
    """How many values ``col = literal`` or ``col IN (literals)`` among ``filters`` leave the column."""
    counts = []
    for condition in filters:
        for part in conjuncts(condition):
            if not isinstance(part.this, exp.Column) or part.this.name != name:
                continue
            if isinstance(part, exp.EQ) and isinstance(part.expression, exp.Literal):
                counts.append(1.0)
            elif isinstance(part, exp.In) and part.expressions and all(
                    isinstance(e, exp.Literal) for e in part.expressions):
                counts.append(float(len(part.expressions)))
    return min(counts) if counts else None










def kept_distinct(distinct: float, rows: float, share: float) -> float:
    """Distinct keys left when a random ``share`` of ``rows`` rows holding ``distinct`` keys is kept: a key
    goes only when all its rows do, d·(1 − (1 − p)^(n/d)) (Cardenas' formula)."""
    if share >= 1.0 or distinct <= 0 or rows <= 0:
        return distinct
    return distinct * (1.0 - (1.0 - share) ** max(rows / distinct, 1.0))
