"""Subqueries in expressions, decorrelated into joins so they become ordinary stages of the DAG.

- ``EXISTS`` / ``IN`` → left semi join; ``NOT EXISTS`` → left anti join. Correlation conditions become the
  join's keys (equalities) and residual (anything else, e.g. Q21's ``l2.l_suppkey <> l1.l_suppkey``).
- ``x NOT IN (subquery)`` → anti join on ``x = y`` plus a one-row guard, because of NULL semantics: the row
  survives only if no ``y`` equals ``x`` and either the subquery is empty or (``x`` is not NULL and no ``y``
  is NULL). Correlated, the anti join's condition becomes ``x = y OR x IS NULL OR y IS NULL``.
- ``IN``/``EXISTS`` under OR, in CASE or in the SELECT list → COUNT scalar subqueries (``membership.py``).
- A scalar subquery → a join with the subquery's plan grouped by its correlation columns (uncorrelated: a
  one-row relation, broadcast). In a WHERE conjunct that is NULL whenever the value is NULL (``x < (…)``),
  it is an inner join the join orderer can place like any other; elsewhere it is a LEFT join, with COUNT's
  value on an empty group (0, not NULL) restored. A subquery that could return several rows per key is
  checked at run time, with the error Spark and Hive give.

The join's outer side is the FROM relation the conditions read when there is one, so a semi join filters
that relation before it meets the rest of the block (Q21's EXISTS prunes ``lineitem l1`` alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from aipq.errors import BadInputError
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    col,
    conjuncts,
    refs,
)


class Names(Protocol):
    def allocate(self, preferred: str, qualifier: str | None = None) -> str: ...


class SubqueryBuilder(Protocol):
    """What planning a subquery needs from the query's builder (``planner/build.Builder``): to plan a query
    block inside an enclosing scope, translate expressions against a scope, join in the written order, name new
    columns and report what it cannot plan. Scopes map aliases to the builder's FROM relations."""

    source_name: str | None
    names: Names

    def build_query(self, query: exp.Expression, ctes: Any, outer: Any = None) -> Any: ...

    def enclose(self, scope: dict[str, Any], mode: str) -> Any: ...

    def translate(self, expression: exp.Expression, scope: dict[str, Any], scalars: list[ScalarJoin] | None = None,
                  ctes: Any = None, output_aliases: dict[str, exp.Expression] | None = None,
                  condition: bool = False) -> exp.Expression: ...

    def written_order_join(self, left: Node, right: Node, kind: str, on: list[exp.Expression]) -> Node: ...

    def position(self, node: exp.Expression) -> Any: ...

    def unsupported(self, what: str, node: exp.Expression | None = None, hint: str | None = None) -> Exception: ...

TOO_MANY_ROWS = "more than one row returned by a subquery used as an expression"

# Operators through which a NULL operand makes the whole predicate NULL (so the WHERE drops the row).
_NULL_PROPAGATING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Add, exp.Sub, exp.Mul, exp.Div,
                     exp.Neg, exp.Paren, exp.Cast)


@dataclass
class ScalarJoin:
    """A planned scalar subquery: join ``node`` on ``keys`` (outer column, inner column); read ``value``."""

    node: Node
    keys: list[tuple[str, str]]
    value: exp.Expression  # over the subquery's output: its column, or a CASE restoring COUNT's empty value
    inner_joinable: bool  # no value to restore on an empty group, so an inner join is exact


def is_subquery_predicate(expression: exp.Expression) -> bool:
    return any(True for _ in expression.find_all(exp.Subquery, exp.Exists, exp.Any, exp.All))


def strip_not(expression: exp.Expression) -> tuple[exp.Expression, bool]:
    negated = False
    while isinstance(expression, (exp.Not, exp.Paren)):
        if isinstance(expression, exp.Not):
            negated = not negated
        expression = expression.this
    return expression, negated


