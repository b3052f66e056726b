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
import functools
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlglot import exp

from aipq.estimator.moments import (
    ColumnMoments,
    Moments,
    group_aggregate,
    share_above,
    uniform_moments,
    whole_aggregate,
)
from aipq.planner.logical import Aggregate, Filter, Join, Limit, Node, Project, Scan, conjuncts, path_to
from aipq.planner.stages import StageRead
from aipq.stats.repository import ColumnStats

DEFAULT_EQUALITY = 0.1  # col = value without the column's NDV
DEFAULT_RANGE = 1 / 3  # a comparison without usable min/max
DEFAULT_LIKE = 0.1  # LIKE with wildcards
DEFAULT_OTHER = 0.5  # a predicate the estimator does not model
MIN_LIKE_SAMPLE = 32  # the fewest sampled values of a column from which LIKE's share is read


@functools.lru_cache(maxsize=256)
def like_share(pattern: str, sample: tuple[str, ...], ignore_case: bool = False) -> float:
    """The share of a column's values that a LIKE pattern matches, read from a uniform sample of its distinct
    values (``ColumnStats.sample``); none matching counts as half a value, since the sample only shows the share
    is below one in its size. Kept: the estimator asks again for every plan that holds the filter."""
    regex = re.compile(like_regex(pattern), re.DOTALL | (re.IGNORECASE if ignore_case else 0))
    matching = sum(1 for value in sample if regex.fullmatch(value))
    return max(matching, 0.5) / len(sample)


def like_regex(pattern: str, escape: str = "\\") -> str:
    """A LIKE pattern as a regular expression: ``%`` any run of characters, ``_`` one, ``\\`` escapes (Hive's)."""
    parts, chars = [], iter(pattern)
    for char in chars:
        if char == escape:
            parts.append(re.escape(next(chars, escape)))
        else:
            parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
    return "".join(parts)


@dataclass
class StatsLookup:
    """Where the estimates come from: the caller's access to the repository and to the run so far."""

    table_rows: Callable[[Scan], float | None]
    column: Callable[[Scan, str], ColumnStats | None]  # by the table's column name
    stage_rows: Callable[[StageRead], float | None]
    stage_distinct: Callable[[StageRead, str], float | None]
    # the plan of the stage a read reads (None: not known), so a column's table statistics are found through it
    stage_plan: Callable[[StageRead], Node | None] = lambda read: None


def _literal_value(node: exp.Expression) -> float | str | None:
    """A literal's value: numbers as floats, dates as their ordinal, strings as they are; else None."""
    while isinstance(node, (exp.Paren, exp.Cast, exp.TsOrDsToDate, exp.Date)) and node.this is not None:
        node = node.this
    if isinstance(node, exp.Neg):
        value = _literal_value(node.this)
        return -value if isinstance(value, float) else None
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):  # constant arithmetic (TPC-H Q6's 0.06 - 0.01)
        left, right = _literal_value(node.this), _literal_value(node.expression)
        if not isinstance(left, float) or not isinstance(right, float):
            return None
        return left + right if isinstance(node, exp.Add) else left - right if isinstance(node, exp.Sub) \
            else left * right
    if not isinstance(node, exp.Literal):
        return None
    if not node.is_string:
        try:
            return float(node.this)
        except ValueError:
            return None
    return ordered_value(node.this)


def ordered_value(text: str | None) -> float | str | None:
    """A min/max or literal text as a number where it is one (dates by their ordinal), else the text."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(datetime.date.fromisoformat(text[:10]).toordinal())
    except ValueError:
        return text


def value_bounds(stats: ColumnStats | None) -> tuple[float | str | None, float | str | None]:
    """A column's minimum and maximum as ``ordered_value``s (None where unknown)."""
    if stats is None:
        return None, None
    return ordered_value(stats.min_value), ordered_value(stats.max_value)


