"""The clauses of a SELECT block above its FROM and WHERE (``Builder``'s part for them): GROUP BY and the
Aggregate, HAVING, windows, the projection, ORDER BY and LIMIT."""

from __future__ import annotations

from sqlglot import exp

from aipq.errors import BadInputError
from aipq.planner.blocks import Outer, Relation, SelectParts
from aipq.planner.grouping import expand_group_by
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Limit,
    Node,
    Project,
    Sort,
    SortKey,
    Window,
    col,
    refs,
)
from aipq.planner.resolve import find_word
from aipq.planner.subqueries import (
    empty_group_value,
)


class ClauseBuilder:
    """``Builder``'s steps above FROM and WHERE (a mixin: it reads the builder's names and translation)."""

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

    def aggregate_select(self, select: exp.Select, node: Node, scope: dict[str, Relation], parts: SelectParts,
                         windows: list[exp.Window], outer: Outer | None):
        """A grouping SELECT's Aggregate with its scalar subqueries, HAVING and windows above it; its items,
        order keys and correlation outputs in terms of the aggregate's output, and the value its first item
        takes over no rows (a correlated subquery's, grouped by the enclosing query)."""
        group = select.args.get("group")
        group_exprs, sets = self.group_by(group, select, scope)
        if sets is not None and parts.extras:
            raise self.unsupported("GROUPING SETS, ROLLUP or CUBE in a correlated subquery", group)
        node, substitute = self.build_aggregate(node, group_exprs + parts.extras, [e for _, e in parts.items]
                                                + [e for e, _, _ in parts.order_items]
                                                + ([parts.having] if parts.having is not None else []), sets)
        aggregate_node = node
        node = self.subqueries.attach(node, parts.scalars)
        joined = {c for scalar in parts.scalars for c in scalar.node.output}
        items = [(n, substitute(e, joined)) for n, e in parts.items]
        order_items = [(substitute(e, joined), d, nf) for e, d, nf in parts.order_items]
        extras = [substitute(e) for e in parts.extras]
        if parts.having is not None:
            node = Filter(node, substitute(parts.having, joined))
        if windows:  # over the groups that HAVING kept
            node, items, order_items = self.attach_windows(node, items, order_items)
        empty_value = None
        if outer is not None and outer.mode == "group" and items and isinstance(aggregate_node, Aggregate):
            empty_value = empty_group_value(items[0][1], aggregate_node)
        return node, items, order_items, extras, empty_value

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
            if not any(isinstance(a, (exp.Subquery, exp.Exists)) for a in ancestors(agg)):
                raise BadInputError(f"aggregate function {agg.sql(dialect='hive')} is not allowed in {clause}",
                                    position=self.position(agg), source_name=self.source_name, hint=hint)

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
            for agg in outer_aggregates(expr):
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


def ancestors(node: exp.Expression):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def has_aggregate(expression: exp.Expression) -> bool:
    return any(True for _ in outer_aggregates(expression))


def outer_aggregates(expression: exp.Expression):
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
                yield from outer_aggregates(part)
        return
    for child in expression.iter_expressions():
        yield from outer_aggregates(child)

