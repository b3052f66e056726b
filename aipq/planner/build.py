"""Qualified sqlglot statement → logical plan.

A SELECT block becomes: its FROM items (scans, CTE references, derived tables), an unordered ``JoinBlock``
when all joins are inner (the join order is chosen later by ``order_joins``), written-order ``Join``s when
outer or semi joins are involved, then Aggregate → Filter (HAVING) → Project → Sort → Limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.errors import BadInputError, UnsupportedSqlError
from aipq.planner.blocks import Block, NameAllocator, Outer, Relation, SelectParts
from aipq.planner.build_clauses import ClauseBuilder, ancestors, has_aggregate
from aipq.planner.build_from import FromBuilder
from aipq.planner.logical import (
    Aggregate,
    Join,
    Node,
    Project,
    QueryPlan,
    Union,
    Window,
    col,
    refs,
)
from aipq.planner.membership import memberships_as_counts
from aipq.planner.parse import node_position
from aipq.planner.subqueries import (
    ScalarJoin,
    SubqueryPlanner,
    correlation_keys,
)


@dataclass
class Builder(FromBuilder, ClauseBuilder):
    tables: dict[str, TableEntry]
    sql: str
    source_name: str | None = None
    names: NameAllocator = field(default_factory=NameAllocator)
    column_sources: dict[str, str] = field(default_factory=dict)
    enclosing: list[dict[str, Relation]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.subqueries = SubqueryPlanner(self)

    def enclose(self, scope: dict[str, Relation], mode: Literal["filter", "group"]) -> Outer:
        return Outer(scope, mode)

    def position(self, node: exp.Expression):
        """Where ``node`` is in the SQL, or failing that the first column or name inside it."""
        position = node_position(node, self.sql)
        if position is None:
            inner = next(iter(node.find_all(exp.Column, exp.Identifier)), None)
            position = node_position(inner, self.sql) if inner is not None else None
        return position

    # ---- errors -------------------------------------------------------------------------------------
    def unsupported(self, what: str, node: exp.Expression | None = None, hint: str | None = None):
        position = self.position(node) if node is not None else None
        return UnsupportedSqlError(f"unsupported SQL: {what}", position=position, source_name=self.source_name,
                                   hint=hint)

    # ---- query blocks -------------------------------------------------------------------------------
    def build_query(self, query: exp.Expression, ctes: dict[str, Block], outer: Outer | None = None) -> Block:
        if isinstance(query, exp.Subquery):
            return self.build_query(query.this, ctes, outer)
        if isinstance(query, exp.Select):
            if outer is None:
                return self.build_select(query, ctes)
            self.enclosing.append(outer.scope)
            try:
                return self.build_select(query, ctes, outer)
            finally:
                self.enclosing.pop()
        if isinstance(query, exp.SetOperation):
            return self.build_set_operation(query, ctes)
        raise self.unsupported(f"{query.key.upper()} statement", query)

    def build_set_operation(self, query: exp.SetOperation, ctes: dict[str, Block]) -> Block:
        """UNION [ALL] by position; INTERSECT/EXCEPT [ALL] as a semi/anti join on all columns (NULLs equal)."""
        ctes = self.with_ctes(query, ctes)
        left, right = self.build_query(query.this, ctes), self.build_query(query.expression, ctes)
        if len(left.names) != len(right.names):
            raise BadInputError(
                f"{query.key.upper()} inputs have {len(left.names)} and {len(right.names)} columns",
                position=self.position(query.expression), source_name=self.source_name,
                hint="each SELECT of a set operation must return the same number of columns")
        names = tuple(self.names.allocate(n if n.isidentifier() else "_col") for n in left.names)
        width = len(left.names)
        distinct = query.args.get("distinct") is not False
        if isinstance(query, exp.Union):
            # a chain of UNION ALLs is one n-ary union (its nesting would be as deep as the chain is long)
            first = left.node.inputs if isinstance(left.node, Union) else (left.node,)
            node: Node = Union((*first, right.node), names)
            if distinct:
                node = Aggregate(node, tuple((n, col(n)) for n in names), ())
        else:
            left_columns, right_columns = left.node.output[:width], right.node.output[:width]
            kind = "semi" if isinstance(query, exp.Intersect) else "anti"
            if distinct:
                unique = Aggregate(left.node, tuple((n, col(n)) for n in left_columns), ())
                joined = Join(unique, right.node, kind, tuple(left_columns), tuple(right_columns), null_safe=True)
            else:
                # ALL: the k-th copy of a row on the left meets the k-th copy on the right, so INTERSECT ALL keeps
                # min(m, n) copies and EXCEPT ALL max(m - n, 0)
                numbered_left, left_copy = self.copy_numbers(left.node, left_columns)
                numbered_right, right_copy = self.copy_numbers(right.node, right_columns)
                joined = Join(numbered_left, numbered_right, kind, (*left_columns, left_copy),
                              (*right_columns, right_copy), null_safe=True)
            node = Project(joined, tuple((n, col(c)) for n, c in zip(names, left_columns)))
        node = self.order_and_limit(node, query, names, left.names)
        return Block(node, left.names)

    def copy_numbers(self, node: Node, columns: tuple[str, ...]) -> tuple[Node, str]:
        """``node`` with each row numbered among the rows equal to it on ``columns`` (1, 2, …)."""
        number = self.names.allocate("_copy")
        keys = [col(c) for c in columns]
        window = exp.Window(this=exp.RowNumber(), partition_by=keys,
                            order=exp.Order(expressions=[exp.Ordered(this=k.copy()) for k in keys]))
        return Window(node, ((number, window),)), number


    def with_ctes(self, query: exp.Expression, outer_ctes: dict[str, Block]) -> dict[str, Block]:
        ctes = dict(outer_ctes)
        with_ = query.args.get("with_") or query.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                if with_.args.get("recursive"):
                    raise self.unsupported("recursive CTE", cte)
                ctes[cte.alias_or_name.lower()] = self.build_query(cte.this, ctes)
        return ctes

    def correlation_outputs(self, select: exp.Select, outer: Outer | None, correlated: list[exp.Expression],
                            inner_columns: set[str], is_aggregate: bool
                            ) -> tuple[list[exp.Expression], list[tuple[str, exp.Expression]]]:
        """The inner expressions a correlated subquery's join reads (its output carries them), and for a scalar
        subquery its correlation keys (outer column, inner expression)."""
        if outer is None or not correlated:
            return [], []
        if select.args.get("limit") is not None:
            raise self.unsupported("LIMIT in a correlated subquery", select.args["limit"])
        if outer.mode == "filter":
            if is_aggregate:
                raise self.unsupported("a correlated IN/EXISTS subquery with GROUP BY or aggregates", select)
            return [col(n) for n in sorted(set().union(*(refs(c) for c in correlated)) & inner_columns)], []
        having = select.args.get("having")
        if having is not None:
            raise self.unsupported("HAVING in a correlated scalar subquery", having)
        keys = correlation_keys(correlated, inner_columns, select, self)
        return [inner for _, inner in keys], keys

    def with_extras(self, items: list[tuple[str, exp.Expression]], extras: list[exp.Expression]
                    ) -> tuple[list[tuple[str, exp.Expression]], list[str]]:
        """The projection with each correlation expression it lacks added, and the name each one has in it."""
        used = {n for n, _ in items}
        extra_items: list[tuple[str, exp.Expression]] = []
        extra_names: list[str] = []
        for expr in extras:
            existing = next((n for n, e in items + extra_items if e == expr), None)
            if existing is None:
                existing = expr.name if isinstance(expr, exp.Column) and expr.name not in used else \
                    self.names.allocate("_corr")
                used.add(existing)
                extra_items.append((existing, expr))
            extra_names.append(existing)
        return items + extra_items, extra_names

    def build_select(self, select: exp.Select, outer_ctes: dict[str, Block], outer: Outer | None = None) -> Block:
        ctes = self.with_ctes(select, outer_ctes)
        for key in ("qualify", "offset", "pivots"):
            if select.args.get(key):
                raise self.unsupported(f"{key.upper()} clause", select.args[key] if isinstance(
                    select.args[key], exp.Expression) else select)
        windows = [w for w in select.find_all(exp.Window) if w.find_ancestor(exp.Select) is select]
        self.check_windows(select, windows, outer)
        node, scope, inner_columns, correlated = self.select_input(select, ctes, outer)

        group = select.args.get("group")
        having = select.args.get("having")
        order = select.args.get("order") or select.args.get("sort") or select.args.get("cluster")
        item_scalars: list[ScalarJoin] = []
        translated_items = [(self.output_name(e), self.translate(e.unalias(), scope, item_scalars, ctes))
                            for e in select.expressions]
        order_items = self.order_items(order, {name: expr for name, expr in translated_items}, scope)
        having_scalars: list[ScalarJoin] = []
        having_expr = self.translate(having.this, scope, having_scalars, ctes, condition=True) \
            if having is not None else None
        is_aggregate = group is not None or any(
            has_aggregate(e) for _, e in translated_items) or having_expr is not None
        extras, keys = self.correlation_outputs(select, outer, correlated, inner_columns, is_aggregate)

        empty_value = None
        if is_aggregate:
            node, translated_items, order_items, extras, empty_value = self.aggregate_select(
                select, node, scope, SelectParts(translated_items, order_items, extras, having_expr,
                                                 item_scalars + having_scalars), windows, outer)
        else:
            node = self.subqueries.attach(node, item_scalars)
            if windows:
                node, translated_items, order_items = self.attach_windows(node, translated_items, order_items)

        items, visible = self.project_items(translated_items)
        items, extra_names = self.with_extras(items, extras)
        if outer is not None and outer.mode == "group":
            correlated = [exp.EQ(this=col(o), expression=col(n)) for (o, _), n in zip(keys, extra_names)]
        limit = select.args.get("limit")
        if outer is not None and limit is None:
            order_items = []  # the order of a subquery's rows means nothing without a LIMIT
        node = self.project_sort_limit(select, node, items, order_items, order, limit)
        one_row = is_aggregate and group is None and having is None
        return Block(node, visible, tuple(correlated), one_row_per_group=one_row, empty_value=empty_value)

    def select_input(self, select: exp.Select, ctes: dict[str, Block], outer: Outer | None
                     ) -> tuple[Node, dict[str, Relation], set[str], list[exp.Expression]]:
        """A SELECT's rows before grouping: FROM, WHERE and LATERAL VIEWs; with its scope, the columns its
        relations give and the conjuncts correlated with the enclosing query."""
        relations, node = self.build_from(select, ctes)
        scope = {rel.alias.lower(): rel for rel in relations}
        inner_columns = {c for rel in relations for c in rel.node.output}
        laterals = select.args.get("laterals") or []
        after_laterals = self.lateral_conjuncts(select, laterals)
        node, correlated = self.build_where(select, node, scope, ctes, outer, skip=after_laterals)
        if laterals:
            node = self.build_laterals(node, laterals, scope, relations)
            inner_columns |= {c for rel in relations for c in rel.node.output}
            conditions = [self.translate(c, scope) for c in after_laterals]
            node = self.attach_where(node, conditions)
        return node, scope, inner_columns, correlated











    def reads_outer(self, expression: exp.Expression, scope: dict[str, Relation]) -> bool:
        return any(c.table and c.table.lower() not in scope for c in expression.find_all(exp.Column))










    # ---- expressions --------------------------------------------------------------------------------
    def translate(self, expression: exp.Expression, scope: dict[str, Relation],
                  scalars: list[ScalarJoin] | None = None, ctes: dict[str, Block] | None = None,
                  output_aliases: dict[str, exp.Expression] | None = None,
                  condition: bool = False) -> exp.Expression:
        """Qualified columns → internal names. Scalar subqueries are planned into ``scalars`` (the joins the
        caller must attach) and replaced by the column they produce, IN/EXISTS subqueries first rewritten into
        such (``membership``; ``condition``: the expression is a WHERE or HAVING condition); elsewhere a
        subquery is an error. With ``output_aliases``, an unqualified name of an output column stands for that
        column's expression."""
        copied = expression.copy()
        if scalars is not None:
            copied = memberships_as_counts(copied, condition, lambda what, node: self.unsupported(what, node))
        planned: dict[int, exp.Expression] = {}
        for sub in copied.find_all(exp.Subquery, exp.Exists):
            if any(id(a) in planned for a in ancestors(sub)):
                continue
            if isinstance(sub, exp.Subquery) and self.subqueries.is_scalar(sub) and scalars is not None:
                if sub.find_ancestor(exp.AggFunc) is not None:
                    raise self.unsupported("a subquery inside an aggregate function", sub)
                scalar = self.subqueries.scalar(sub, scope, ctes or {})
                scalars.append(scalar)
                planned[id(sub)] = scalar.value
            else:
                raise self.unsupported("a subquery in this position", sub,
                                       hint="subqueries work in WHERE, HAVING and the SELECT list")

        def swap(node: exp.Expression) -> exp.Expression:
            if id(node) in planned:
                return planned[id(node)]
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                if output_aliases and not node.table and node.name in output_aliases:
                    return output_aliases[node.name].copy()
                relation = scope.get(node.table.lower()) if node.table else None
                if relation is None or node.name.lower() not in relation.columns:
                    if node.table and any(node.table.lower() in s for s in self.enclosing):
                        raise self.unsupported(
                            "this reference to an enclosing query's column (correlation works in a subquery's "
                            "WHERE, one level deep)", node)
                    raise BadInputError(f"cannot resolve column {node.sql()!r}",
                                        position=node_position(node, self.sql), source_name=self.source_name)
                return col(relation.columns[node.name.lower()])
            return node

        return copied.transform(swap, copy=False)













def build_plan(statement: exp.Expression, tables: dict[str, TableEntry], sql: str,
               source_name: str | None = None, display_names: list[str] | None = None) -> QueryPlan:
    builder = Builder(tables, sql, source_name)
    block = builder.build_query(statement, {})
    names = display_names if display_names and len(display_names) == len(block.names) else block.names
    return QueryPlan(block.node, tuple(names), dict(builder.column_sources))
