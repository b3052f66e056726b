"""Partition pruning at planning time: a scan of a partitioned table keeps only the partitions its filters on
partition columns may accept, so that Spark lists and reads only their folders (Hive's partition pruner).

A filter is evaluated over a partition's values when it reads partition columns alone and is built from
comparisons, IN, BETWEEN, IS [NOT] NULL, AND, OR and NOT over literals; anything else keeps the partition.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from aipq.catalog import Partition
from aipq.planner.logical import Node, Scan, refs, transform_up

_UNKNOWN = object()  # the filter cannot be evaluated here: keep the partition
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_COMPARE = {exp.EQ: lambda a, b: a == b, exp.NEQ: lambda a, b: a != b, exp.LT: lambda a, b: a < b,
            exp.LTE: lambda a, b: a <= b, exp.GT: lambda a, b: a > b, exp.GTE: lambda a, b: a >= b}


def prune_partitions(root: Node) -> Node:
    def visit(node: Node) -> Node:
        if not isinstance(node, Scan) or not node.table.partitioned:
            return node
        kept = tuple(p for p in node.table.partitions if may_hold(node, p))
        if len(kept) == len(node.table.partitions):
            return node
        return replace(node, table=replace(node.table, partitions=kept),
                       all_partitions=node.all_partitions or len(node.table.partitions))

    return transform_up(root, visit)


def may_hold(scan: Scan, partition: Partition) -> bool:
    """False only when some filter of ``scan`` is FALSE or NULL for every row of ``partition``."""
    sources = dict(scan.columns + scan.filter_only)
    table = scan.table
    values = dict(zip(table.partition_columns, partition.values))
    types = table.column_types()
    bound = {name: (values[source], types[source]) for name, source in sources.items() if source in values}
    for condition in scan.filters:
        if refs(condition) and refs(condition) <= set(bound):
            result = _evaluate(condition, bound)
            if result is None or result is False:
                return False
    return True


def value_fits(text: str | None, spark_type: str) -> bool:
    """Whether a static partition value reads back as a value of its column's type (not as NULL)."""
    if text is None:
        return True
    base = spark_type.split("(")[0].lower()
    return base not in (*_NUMERIC, "date") or _typed(text, spark_type) is not _UNKNOWN


def _typed(text: str | None, spark_type: str):
    if text is None:
        return None
    base = spark_type.split("(")[0].lower()
    try:
        if base in _NUMERIC:
            return Decimal(text)
        if base == "date":
            return datetime.date.fromisoformat(text)
    except (InvalidOperation, ValueError):
        return _UNKNOWN
    return text if base in ("string", "varchar", "char") else _UNKNOWN


def _literal(node: exp.Expression, bound: dict[str, tuple[str | None, str]]):
    if isinstance(node, exp.Paren):
        return _literal(node.this, bound)
    if isinstance(node, exp.Column):
        return _typed(*bound[node.name]) if node.name in bound else _UNKNOWN
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        try:
            return Decimal(node.this)
        except InvalidOperation:
            return _UNKNOWN
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.to.is_type(exp.DataType.Type.DATE):
        try:
            return datetime.date.fromisoformat(node.this.this)
        except ValueError:
            return _UNKNOWN
    if isinstance(node, exp.Neg):
        value = _literal(node.this, bound)
        return -value if isinstance(value, Decimal) else _UNKNOWN
    return _UNKNOWN


def _compare(op, left, right):
    if left is _UNKNOWN or right is _UNKNOWN:
        return _UNKNOWN
    if left is None or right is None:
        return None
    if isinstance(left, str) != isinstance(right, str) or type(left) is not type(right) and not (
            isinstance(left, Decimal) and isinstance(right, Decimal)):
        return _UNKNOWN  # Spark would cast one side; leave such a comparison to Spark
    return op(left, right)


def _evaluate(condition: exp.Expression, bound):
    """SQL's three values (True, False, None) of ``condition`` over the bound partition values, or _UNKNOWN."""
    if isinstance(condition, exp.Paren):
        return _evaluate(condition.this, bound)
    if isinstance(condition, exp.And):
        return _all([_evaluate(c, bound) for c in condition.flatten()])
    if isinstance(condition, exp.Or):
        return _any([_evaluate(c, bound) for c in condition.flatten()])
    if isinstance(condition, exp.Not):
        inner = _evaluate(condition.this, bound)
        return inner if inner is None or inner is _UNKNOWN else not inner
    if type(condition) in _COMPARE:
        return _compare(_COMPARE[type(condition)], _literal(condition.left, bound), _literal(condition.right, bound))
    if isinstance(condition, exp.Is) and isinstance(condition.expression, exp.Null):
        value = _literal(condition.this, bound)
        return _UNKNOWN if value is _UNKNOWN else value is None
    if isinstance(condition, exp.Between):
        value = _literal(condition.this, bound)
        low = _compare(_COMPARE[exp.GTE], value, _literal(condition.args["low"], bound))
        high = _compare(_COMPARE[exp.LTE], value, _literal(condition.args["high"], bound))
        return _all([low, high])
    if isinstance(condition, exp.In) and not condition.args.get("query"):
        value = _literal(condition.this, bound)
        return _any([_compare(_COMPARE[exp.EQ], value, _literal(item, bound)) for item in condition.expressions])
    return _UNKNOWN


def _all(results: list):
    """AND in SQL's three values, _UNKNOWN where a part cannot be evaluated (and none is FALSE)."""
    if any(r is False for r in results):
        return False
    return _UNKNOWN if any(r is _UNKNOWN for r in results) else (None if any(r is None for r in results) else True)


def _any(results: list):
    """OR in SQL's three values, _UNKNOWN where a part cannot be evaluated (and none is TRUE)."""
    if any(r is True for r in results):
        return True
    return _UNKNOWN if any(r is _UNKNOWN for r in results) else (None if any(r is None for r in results) else False)
