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
from aipq.planner.grouping import expand_group_by
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Generate,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    QueryPlan,
    Scan,
    Sort,
    SortKey,
    Union,
    Values,
    Window,
    and_all,
    col,
    conjuncts,
    refs,
)
from aipq.planner.membership import memberships_as_counts
from aipq.planner.parse import node_position
from aipq.planner.resolve import find_word, qualified_key
from aipq.planner.subqueries import (
    ScalarJoin,
    SubqueryPlanner,
    correlation_keys,
    empty_group_value,
    is_subquery_predicate,
)


class NameAllocator:
    """Hands out query-wide unique internal column names, preferring the readable one."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def allocate(self, preferred: str, qualifier: str | None = None) -> str:
        base = preferred.lower()
        candidates = [base] + ([f"{qualifier.lower()}_{base}"] if qualifier else [])
        for candidate in candidates:
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
        n = 2
        while f"{candidates[-1]}_{n}" in self.used:
            n += 1
        name = f"{candidates[-1]}_{n}"
        self.used.add(name)
        return name


@dataclass
class Relation:
    """A FROM item in scope: its alias, plan and visible column name → internal name."""

    alias: str
    node: Node
    columns: dict[str, str]


@dataclass
class Block:
    """A planned query block: its plan and the visible names of its output columns.

    A correlated subquery's block also carries its correlation conditions, over its output columns (which
    then include the inner columns they read, after the visible ones) and the enclosing query's columns.
    """

    node: Node
    names: list[str]
    correlated: tuple[exp.Expression, ...] = ()
    one_row_per_group: bool = False  # an aggregate without GROUP BY/HAVING (per correlation key, if any)
    empty_value: exp.Expression | None = None  # its value over no rows, when that is not NULL (COUNT)


@dataclass(frozen=True)
class Outer:
    """The query enclosing a subquery: its FROM scope, and how the subquery's correlations are planned —
    ``filter`` (EXISTS/IN: inner columns exposed for the join) or ``group`` (scalar: grouped by them)."""

    scope: dict[str, Relation]
    mode: Literal["filter", "group"]


@dataclass
class Builder:
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

    def order_and_limit(self, node: Node, query: exp.Expression, names: tuple[str, ...],
                        visible: list[str]) -> Node:
        """ORDER BY/LIMIT after a set operation, by output name or position."""
        order = query.args.get("order")
        if order is not None:
            keys = []
            lowered = [v.lower() for v in visible]
            for ordered in order.expressions:
                target = ordered.this
                if isinstance(target, exp.Literal) and target.is_int and 1 <= int(target.this) <= len(names):
                    name = names[int(target.this) - 1]
                elif isinstance(target, exp.Column) and target.name.lower() in lowered:
                    name = names[lowered.index(target.name.lower())]
                else:
                    raise self.unsupported("ORDER BY after a set operation on anything but an output column",
                                           target, hint="order by a column name or position of the result")
                keys.append(SortKey(name, bool(ordered.args.get("desc")), ordered.args.get("nulls_first")))
            node = Sort(node, tuple(keys))
        limit = query.args.get("limit")
        if limit is not None:
            node = Limit(node, self.limit_count(limit))
        return node

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

        select_exprs = list(select.expressions)
        group = select.args.get("group")
        having = select.args.get("having")
        order = select.args.get("order") or select.args.get("sort") or select.args.get("cluster")
        item_scalars: list[ScalarJoin] = []
        translated_items = [(self.output_name(e), self.translate(e.unalias(), scope, item_scalars, ctes))
                            for e in select_exprs]
        aliases = {name: expr for name, expr in translated_items}

        order_items = self.order_items(order, aliases, scope)

        having_scalars: list[ScalarJoin] = []
        having_expr = self.translate(having.this, scope, having_scalars, ctes, condition=True) \
            if having is not None else None
        is_aggregate = group is not None or any(
            _has_aggregate(e) for _, e in translated_items) or having_expr is not None

        extras, keys = self.correlation_outputs(select, outer, correlated, inner_columns, is_aggregate)

        empty_value = None
        if is_aggregate:
            group_exprs, sets = self.group_by(group, select, scope)
            if sets is not None and extras:
                raise self.unsupported("GROUPING SETS, ROLLUP or CUBE in a correlated subquery", group)
            node, substitute = self.build_aggregate(node, group_exprs + extras, [e for _, e in translated_items]
                                                    + [e for e, _, _ in order_items]
                                                    + ([having_expr] if having_expr is not None else []), sets)
            aggregate_node = node
            attached = item_scalars + having_scalars
            node = self.subqueries.attach(node, attached)
            joined = {c for scalar in attached for c in scalar.node.output}
            translated_items = [(n, substitute(e, joined)) for n, e in translated_items]
            order_items = [(substitute(e, joined), d, nf) for e, d, nf in order_items]
            extras = [substitute(e) for e in extras]
            if having_expr is not None:
                node = Filter(node, substitute(having_expr, joined))
            if windows:  # over the groups that HAVING kept
                node, translated_items, order_items = self.attach_windows(node, translated_items, order_items)
            if outer is not None and outer.mode == "group" and translated_items and isinstance(
                    aggregate_node, Aggregate):
                empty_value = empty_group_value(translated_items[0][1], aggregate_node)
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

    def build_where(self, select: exp.Select, node: Node, scope: dict[str, Relation], ctes: dict[str, Block],
                    outer: Outer | None, skip: list[exp.Expression] = ()) -> tuple[Node, list[exp.Expression]]:
        """WHERE: local conjuncts filter ``node``, IN/EXISTS conjuncts become semi/anti joins, and conjuncts that
        read an enclosing query's columns are returned (the correlation the enclosing query joins on). Those in
        ``skip`` (reading LATERAL VIEW columns) are applied by the caller, above the laterals."""
        where = select.args.get("where")
        local, correlated, with_subqueries = [], [], []
        skipped = {id(part) for part in skip}
        for part in conjuncts(where.this) if where is not None else []:
            if id(part) in skipped:
                continue
            self.refuse_aggregate(part, "WHERE", hint="filter on aggregates with HAVING")
            if is_subquery_predicate(part):
                with_subqueries.append(part)
            elif outer is not None and self.reads_outer(part, scope):
                correlated.append(self.translate(part, {**outer.scope, **scope}))
            else:
                local.append(self.translate(part, scope))
        node = self.attach_where(node, local)
        for part in with_subqueries:
            node = self.subqueries.apply_conjunct(node, part, scope, ctes)
        return node, correlated

    def lateral_conjuncts(self, select: exp.Select, laterals: list[exp.Expression]) -> list[exp.Expression]:
        """The WHERE conjuncts that read a LATERAL VIEW's columns: they filter above the laterals, the rest
        (join conditions among the FROM's tables included) below them."""
        aliases = {lateral.alias_or_name.lower() for lateral in laterals}
        if not aliases:
            return []
        where = select.args.get("where")
        found = [part for part in (conjuncts(where.this) if where is not None else [])
                 if any(c.table.lower() in aliases for c in part.find_all(exp.Column))]
        for part in found:
            if is_subquery_predicate(part) or part.find(exp.Subquery) is not None:
                raise self.unsupported("a subquery in a condition on LATERAL VIEW columns", part)
        return found

    def build_laterals(self, node: Node, laterals: list[exp.Expression], scope: dict[str, Relation],
                       relations: list[Relation]) -> Node:
        """LATERAL VIEW [OUTER] udtf(…) alias AS col, …: a Generate per view, in order (a later view may read an
        earlier one's columns); each alias joins the scope."""
        for lateral in laterals:
            generator, alias = lateral.this, lateral.args.get("alias")
            if not isinstance(lateral, exp.Lateral) or not lateral.args.get("view") or alias is None:
                raise self.unsupported("LATERAL other than LATERAL VIEW udtf(…) alias AS columns", lateral)
            if generator.find(exp.Subquery, exp.AggFunc, exp.Window) is not None:
                raise self.unsupported("a subquery, aggregate or window in a LATERAL VIEW", generator)
            visible = [c.name for c in alias.columns]
            if not visible:
                raise BadInputError("a LATERAL VIEW needs its column names", position=node_position(
                    lateral, self.sql), source_name=self.source_name, hint="write … LATERAL VIEW explode(x) t AS x")
            translated = self.translate(generator, scope)
            names, mapping = [], {}
            for column in visible:
                internal = self.names.allocate(column, qualifier=alias.name)
                self.column_sources[internal] = f"{alias.name}.{column}"
                names.append(internal)
                mapping[column.lower()] = internal
            node = Generate(node, translated, tuple(names), bool(lateral.args.get("outer")))
            relation = Relation(alias.name, node, mapping)
            relations.append(relation)
            scope[alias.name.lower()] = relation
        return node

    def order_items(self, order: exp.Expression | None, aliases: dict[str, exp.Expression],
                    scope: dict[str, Relation]) -> list[tuple[exp.Expression, bool, bool | None]]:
        """ORDER BY (SORT BY, CLUSTER BY): (expression, descending, nulls first) per key; a name of an output
        column stands for its expression, also inside an expression (ORDER BY upper(name))."""
        items: list[tuple[exp.Expression, bool, bool | None]] = []
        for ordered in order.expressions if order is not None else []:
            target = ordered.this
            if isinstance(target, exp.Column) and not target.table and target.name in aliases:
                translated = aliases[target.name]
            else:
                translated = self.translate(target, scope, output_aliases=aliases)
            items.append((translated, bool(ordered.args.get("desc")), ordered.args.get("nulls_first")))
        return items

    def project_sort_limit(self, select: exp.Select, node: Node, items: list[tuple[str, exp.Expression]],
                           order_items: list[tuple[exp.Expression, bool, bool | None]],
                           order: exp.Expression | None, limit: exp.Expression | None) -> Node:
        """The SELECT list (with DISTINCT), then ORDER BY and LIMIT; a sort key not in the SELECT list is
        computed as a hidden column and projected away after the sort."""
        hidden: list[tuple[str, exp.Expression]] = []
        sort_keys: list[SortKey] = []
        by_text = {e.sql(): n for n, e in items}
        for expr, desc, nulls_first in order_items:
            name = by_text.get(expr.sql())
            if name is None:
                name = self.names.allocate("_order")
                hidden.append((name, expr))
                by_text[expr.sql()] = name
            sort_keys.append(SortKey(name, descending=desc, nulls_first=nulls_first))
        node = Project(node, tuple(items + hidden))
        if select.args.get("distinct") is not None:
            if hidden:
                raise self.unsupported("ORDER BY an expression not in the SELECT list of a SELECT DISTINCT", order)
            node = Aggregate(node, tuple((n, col(n)) for n, _ in items), ())
        if sort_keys:
            node = Sort(node, tuple(sort_keys))
        if limit is not None:
            node = Limit(node, self.limit_count(limit))
        if hidden:
            node = Project(node, tuple((n, col(n)) for n, _ in items))
        return node

    def check_windows(self, select: exp.Select, windows: list[exp.Window], outer: Outer | None) -> None:
        """Window functions as Hive runs them: in the SELECT list (ORDER BY may name them by alias), over the
        query's rows or, with GROUP BY or aggregates, over its groups; the rest is refused clearly rather than
        planned wrongly."""
        in_list = {id(n) for e in select.expressions for n in e.walk()}
        for window in windows:
            if id(window) not in in_list:
                raise self.unsupported("a window function outside the SELECT list", window,
                                       hint="compute it in the SELECT list of a subquery and refer to its alias")
            if window.find(exp.Subquery, exp.Exists) is not None:
                raise self.unsupported("a subquery inside a window function", window,
                                       hint="join the subquery's result first, then apply the window")
            if outer is not None:
                raise self.unsupported("window functions in a correlated subquery", window)

    def attach_windows(self, node: Node, items: list[tuple[str, exp.Expression]],
                       order_items: list[tuple[exp.Expression, bool, bool | None]]):
        """A Window node computing each distinct window expression once, which the SELECT list and ORDER BY
        then read as a column."""
        computed: dict[str, tuple[str, exp.Window]] = {}

        def lift(expression: exp.Expression, alias: str | None = None) -> exp.Expression:
            expression = expression.copy()

            def swap(sub: exp.Expression) -> exp.Expression:
                if isinstance(sub, exp.Window):
                    text = sub.sql()
                    if text not in computed:
                        # named after the item it is, so that explain shows `rn`, not `_window`
                        preferred = alias if alias and sub is expression and alias.isidentifier() else "_window"
                        computed[text] = (self.names.allocate(preferred), sub)
                    return col(computed[text][0])
                return sub

            return expression.transform(swap, copy=False)

        items = [(name, lift(e, name)) for name, e in items]
        order_items = [(lift(e), desc, nulls_first) for e, desc, nulls_first in order_items]
        return Window(node, tuple(computed.values())), items, order_items

    def group_by(self, group: exp.Group | None, select: exp.Select, scope: dict[str, Relation]
                 ) -> tuple[list[exp.Expression], list[list[exp.Expression]] | None]:
        """GROUP BY's expressions, translated, and its grouping sets over them (None for a plain GROUP BY)."""
        if group is not None and group.args.get("totals"):
            raise self.unsupported("WITH TOTALS", group)
        written, written_sets = expand_group_by(group)
        for expression in written:
            self.refuse_aggregate(expression, "GROUP BY")
        translated = {e.sql(): self.translate(e, scope) for e in written}
        if written_sets is None:
            marker = next(iter(select.find_all(exp.Grouping, exp.GroupingId)), None)
            if marker is not None:
                raise BadInputError("grouping() and grouping_id() need GROUP BY ROLLUP, CUBE or GROUPING SETS",
                                    position=self.position(marker), source_name=self.source_name,
                                    hint="it tells which group columns a grouping set left out; a plain GROUP BY "
                                         "leaves out none")
            return list(translated.values()), None
        return list(translated.values()), [[translated[e.sql()] for e in chosen] for chosen in written_sets]

    def refuse_aggregate(self, expression: exp.Expression | None, clause: str, hint: str | None = None) -> None:
        """Aggregates belong in the SELECT list, HAVING and ORDER BY only (a subquery has its own)."""
        if expression is None:
            return
        for agg in expression.find_all(exp.AggFunc):
            if not any(isinstance(a, (exp.Subquery, exp.Exists)) for a in _ancestors(agg)):
                raise BadInputError(f"aggregate function {agg.sql(dialect='hive')} is not allowed in {clause}",
                                    position=self.position(agg), source_name=self.source_name, hint=hint)

    def reads_outer(self, expression: exp.Expression, scope: dict[str, Relation]) -> bool:
        return any(c.table and c.table.lower() not in scope for c in expression.find_all(exp.Column))

    def limit_count(self, limit: exp.Expression) -> int:
        value = limit.expression if isinstance(limit, exp.Limit) else limit
        if isinstance(value, exp.Literal) and value.is_int:
            return int(value.this)
        raise self.unsupported("LIMIT that is not a whole number", limit)

    def output_name(self, expression: exp.Expression) -> str:
        if isinstance(expression, exp.Alias):
            return expression.alias
        if isinstance(expression, exp.Column):
            return expression.name
        return expression.sql(dialect="spark")

    def project_items(self, items: list[tuple[str, exp.Expression]]):
        """Project items named by internal names; a plain column keeps its name unless already projected."""
        result: list[tuple[str, exp.Expression]] = []
        used: set[str] = set()
        for visible, expr in items:
            if isinstance(expr, exp.Column) and expr.name not in used:
                name = expr.name
            else:
                name = self.names.allocate(visible if visible.isidentifier() else "_expr")
            used.add(name)
            result.append((name, expr))
        return result, [visible for visible, _ in items]

    # ---- FROM ---------------------------------------------------------------------------------------
    def build_from(self, select: exp.Select, ctes: dict[str, Block]) -> tuple[list[Relation], Node]:
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:  # one row of no columns, as Hive and Spark read SELECT 1
            if select.args.get("joins"):
                raise self.unsupported("JOIN without FROM", select)
            return [], Values((), ((),))
        first = self.relation(from_.this, ctes)
        relations = [first]
        joins = select.args.get("joins") or []
        if all(_join_kind(j) in ("inner", "cross") for j in joins):
            conditions: list[exp.Expression] = []
            for join in joins:
                relations.append(self.relation(join.this, ctes))
                if join.args.get("using"):
                    raise self.unsupported("JOIN … USING", join)
            scope = {rel.alias.lower(): rel for rel in relations}
            for join in joins:
                self.refuse_aggregate(join.args.get("on"), "JOIN … ON")
                conditions += [self.translate(c, scope) for c in conjuncts(join.args.get("on"))]
            if len(relations) == 1:
                return relations, first.node
            return relations, JoinBlock(tuple(r.node for r in relations), tuple(conditions))
        # Outer joins in the order written; the inner and comma joins between them form join blocks (so that
        # ``a LEFT JOIN b ON …, c, d WHERE …`` joins c and d on the WHERE's conditions, TPC-DS Q40 and Q49).
        members, conditions = [first.node], []
        for join in joins:
            relation = self.relation(join.this, ctes)
            if join.args.get("using"):
                raise self.unsupported("JOIN … USING", join)
            relations.append(relation)
            scope = {rel.alias.lower(): rel for rel in relations}
            self.refuse_aggregate(join.args.get("on"), "JOIN … ON")
            on = [self.translate(c, scope) for c in conjuncts(join.args.get("on"))]
            kind = _join_kind(join)
            if kind in ("inner", "cross"):
                members.append(relation.node)
                conditions += on
                continue
            block = members[0] if len(members) == 1 else JoinBlock(tuple(members), tuple(conditions))
            members, conditions = [self.written_order_join(block, relation.node, kind, on)], []
        return relations, members[0] if len(members) == 1 else JoinBlock(tuple(members), tuple(conditions))

    def written_order_join(self, left: Node, right: Node, kind: str, on: list[exp.Expression]) -> Node:
        left_cols, right_cols = set(left.output), set(right.output)
        left_keys, right_keys, residual = [], [], []
        for condition in on:
            pair = _equi_pair(condition, left_cols, right_cols)
            if pair is not None:
                left_keys.append(pair[0])
                right_keys.append(pair[1])
            elif kind in ("left", "semi", "anti") and refs(condition) and refs(condition) <= right_cols:
                # Rows of the right input failing an ON condition can never match: filtering them first
                # keeps the result the same for LEFT/SEMI/ANTI joins.
                right = Filter(right, condition)
            elif kind == "right" and refs(condition) and refs(condition) <= left_cols:
                left = Filter(left, condition)
            else:
                residual.append(condition)
        return Join(left, right, kind, tuple(left_keys), tuple(right_keys), and_all(residual))

    def relation(self, source: exp.Expression, ctes: dict[str, Block]) -> Relation:
        alias = source.alias_or_name
        if isinstance(source, exp.Table):
            if not source.db and source.name.lower() in ctes:
                block = ctes[source.name.lower()]
                return self.reference(alias, block)
            entry = self.tables[qualified_key(source)]
            columns = []
            mapping = {}
            for column, _ in entry.columns:
                internal = self.names.allocate(column, qualifier=alias)
                self.column_sources[internal] = f"{alias}.{column}"
                columns.append((internal, column))
                mapping[column.lower()] = internal
            return Relation(alias, Scan(entry, alias, tuple(columns)), mapping)
        if isinstance(source, exp.Subquery):
            block = self.build_query(source.this, ctes)
            return Relation(alias, block.node, dict(zip([n.lower() for n in block.names], block.node.output)))
        if isinstance(source, exp.Values):
            return self.values(source, alias)
        raise self.unsupported(f"{source.key.upper()} in FROM", source)

    def values(self, source: exp.Values, alias: str) -> Relation:
        """VALUES (…), (…) AS t(a, b): literal rows, each of as many constants as the alias names columns."""
        table_alias = source.args.get("alias")
        visible = [c.name for c in table_alias.columns] if table_alias is not None else []
        rows = []
        for row in source.expressions:
            items = tuple(row.expressions) if isinstance(row, exp.Tuple) else (row,)
            if not visible:
                visible = [f"col{i + 1}" for i in range(len(items))]  # Spark's names for unnamed VALUES columns
            if len(items) != len(visible):
                raise BadInputError(f"a VALUES row has {len(items)} value(s) where {len(visible)} are named",
                                    position=node_position(row, self.sql) or node_position(items[0], self.sql),
                                    source_name=self.source_name,
                                    hint="give every row the same number of values")
            for item in items:
                if item.find(exp.Column, exp.Subquery, exp.AggFunc) is not None:
                    raise self.unsupported("a VALUES row with columns, subqueries or aggregates", item)
            rows.append(tuple(item.copy() for item in items))
        names, mapping = [], {}
        for column in visible:
            internal = self.names.allocate(column, qualifier=alias)
            self.column_sources[internal] = f"{alias}.{column}"
            names.append(internal)
            mapping[column.lower()] = internal
        return Relation(alias, Values(tuple(names), tuple(rows)), mapping)

    def reference(self, alias: str, block: Block) -> Relation:
        """A CTE read: fresh names over the shared plan, so two reads of one CTE can be joined."""
        items = []
        mapping = {}
        for visible, internal in zip(block.names, block.node.output):
            fresh = self.names.allocate(visible, qualifier=alias)
            self.column_sources[fresh] = f"{alias}.{visible}"
            items.append((fresh, col(internal)))
            mapping[visible.lower()] = fresh
        return Relation(alias, Project(block.node, tuple(items)), mapping)

    def attach_where(self, node: Node, where: list[exp.Expression]) -> Node:
        if isinstance(node, JoinBlock):
            return JoinBlock(node.relations, node.conditions + tuple(where))
        condition = and_all(where)
        return Filter(node, condition) if condition is not None else node

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
            if any(id(a) in planned for a in _ancestors(sub)):
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

    def build_aggregate(self, child: Node, group_exprs: list[exp.Expression], used: list[exp.Expression],
                        sets: list[list[exp.Expression]] | None = None):
        groups: list[tuple[str, exp.Expression]] = []
        group_by_text: dict[str, str] = {}
        for expr in group_exprs:
            if expr.sql() in group_by_text:
                continue
            name = expr.name if isinstance(expr, exp.Column) else self.names.allocate("_group")
            groups.append((name, expr))
            group_by_text[expr.sql()] = name
        aggregates: list[tuple[str, exp.Expression]] = []
        agg_by_text: dict[str, str] = {}
        for expr in used:
            for agg in _outer_aggregates(expr):
                nested = next((a for a in agg.find_all(exp.AggFunc) if a is not agg), None)
                if nested is not None:
                    raise BadInputError(f"aggregate function {nested.sql(dialect='hive')} inside another aggregate",
                                        source_name=self.source_name,
                                        position=find_word(self.sql, type(nested).__name__.lower())
                                        or find_word(self.sql, nested.sql_name().lower()),
                                        hint="aggregate in a subquery first, then aggregate its result")
                if agg.sql() not in agg_by_text:
                    name = self.names.allocate("_agg")
                    aggregates.append((name, agg))
                    agg_by_text[agg.sql()] = name
        grouping_sets = None
        if sets is not None:
            grouping_sets = tuple(tuple(dict.fromkeys(group_by_text[e.sql()] for e in chosen)) for chosen in sets)
            if len(grouping_sets) == 1 and set(grouping_sets[0]) == {n for n, _ in groups}:
                grouping_sets = None  # one set of every group column: a plain GROUP BY
        node = Aggregate(child, tuple(groups), tuple(aggregates), grouping_sets)
        available = set(node.output)

        def substitute(expr: exp.Expression, joined: set[str] = frozenset()) -> exp.Expression:
            def swap(sub: exp.Expression) -> exp.Expression:
                text = sub.sql()
                windowed = sub.arg_key == "this" and isinstance(sub.parent, exp.Window)
                if isinstance(sub, exp.AggFunc) and text in agg_by_text and not windowed:
                    return col(agg_by_text[text])
                if not isinstance(sub, (exp.Column, exp.Identifier)) and text in group_by_text:
                    return col(group_by_text[text])
                return sub

            result = expr.copy().transform(swap)
            loose = refs(result) - available - joined
            if loose:
                column = self.column_sources.get(sorted(loose)[0], sorted(loose)[0])
                raise BadInputError(f"column {column!r} must appear in GROUP BY or inside an aggregate function",
                                    source_name=self.source_name, position=find_word(self.sql, column.split(".")[-1]),
                                    hint="add it to GROUP BY, or aggregate it (max, min, any_value, …)")
            return result

        return node, substitute


def _join_kind(join: exp.Join) -> str:
    side = (join.side or "").lower()
    kind = (join.kind or "").lower()
    if kind in ("semi", "anti"):
        return kind
    if kind == "cross":
        return "cross"
    if side in ("left", "right", "full"):
        return side
    return "inner"


def _equi_pair(condition: exp.Expression, left: set[str], right: set[str]) -> tuple[str, str] | None:
    if not isinstance(condition, exp.EQ):
        return None
    a, b = condition.this, condition.expression
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
        return None
    if a.name in left and b.name in right:
        return a.name, b.name
    if b.name in left and a.name in right:
        return b.name, a.name
    return None


def _ancestors(node: exp.Expression):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _has_aggregate(expression: exp.Expression) -> bool:
    return any(True for _ in _outer_aggregates(expression))


def _outer_aggregates(expression: exp.Expression):
    """Aggregate calls not nested in another aggregate."""
    if isinstance(expression, exp.AggFunc):
        yield expression
        return
    if isinstance(expression, exp.Window):
        # a windowed aggregate (``sum(x) OVER …``) is computed per row, not per group; what it and the window's
        # PARTITION BY and ORDER BY hold may still be a group's aggregate (``rank() OVER (ORDER BY sum(x))``)
        for child in expression.iter_expressions():
            inside = child.iter_expressions() if child is expression.this and isinstance(
                child, exp.AggFunc) else [child]
            for part in inside:
                yield from _outer_aggregates(part)
        return
    for child in expression.iter_expressions():
        yield from _outer_aggregates(child)


def build_plan(statement: exp.Expression, tables: dict[str, TableEntry], sql: str,
               source_name: str | None = None, display_names: list[str] | None = None) -> QueryPlan:
    builder = Builder(tables, sql, source_name)
    block = builder.build_query(statement, {})
    names = display_names if display_names and len(display_names) == len(block.names) else block.names
    return QueryPlan(block.node, tuple(names), dict(builder.column_sources))
