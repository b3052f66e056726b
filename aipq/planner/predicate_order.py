"""The order in which a scan evaluates its filter's conjuncts: cheap and selective ones first.

Spark evaluates a filter's conjuncts in the order given and stops at the first false one; it does not reorder
them, and sqlglot's simplifier sorts them by their text (docs/decisions.md). Each conjunct is ranked by the
classic rule for ordering independent predicates: its cost per row over the share of rows it removes,
``cost / (1 - selectivity)``, lowest first; ties keep the written order. Costs are per-row evaluation classes by
operator and column type; selectivities are textbook guesses, since the order only needs to be roughly right.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sqlglot import exp

from aipq.planner.logical import Node, Scan, transform_up

# relative cost per row of comparing a value of a Spark SQL type (the type's name up to its first bracket)
_TYPE_COST = {"boolean": 1.0, "tinyint": 1.0, "smallint": 1.0, "int": 1.0, "integer": 1.0, "bigint": 1.0,
              "date": 1.0, "float": 1.5, "double": 1.5, "timestamp": 1.5, "timestamp_ntz": 1.5, "decimal": 4.0,
              "string": 4.0, "varchar": 4.0, "char": 4.0}
_NUMERIC = {"tinyint", "smallint", "int", "integer", "bigint", "float", "double", "decimal"}
_TEXT = {"string", "varchar", "char"}
_RANGE = (exp.GT, exp.GTE, exp.LT, exp.LTE)
_COMPARISON = (exp.EQ, exp.NEQ, *_RANGE)


def order_scan_filters(root: Node) -> Node:
    """Every scan's filter conjuncts in evaluation order (``conjunct_rank``)."""
    def visit(node: Node) -> Node:
        if isinstance(node, Scan) and len(node.filters) > 1:
            types = node.table.column_types()
            column_types = {name: types.get(source, "") for name, source in node.columns + node.filter_only}
            ranked = sorted(enumerate(node.filters), key=lambda item: (conjunct_rank(item[1], column_types), item[0]))
            ordered = tuple(condition for _, condition in ranked)
            if ordered != node.filters:
                return replace(node, filters=ordered)
        return node

    return transform_up(root, visit)


def conjunct_rank(condition: exp.Expression, column_types: dict[str, str]) -> float:
    """Cost per row over the share of rows removed (lower runs first). A conjunct that could fail on some row
    (a function, arithmetic, a cast of a column) ranks last, keeping its place among such ones: moving it ahead
    of a conjunct that guarded it could raise an error in ANSI mode that the written order avoids."""
    cost = _cost(condition, column_types)
    if cost is None:
        return math.inf
    return cost / max(1.0 - _selectivity(condition), 0.05)


def _type_of(node: exp.Expression, column_types: dict[str, str]) -> str | None:
    if not isinstance(node, exp.Column):
        return None
    return column_types.get(node.name, "").split("(")[0].strip().lower() or None


def _constant_kind(node: exp.Expression) -> str | None:
    """'number' or 'string' for a literal (or arithmetic over number literals); the target type for a cast of a
    literal. Spark folds these at planning, so they fail, if at all, whatever the order."""
    if isinstance(node, exp.Paren | exp.Neg):
        return _constant_kind(node.this)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        kinds = {_constant_kind(node.left), _constant_kind(node.right)}
        return "number" if kinds == {"number"} else None
    if isinstance(node, exp.Literal):
        return "number" if node.is_number else "string"
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        return node.to.sql("spark").split("(")[0].lower()
    return None


def _compares_safely(column_type: str | None, constants: list[exp.Expression]) -> bool:
    """Whether comparing a column of ``column_type`` with ``constants`` needs no cast of the column's values."""
    if column_type is None:
        return False
    kinds = {_constant_kind(c) for c in constants}
    if column_type in _NUMERIC:
        return kinds <= {"number"}
    if column_type in _TEXT:
        return kinds <= {"string"}
    return kinds <= {column_type}  # a date or timestamp against literals cast to that type


def _cost(condition: exp.Expression, column_types: dict[str, str]) -> float | None:
    """Relative cost per row, or None where evaluating the conjunct could fail on some row."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.Not):
        return _cost(condition.this, column_types)
    if isinstance(condition, exp.Is) and isinstance(condition.this, exp.Column):
        return 0.5
    if isinstance(condition, _COMPARISON):
        column, constant = condition.left, condition.right
        if not isinstance(column, exp.Column):
            column, constant = constant, column
        column_type = _type_of(column, column_types)
        if isinstance(constant, exp.Column):  # two columns of one type
            same = column_type is not None and column_type == _type_of(constant, column_types)
            return 2 * _TYPE_COST.get(column_type, 6.0) if same else None
        return _TYPE_COST.get(column_type, 6.0) if _compares_safely(column_type, [constant]) else None
    if isinstance(condition, exp.Between):
        column_type = _type_of(condition.this, column_types)
        bounds = [condition.args["low"], condition.args["high"]]
        return 2 * _TYPE_COST.get(column_type, 6.0) if _compares_safely(column_type, bounds) else None
    if isinstance(condition, exp.In) and not condition.args.get("query"):
        column_type = _type_of(condition.this, column_types)
        if _compares_safely(column_type, condition.expressions):
            return _TYPE_COST.get(column_type, 6.0) + 0.5 * len(condition.expressions)
        return None
    if isinstance(condition, exp.Like) and _type_of(condition.this, column_types) in _TEXT \
            and _constant_kind(condition.expression) == "string":
        return 8.0
    return None


def _selectivity(condition: exp.Expression) -> float:
    """The share of rows a conjunct keeps, by its form alone."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.Not):
        return 1.0 - _selectivity(condition.this)
    if isinstance(condition, (exp.Is, exp.EQ)):
        return 0.1
    if isinstance(condition, exp.NEQ):
        return 0.9
    if isinstance(condition, _RANGE):
        return 1 / 3
    if isinstance(condition, exp.Between):
        return 0.25
    if isinstance(condition, exp.In):
        return min(0.1 * len(condition.expressions), 0.5)
    if isinstance(condition, exp.Like):
        return 0.25
    return 0.5
