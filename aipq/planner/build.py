"""Qualified sqlglot statement → logical plan.

A SELECT block becomes: its FROM items (scans, CTE references, derived tables), an unordered ``JoinBlock``
when all joins are inner (the join order is chosen later by ``order_joins``), written-order ``Join``s when
outer or semi joins are involved, then Aggregate → Filter (HAVING) → Project → Sort → Limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.errors import BadInputError, UnsupportedSqlError
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    QueryPlan,
    Scan,
    Sort,
    SortKey,
    and_all,
    col,
    conjuncts,
    refs,
)
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key


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
    """A planned query block: its plan and the visible names of its output columns."""

    node: Node
    names: list[str]


@dataclass
class Builder:
    tables: dict[str, TableEntry]
    sql: str
    source_name: str | None = None
    names: NameAllocator = field(default_factory=NameAllocator)
    column_sources: dict[str, str] = field(default_factory=dict)

    # ---- errors -------------------------------------------------------------------------------------
    def unsupported(self, what: str, node: exp.Expression | None = None, hint: str | None = None):
        position = node_position(node, self.sql) if node is not None else None
        if position is None and node is not None:
            inner = next(iter(node.find_all(exp.Column, exp.Identifier)), None)
            position = node_position(inner, self.sql) if inner is not None else None
        return UnsupportedSqlError(f"unsupported SQL: {what}", position=position, source_name=self.source_name,
                                   hint=hint)

    # ---- query blocks -------------------------------------------------------------------------------
    def build_query(self, query: exp.Expression, ctes: dict[str, Block]) -> Block:
        if isinstance(query, exp.Subquery):
            return self.build_query(query.this, ctes)
        if isinstance(query, exp.Select):
            return self.build_select(query, ctes)
        if isinstance(query, exp.SetOperation):
            raise self.unsupported(f"{query.key.upper()} of queries", query)
        raise self.unsupported(f"{query.key.upper()} statement", query)

    def build_select(self, select: exp.Select, outer_ctes: dict[str, Block]) -> Block:
        ctes = dict(outer_ctes)
        with_ = select.args.get("with_") or select.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                if with_.args.get("recursive"):
                    raise self.unsupported("recursive CTE", cte)
                ctes[cte.alias_or_name.lower()] = self.build_query(cte.this, ctes)
        for key in ("windows", "qualify", "offset", "laterals", "pivots", "sort", "cluster", "distribute"):
            if select.args.get(key):
                raise self.unsupported(f"{key.upper()} clause", select.args[key] if isinstance(
                    select.args[key], exp.Expression) else select)
        for window in select.find_all(exp.Window):
            raise self.unsupported("window functions (OVER …)", window)

        relations, node = self.build_from(select, ctes)
        scope = {rel.alias.lower(): rel for rel in relations}
        where = select.args.get("where")
        if where is not None:
            node = self.attach_where(node, [self.translate(c, scope) for c in conjuncts(where.this)])

        select_exprs = list(select.expressions)
        group = select.args.get("group")
        having = select.args.get("having")
        order = select.args.get("order")
        translated_items = [(self.output_name(e), self.translate(e.unalias(), scope)) for e in select_exprs]
        aliases = {name: expr for name, expr in translated_items}

        order_items: list[tuple[exp.Expression, bool, bool | None]] = []
        for ordered in order.expressions if order is not None else []:
            target = ordered.this
            if isinstance(target, exp.Column) and not target.table and target.name in aliases:
                translated = aliases[target.name]
            else:
                translated = self.translate(target, scope)
            order_items.append((translated, bool(ordered.args.get("desc")), ordered.args.get("nulls_first")))

        having_expr = self.translate(having.this, scope) if having is not None else None
        is_aggregate = group is not None or any(
            _has_aggregate(e) for _, e in translated_items) or having_expr is not None
        if is_aggregate:
            group_exprs = [self.translate(g, scope) for g in (group.expressions if group is not None else [])]
            node, substitute = self.build_aggregate(node, group_exprs, [e for _, e in translated_items]
                                                    + [e for e, _, _ in order_items]
                                                    + ([having_expr] if having_expr is not None else []))
            translated_items = [(n, substitute(e)) for n, e in translated_items]
            order_items = [(substitute(e), d, nf) for e, d, nf in order_items]
            if having_expr is not None:
                node = Filter(node, substitute(having_expr))

        items, visible = self.project_items(translated_items)
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
        limit = select.args.get("limit")
        if limit is not None:
            node = Limit(node, self.limit_count(limit))
        if hidden:
            node = Project(node, tuple((n, col(n)) for n, _ in items))
        return Block(node, visible)

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
        if from_ is None:
            raise self.unsupported("SELECT without FROM", select)
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
                conditions += [self.translate(c, scope) for c in conjuncts(join.args.get("on"))]
            if len(relations) == 1:
                return relations, first.node
            return relations, JoinBlock(tuple(r.node for r in relations), tuple(conditions))
        node = first.node
        for join in joins:
            relation = self.relation(join.this, ctes)
            if join.args.get("using"):
                raise self.unsupported("JOIN … USING", join)
            relations.append(relation)
            scope = {rel.alias.lower(): rel for rel in relations}
            on = [self.translate(c, scope) for c in conjuncts(join.args.get("on"))]
            node = self.written_order_join(node, relation.node, _join_kind(join), on)
        return relations, node

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
        raise self.unsupported(f"{source.key.upper()} in FROM", source)

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
    def translate(self, expression: exp.Expression, scope: dict[str, Relation]) -> exp.Expression:
        """Qualified columns → internal names."""
        for sub in expression.find_all(exp.Subquery, exp.Exists):
            raise self.unsupported("subqueries inside expressions (IN/EXISTS/scalar subqueries)", sub,
                                   hint="rewrite the subquery as a join for now")

        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                relation = scope.get(node.table.lower()) if node.table else None
                if relation is None or node.name.lower() not in relation.columns:
                    raise BadInputError(f"cannot resolve column {node.sql()!r}",
                                        position=node_position(node, self.sql), source_name=self.source_name)
                return col(relation.columns[node.name.lower()])
            return node

        return expression.copy().transform(swap)

    def build_aggregate(self, child: Node, group_exprs: list[exp.Expression], used: list[exp.Expression]):
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
                if agg.sql() not in agg_by_text:
                    name = self.names.allocate("_agg")
                    aggregates.append((name, agg))
                    agg_by_text[agg.sql()] = name
        node = Aggregate(child, tuple(groups), tuple(aggregates))
        available = set(node.output)

        def substitute(expr: exp.Expression) -> exp.Expression:
            def swap(sub: exp.Expression) -> exp.Expression:
                text = sub.sql()
                if isinstance(sub, exp.AggFunc) and text in agg_by_text:
                    return col(agg_by_text[text])
                if not isinstance(sub, (exp.Column, exp.Identifier)) and text in group_by_text:
                    return col(group_by_text[text])
                return sub

            result = expr.copy().transform(swap)
            loose = refs(result) - available
            if loose:
                raise BadInputError(
                    f"column {self.column_sources.get(sorted(loose)[0], sorted(loose)[0])!r} must appear in "
                    "GROUP BY or inside an aggregate function", source_name=self.source_name)
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


def _has_aggregate(expression: exp.Expression) -> bool:
    return any(True for _ in _outer_aggregates(expression))


def _outer_aggregates(expression: exp.Expression):
    """Aggregate calls not nested in another aggregate."""
    if isinstance(expression, exp.AggFunc):
        yield expression
        return
    for child in expression.iter_expressions():
        yield from _outer_aggregates(child)


def build_plan(statement: exp.Expression, tables: dict[str, TableEntry], sql: str,
               source_name: str | None = None, display_names: list[str] | None = None) -> QueryPlan:
    builder = Builder(tables, sql, source_name)
    block = builder.build_query(statement, {})
    names = display_names if display_names and len(display_names) == len(block.names) else block.names
    return QueryPlan(block.node, tuple(names), dict(builder.column_sources))
