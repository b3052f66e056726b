"""FROM and WHERE of a SELECT block into a logical plan (``Builder``'s part for them): scans, CTE references,
derived tables and VALUES, inner joins as an unordered ``JoinBlock`` (ordered later by ``order_joins``), outer and
semi joins in their written order, WHERE's conjuncts as filters or semi/anti joins, LATERAL VIEWs."""

from __future__ import annotations

from sqlglot import exp

from aipq.errors import BadInputError
from aipq.planner.blocks import Block, Outer, Relation
from aipq.planner.logical import (
    Filter,
    Generate,
    Join,
    JoinBlock,
    Node,
    Project,
    Scan,
    Values,
    and_all,
    col,
    conjuncts,
    refs,
)
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key
from aipq.planner.subqueries import (
    is_subquery_predicate,
)


class FromBuilder:
    """``Builder``'s FROM and WHERE steps (a mixin: it reads the builder's names, tables and translation)."""

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
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Func):
            function = source.this.sql(dialect="spark").split("(", 1)[0].lower()
            raise self.unsupported(f"the table-valued function {function}() in FROM", source,
                                   hint="write its rows as VALUES, or read them from a table")
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