def null_rejecting(predicate: exp.Expression, subquery: exp.Expression) -> bool:
    """True when a NULL value of ``subquery`` makes ``predicate`` NULL (not TRUE)."""
    node = subquery.parent
    while node is not None:
        if not isinstance(node, _NULL_PROPAGATING):
            return False
        if node is predicate:
            return True
        node = node.parent
    return False


def empty_group_value(value: exp.Expression, aggregate: Aggregate) -> exp.Expression | None:
    """The scalar's value over no rows (COUNT → 0, other aggregates → NULL); None when that is NULL."""
    counts = {name for name, e in aggregate.aggregates if isinstance(e, exp.Count)}
    others = {name for name, _ in aggregate.aggregates} - counts

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name in counts:
            return exp.Literal.number(0)
        if isinstance(node, exp.Column) and node.name in others:
            return exp.Null()
        return node

    if not counts & refs(value):
        return None
    from sqlglot.optimizer.simplify import simplify

    result = simplify(value.copy().transform(swap))
    return None if isinstance(result, exp.Null) else result


class SubqueryPlanner:
    def __init__(self, builder: SubqueryBuilder):
        self.b = builder

    # ---- WHERE conjuncts ----------------------------------------------------------------------------
    def apply_conjunct(self, node: Node, conjunct: exp.Expression, scope: dict[str, Any], ctes) -> Node:
        """``node`` filtered by a WHERE conjunct that holds a subquery."""
        predicate, negated = strip_not(conjunct)
        if isinstance(predicate, exp.Exists):
            return self.exists(node, predicate, negated, scope, ctes)
        if isinstance(predicate, exp.In) and predicate.args.get("query") is not None:
            return self.in_subquery(node, predicate, negated, scope, ctes)
        for quantified in conjunct.find_all(exp.Any, exp.All):
            raise self.b.unsupported("ANY/ALL subqueries", quantified,
                                     hint="write x > (SELECT MAX(…)) or EXISTS instead")
        scalars: list[ScalarJoin] = []
        translated = self.b.translate(conjunct, scope, scalars=scalars, ctes=ctes, condition=True)
        subqueries = [s for s in conjunct.find_all(exp.Subquery) if self.is_scalar(s)]
        if all(s.inner_joinable for s in scalars) and all(null_rejecting(conjunct, s) for s in subqueries):
            relations = node.relations if isinstance(node, JoinBlock) else (node,)
            conditions = list(node.conditions) if isinstance(node, JoinBlock) else []
            for scalar in scalars:
                relations += (scalar.node,)
                conditions += [exp.EQ(this=col(o), expression=col(i)) for o, i in scalar.keys]
            return JoinBlock(relations, tuple(conditions + [translated]))
        return Filter(self.attach(node, scalars), translated)

    @staticmethod
    def is_scalar(subquery: exp.Subquery) -> bool:
        return not isinstance(subquery.parent, (exp.In, exp.Exists)) and not isinstance(
            subquery.parent, (exp.From, exp.Join))

    def exists(self, node: Node, predicate: exp.Exists, negated: bool, scope, ctes) -> Node:
        block = self.b.build_query(predicate.this, ctes, outer=self.b.enclose(scope, "filter"))
        right = block.node
        conditions = list(block.correlated)
        if not conditions:
            right = Limit(right, 1)  # uncorrelated: one row decides it
        return self.semi_join(node, right, "anti" if negated else "semi", conditions)

    def in_subquery(self, node: Node, predicate: exp.In, negated: bool, scope, ctes) -> Node:
        subquery = predicate.args["query"]
        block = self.b.build_query(subquery.this if isinstance(subquery, exp.Subquery) else subquery, ctes,
                                   outer=self.b.enclose(scope, "filter"))
        left_items = predicate.this.expressions if isinstance(predicate.this, exp.Tuple) else [predicate.this]
        if len(left_items) != len(block.names):
            raise BadInputError(
                f"IN compares {len(left_items)} value(s) with a subquery returning {len(block.names)} column(s)",
                position=self.b.position(predicate), source_name=self.b.source_name)
        values = [self.b.translate(item, scope) for item in left_items]
        node, value_names, computed = self.key_columns(node, values)
        pairs = list(zip(value_names, block.node.output[:len(block.names)]))
        conditions = list(block.correlated)
        if not negated:
            conditions += [exp.EQ(this=col(a), expression=col(b)) for a, b in pairs]
            return self.drop(self.semi_join(node, block.node, "semi", conditions), computed)
        if len(pairs) != 1:
            raise self.b.unsupported("NOT IN with several columns", predicate,
                                     hint="use NOT EXISTS with the column equalities in its WHERE")
        outer_value, inner_value = pairs[0]
        if conditions:
            # Correlated: a row is removed when some y of its group makes x = y TRUE or NULL.
            either_null = exp.or_(exp.EQ(this=col(outer_value), expression=col(inner_value)),
                                  exp.Is(this=col(outer_value), expression=exp.Null()),
                                  exp.Is(this=col(inner_value), expression=exp.Null()))
            return self.drop(self.semi_join(node, block.node, "anti", conditions + [either_null]), computed)
        return self.drop(self.null_aware_anti_join(node, block.node, outer_value, inner_value), computed)

    def null_aware_anti_join(self, node: Node, subquery: Node, outer_value: str, inner_value: str) -> Node:
        rows, nulls = self.b.names.allocate("_in_rows"), self.b.names.allocate("_in_nulls")
        is_null = exp.Is(this=col(inner_value), expression=exp.Null())
        guard = Aggregate(subquery, (), (
            (rows, exp.Count(this=exp.Star())),
            (nulls, exp.Sum(this=exp.If(this=is_null, true=exp.Literal.number(1), false=exp.Literal.number(0)))),
        ))
        anti = Join(node, subquery, "anti", (outer_value,), (inner_value,))
        keep = exp.or_(
            exp.EQ(this=col(rows), expression=exp.Literal.number(0)),
            exp.and_(exp.Not(this=exp.Is(this=col(outer_value), expression=exp.Null())),
                     exp.EQ(this=exp.func("COALESCE", col(nulls), exp.Literal.number(0)),
                            expression=exp.Literal.number(0))),
        )
        checked = Filter(Join(anti, guard, "cross"), keep)
        return Project(checked, tuple((n, col(n)) for n in node.output))

    def key_columns(self, node: Node, values: list[exp.Expression]) -> tuple[Node, list[str], list[str]]:
        """Column names for IN's left values; expressions are computed into new columns first."""
        names, computed = [], []
        for value in values:
            if isinstance(value, exp.Column):
                names.append(value.name)
            else:
                name = self.b.names.allocate("_in_key")
                computed.append((name, value))
                names.append(name)
        if computed:
            node = self.with_columns(node, computed, set().union(*(refs(v) for _, v in computed)))
        return node, names, [n for n, _ in computed]

    @staticmethod
    def with_columns(node: Node, computed: list[tuple[str, exp.Expression]], reads: set[str]) -> Node:
        """Add computed columns to the relation of a join block that has what they read (or on top)."""
        def extend(target: Node) -> Node:
            return Project(target, tuple((n, col(n)) for n in target.output) + tuple(computed))

        if isinstance(node, JoinBlock):
            for i, relation in enumerate(node.relations):
                if reads <= set(relation.output):
                    relations = node.relations[:i] + (extend(relation),) + node.relations[i + 1:]
                    return JoinBlock(relations, node.conditions)
        return extend(node)

    @staticmethod
    def drop(node: Node, names: list[str]) -> Node:
        if not names:
            return node
        return Project(node, tuple((n, col(n)) for n in node.output if n not in names))

    def semi_join(self, node: Node, right: Node, kind: str, conditions: list[exp.Expression]) -> Node:
        """A semi/anti join; inside a join block it goes onto the one relation its conditions read, if any."""
        outer_reads = set().union(*(refs(c) for c in conditions)) - set(right.output)
        if isinstance(node, JoinBlock):
            for i, relation in enumerate(node.relations):
                if outer_reads <= set(relation.output):
                    joined = self.b.written_order_join(relation, right, kind, conditions)
                    relations = node.relations[:i] + (joined,) + node.relations[i + 1:]
                    return JoinBlock(relations, node.conditions)
        missing = outer_reads - set(node.output)
        if missing:
            raise self.b.unsupported("a subquery that refers to a query more than one level out")
        return self.b.written_order_join(node, right, kind, conditions)

    # ---- scalar subqueries --------------------------------------------------------------------------
    def scalar(self, subquery: exp.Subquery, scope, ctes) -> ScalarJoin:
        block = self.b.build_query(subquery.this, ctes, outer=self.b.enclose(scope, "group"))
        if len(block.names) != 1:
            raise BadInputError(f"a subquery used as a value must return one column, not {len(block.names)}",
                                position=self.b.position(subquery), source_name=self.b.source_name)
        keys = []
        for condition in block.correlated:
            keys.append((condition.this.name, condition.expression.name))
        node = block.node
        value = node.output[0]
        empty = block.empty_value
        if not block.one_row_per_group:
            node, value = self.at_most_one_row(node, [inner for _, inner in keys], value)
        value_expr: exp.Expression = col(value)
        if empty is not None and keys:
            no_group = exp.Is(this=col(keys[0][1]), expression=exp.Null())
            value_expr = exp.Case(ifs=[exp.If(this=no_group, true=empty)], default=col(value))
        return ScalarJoin(node, keys, value_expr, inner_joinable=empty is None or not keys)

    def at_most_one_row(self, node: Node, keys: list[str], value: str) -> tuple[Node, str]:
        """The subquery's value per key, failing at run time if a key has several rows."""
        rows, first, checked = (self.b.names.allocate(n) for n in ("_rows", "_value", "_scalar"))
        grouped = Aggregate(node, tuple((k, col(k)) for k in keys),
                            ((first, exp.Max(this=col(value))), (rows, exp.Count(this=exp.Star()))))
        too_many = exp.GT(this=col(rows), expression=exp.Literal.number(1))
        fail = exp.Anonymous(this="RAISE_ERROR", expressions=[exp.Literal.string(TOO_MANY_ROWS)])
        check = exp.Case(ifs=[exp.If(this=too_many, true=fail)], default=col(first))
        return Project(grouped, tuple((k, col(k)) for k in keys) + ((checked, check),)), checked

    @staticmethod
    def attach(node: Node, scalars: list[ScalarJoin]) -> Node:
        """Join scalar subqueries on top of ``node``: LEFT on their keys, or to their single row."""
        for scalar in scalars:
            if scalar.keys:
                node = Join(node, scalar.node, "left", tuple(o for o, _ in scalar.keys),
                            tuple(i for _, i in scalar.keys))
            else:
                node = Join(node, scalar.node, "cross")
        return node


def correlation_keys(correlated: list[exp.Expression], inner: set[str], subquery: exp.Expression,
                     builder: SubqueryBuilder) -> list[tuple[str, exp.Expression]]:
    """(outer column, inner expression) for each correlation of a scalar subquery; only equalities work."""
    pairs = []
    for condition in correlated:
        for part in conjuncts(condition):
            if isinstance(part, exp.EQ):
                a, b = part.this, part.expression
                for outer_side, inner_side in ((a, b), (b, a)):
                    if (isinstance(outer_side, exp.Column) and outer_side.name not in inner
                            and refs(inner_side) and refs(inner_side) <= inner):
                        pairs.append((outer_side.name, inner_side))
                        break
                else:
                    raise builder.unsupported("a correlation other than column = column in a scalar subquery",
                                              subquery)
            else:
                raise builder.unsupported("a correlation other than an equality in a scalar subquery", subquery,
                                          hint="EXISTS/IN subqueries accept any correlation condition")
    return pairs

