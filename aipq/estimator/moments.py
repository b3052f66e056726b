"""Means and spreads of row expressions and aggregates: what a HAVING compares.

A column's values are taken as spread evenly over its [min, max] and columns as independent, so an expression's
mean and mean square follow from its columns' (a product's are the products). A group's aggregate then has a
mean and a variance over groups of ``n`` rows, ``n`` itself a Poisson count around the mean group size; and an
aggregate over all rows (a scalar subquery's ``SUM(...) * 0.0001``, TPC-H Q11) has a value. The share of groups
whose aggregate passes a comparison is read from the normal curve with that mean and variance.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

Moments = tuple[float, float]  # a row expression's mean and mean square
ColumnMoments = Callable[[str], Moments | None]


def uniform_moments(low: float, high: float) -> Moments:
    """Mean and mean square of values spread evenly over [low, high]."""
    return (low + high) / 2.0, (low * low + low * high + high * high) / 3.0


def expression_moments(expression: exp.Expression, column: ColumnMoments) -> Moments | None:
    """Mean and mean square of a row expression of independent columns and number literals (None: not
    modelled)."""
    if isinstance(expression, exp.Paren | exp.Cast):
        return expression_moments(expression.this, column)
    if isinstance(expression, exp.Column):
        return column(expression.name)
    if isinstance(expression, exp.Literal) and not expression.is_string:
        value = float(expression.this)
        return value, value * value
    if isinstance(expression, exp.Neg):
        inner = expression_moments(expression.this, column)
        return None if inner is None else (-inner[0], inner[1])
    if not isinstance(expression, exp.Mul | exp.Add | exp.Sub):
        return None
    left, right = expression_moments(expression.this, column), expression_moments(expression.expression, column)
    if left is None or right is None:
        return None
    if isinstance(expression, exp.Mul):
        return left[0] * right[0], left[1] * right[1]
    sign = 1.0 if isinstance(expression, exp.Add) else -1.0
    return left[0] + sign * right[0], left[1] + right[1] + 2.0 * sign * left[0] * right[0]


def group_aggregate(aggregate: exp.Expression, size: float, column: ColumnMoments) -> tuple[float, float] | None:
    """Mean and variance, over groups of about ``size`` rows, of a COUNT, SUM or AVG: a COUNT is a Poisson
    count (mean and variance n), a SUM a compound Poisson sum (n times the mean, n times the mean square), an
    AVG the mean with 1/n of the variance."""
    if isinstance(aggregate, exp.Count):
        return size, size
    if not isinstance(aggregate, exp.Sum | exp.Avg):
        return None
    moments = expression_moments(aggregate.this, column)
    if moments is None:
        return None
    mean, square = moments
    if isinstance(aggregate, exp.Sum):
        return size * mean, size * square
    return mean, max(square - mean * mean, 0.0) / size


def whole_aggregate(aggregate: exp.Expression, rows: float, column: ColumnMoments) -> float | None:
    """The expected value of a COUNT, SUM or AVG over ``rows`` rows (None: not modelled)."""
    if isinstance(aggregate, exp.Count):
        return rows
    if not isinstance(aggregate, exp.Sum | exp.Avg):
        return None
    moments = expression_moments(aggregate.this, column)
    if moments is None:
        return None
    return rows * moments[0] if isinstance(aggregate, exp.Sum) else moments[0]


def share_above(threshold: float, mean: float, variance: float) -> float:
    """The share of a normal distribution above ``threshold``."""
    if variance <= 0:
        return float(mean > threshold)
    return 0.5 * math.erfc((threshold - mean) / math.sqrt(2.0 * variance))
