"""Predicates' selectivity over a stage's plan (the share of rows a filter, a HAVING or a LIKE keeps), from the
statistics of the columns they compare, for ``Cardinality`` (``estimator/cardinality.py``)."""

from __future__ import annotations

import datetime
import functools
import re

from sqlglot import exp

from aipq.estimator.moments import (
    ColumnMoments,
    Moments,
    group_aggregate,
    share_above,
    uniform_moments,
    whole_aggregate,
)
from aipq.planner.logical import Aggregate, Node, Project, conjuncts
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



class Selectivity:
    """``Cardinality``'s part of it (a mixin: it reads the rest of ``Cardinality``)."""

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