class Cardinality:
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

    # ---- filters -------------------------------------------------------------------------------------------
    def selectivity(self, node: Node, condition: exp.Expression) -> float:
        """The share of ``node``'s rows a predicate over its columns keeps."""
        if isinstance(condition, exp.Paren):
            return self.selectivity(node, condition.this)
        if isinstance(condition, exp.And):
            return self.conjunction(node, conjuncts(condition))
        if isinstance(condition, exp.Or):
            a, b = self.selectivity(node, condition.left), self.selectivity(node, condition.right)
            return a + b - a * b
        if isinstance(condition, exp.Not):
            return 1.0 - self.selectivity(node, condition.this)
        if condition.args.get("negate"):  # sqlglot's NOT LIKE / NOT ILIKE
            positive = condition.copy()
            positive.set("negate", None)
            return 1.0 - self.selectivity(node, positive)
        column, other = self._column_and_operand(condition)
        if column is None:
            return DEFAULT_OTHER
        having = self._having_comparison(node, condition)
        if having is not None:
            return self._aggregate_selectivity(node, condition, *having)
        stats = self._column_stats(node, column)
        ndv = stats.ndv if stats is not None and stats.ndv >= 1 else None
        if isinstance(condition, exp.EQ):
            return 1.0 / ndv if ndv else DEFAULT_EQUALITY
        if isinstance(condition, exp.NEQ):
            return 1.0 - (1.0 / ndv if ndv else DEFAULT_EQUALITY)
        if isinstance(condition, exp.In):
            values = len(condition.expressions)
            return min(1.0, values / ndv) if ndv and values else DEFAULT_OTHER
        if isinstance(condition, exp.Is):
            if stats is None or not stats.rows:
                return DEFAULT_EQUALITY
            return stats.nulls / stats.rows
        if isinstance(condition, (exp.Like, exp.ILike)):
            pattern = _literal_value(condition.expression)
            if isinstance(pattern, str) and "%" not in pattern and "_" not in pattern:
                return 1.0 / ndv if ndv else DEFAULT_EQUALITY
            sample = stats.sample if stats is not None else None
            if isinstance(pattern, str) and sample and len(sample) >= MIN_LIKE_SAMPLE:
                return like_share(pattern, sample, isinstance(condition, exp.ILike))
            return DEFAULT_LIKE
        if isinstance(condition, exp.Between):
            return self._range_share(stats, _literal_value(condition.args["low"]),
                                     _literal_value(condition.args["high"]))
        if isinstance(condition, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
            value = _literal_value(other) if other is not None else None
            below = isinstance(condition, (exp.LT, exp.LTE)) == (condition.this.name == column
                                                                 and isinstance(condition.this, exp.Column))
            return self._range_share(stats, None, value) if below else self._range_share(stats, value, None)
        return DEFAULT_OTHER

    def _group_size(self, node: Aggregate) -> float | None:
        """The mean rows per group of an aggregate."""
        rows, groups = self.rows(node.child), self.rows(node)
        return rows / groups if rows is not None and groups else None

    def _aggregate_distinct(self, node: Aggregate, aggregate: exp.Expression, rows: float | None) -> float | None:
        """Distinct values of an aggregate's output: a COUNT's lie between 0 and a few times the mean group size,
        so about twice that plus one; others, at most one per group."""
        size = self._group_size(node)
        if isinstance(aggregate, exp.Count) and size is not None:
            return min(rows, 2.0 * size + 1.0) if rows is not None else 2.0 * size + 1.0
        return rows

    def _having_comparison(self, node: Node, condition: exp.Expression) -> tuple[Aggregate, str, str] | None:
        """A comparison of a grouped aggregate with something else (HAVING): the aggregate node, the aggregate's
        name there and its name in ``condition``; None for any other condition."""
        if not isinstance(condition, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
            return None
        for side in (condition.this, condition.expression):
            found = self._defining(node, side.name) if isinstance(side, exp.Column) else None
            if found is not None and isinstance(found[0], Aggregate) and found[0].groups \
                    and found[1] in dict(found[0].aggregates):
                return found[0], found[1], side.name
        return None

    def _aggregate_selectivity(self, node: Node, condition: exp.Expression, grouped: Aggregate, aggregate: str,
                               column: str) -> float:
        """HAVING ``agg op value``, the value a literal or a scalar subquery's: the share of groups whose
        aggregate passes, taking a group's rows as independent draws spread evenly over their columns' [min, max]
        and its number of rows as the mean group size give or take its square root
        (``moments.group_aggregate``)."""
        aggregate_first = isinstance(condition.this, exp.Column) and condition.this.name == column
        value = self._scalar_value(node, condition.expression if aggregate_first else condition.this)
        size = self._group_size(grouped)
        spread = None if size is None else group_aggregate(dict(grouped.aggregates)[aggregate], size,
                                                           self._moments_over(grouped.child))
        if not isinstance(value, float) or spread is None:
            return DEFAULT_OTHER
        above = share_above(value, *spread)
        below = isinstance(condition, (exp.LT, exp.LTE)) == aggregate_first
        return max(min(1.0 - above if below else above, 1.0), 0.0)

    def _moments_over(self, node: Node) -> ColumnMoments:
        """A column's mean and mean square over ``node``'s rows, from its [min, max] (None: not numeric)."""
        def column(name: str) -> Moments | None:
            stats = self._column_stats(node, name)
            low, high = value_bounds(stats)
            return uniform_moments(low, high) if isinstance(low, float) and isinstance(high, float) else None
        return column

    def _scalar_value(self, node: Node, expression: exp.Expression) -> float | str | None:
        """The expected value of a literal or of a one-row column (an uncorrelated scalar subquery's value,
        an aggregate over all its rows, possibly scaled): None when not modelled."""
        literal = _literal_value(expression)
        if literal is not None or not isinstance(expression, exp.Column | exp.Mul | exp.Add | exp.Sub):
            return literal
        if not isinstance(expression, exp.Column):
            left, right = self._scalar_value(node, expression.this), self._scalar_value(node, expression.expression)
            if not isinstance(left, float) or not isinstance(right, float):
                return None
            return left * right if isinstance(expression, exp.Mul) else left + right if isinstance(
                expression, exp.Add) else left - right
        found = self._defining(node, expression.name)
        if found is None:
            return None
        source, name = found
        if isinstance(source, Project):
            return self._scalar_value(source.child, dict(source.items)[name])
        if not isinstance(source, Aggregate) or source.groups or name not in dict(source.aggregates):
            return None
        rows = self.rows(source.child)
        aggregate = dict(source.aggregates)[name]
        return None if rows is None else whole_aggregate(aggregate, rows, self._moments_over(source.child))

    def conjunction(self, node: Node, parts: list[exp.Expression]) -> float:
        """The share of rows that pass every predicate: the range conditions on one column as one interval (two
        bounds of a date window are not independent), the others multiplied as independent."""
        share, bounds = 1.0, {}
        for part in parts:
            found = _bound(part)
            if found is None:
                share *= self.selectivity(node, part)
                continue
            column, low, high = found
            old_low, old_high = bounds.get(column, (None, None))
            bounds[column] = (_tighter(old_low, low, max), _tighter(old_high, high, min))
        for column, (low, high) in bounds.items():
            share *= self._range_share(self._column_stats(node, column), low, high)
        return share

    @staticmethod
    def _column_and_operand(condition: exp.Expression) -> tuple[str | None, exp.Expression | None]:
        """The column a simple predicate tests, and the value it compares it with."""
        this = condition.this if isinstance(condition.this, exp.Expression) else None
        if isinstance(this, exp.Column):
            return this.name, condition.args.get("expression")
        other = condition.args.get("expression")
        if isinstance(other, exp.Column) and isinstance(condition, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ,
                                                                    exp.NEQ)):
            return other.name, this
        return None, None

    @staticmethod
    def _range_share(stats: ColumnStats | None, low, high) -> float:
        """The share of [min, max] that [low, high] covers (either end open), evenly spread values assumed."""
        if stats is None:
            return DEFAULT_RANGE
        smallest, largest = value_bounds(stats)
        numbers = [v for v in (smallest, largest, low, high) if v is not None]
        if not isinstance(smallest, float) or not isinstance(largest, float) or not all(
                isinstance(v, float) for v in numbers) or (low is None and high is None):
            return DEFAULT_RANGE
        if largest <= smallest:
            return 1.0
        start = smallest if low is None else max(low, smallest)
        end = largest if high is None else min(high, largest)
        return max(0.0, min(1.0, (end - start) / (largest - smallest)))

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


def _bound(condition: exp.Expression) -> tuple[str, float | None, float | None] | None:
    """A range condition between a column and a number or date literal as (column, low, high), either end open;
    None for any other condition (a comparison with text keeps its own pricing)."""
    if isinstance(condition, exp.Between) and isinstance(condition.this, exp.Column):
        low, high = _literal_value(condition.args["low"]), _literal_value(condition.args["high"])
        if isinstance(low, float) and isinstance(high, float):
            return condition.this.name, low, high
        return None
    if not isinstance(condition, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return None
    this, other = condition.this, condition.expression
    flipped = not isinstance(this, exp.Column)
    column, value = (other, _literal_value(this)) if flipped else (this, _literal_value(other))
    if not isinstance(column, exp.Column) or not isinstance(value, float):
        return None
    upper = isinstance(condition, (exp.LT, exp.LTE)) != flipped
    return (column.name, None, value) if upper else (column.name, value, None)


def _shape(expression: exp.Expression) -> str:
    """An expression's SQL with every column the same placeholder: equal for the same function of a column
    under another name (a scan's filter and a later stage's projection of it)."""
    return expression.transform(lambda n: exp.column("_") if isinstance(n, exp.Column) else n).sql()


def _tighter(old: float | None, new: float | None, pick) -> float | None:
    return new if old is None else old if new is None else pick(old, new)


def _date_part(expression: exp.Expression) -> tuple[str | None, str | None]:
    """``YEAR(c)`` / ``EXTRACT(YEAR FROM c)`` (and months): the part and the column, else (None, None)."""
    if isinstance(expression, (exp.Year, exp.Month)) and isinstance(expression.this, exp.Column):
        return ("year" if isinstance(expression, exp.Year) else "month"), expression.this.name
    if isinstance(expression, exp.Extract) and isinstance(expression.expression, exp.Column):
        unit = expression.this.name.lower() if isinstance(expression.this, (exp.Var, exp.Identifier)) else ""
        if unit in ("year", "month"):
            return unit, expression.expression.name
    return None, None


def kept_distinct(distinct: float, rows: float, share: float) -> float:
    """Distinct keys left when a random ``share`` of ``rows`` rows holding ``distinct`` keys is kept: a key
    goes only when all its rows do, d·(1 − (1 − p)^(n/d)) (Cardenas' formula)."""
    if share >= 1.0 or distinct <= 0 or rows <= 0:
        return distinct
    return distinct * (1.0 - (1.0 - share) ** max(rows / distinct, 1.0))
