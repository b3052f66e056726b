"""Parenthesized joins (``customer c LEFT JOIN (orders o JOIN lineitem l ON …) ON …``, standard SQL that Spark runs)
written as derived tables, which the rest of the planner knows: the inner join becomes ``(SELECT o.a AS a, l.b AS
b, … FROM orders o JOIN lineitem l ON …) AS _pj1``, and the enclosing query's references to ``o`` and ``l`` read
its columns. The rows are the same: the parentheses only say which join is done first, and a derived table says
the same. A column name that two of the inner tables share is renamed ``alias_name`` inside it (Spark would call
an unqualified use of it ambiguous anyway); ``o.*`` lists ``o``'s columns.

Runs after the catalog lookup (the tables' columns are known) and before sqlglot's qualify, which does not know
this shape."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.planner.resolve import qualified_key

_PREFIX = "_pj"


def unnest_parenthesized_joins(statement: exp.Expression, tables: dict[str, TableEntry]) -> exp.Expression:
    """The statement with every parenthesized join a derived table (the statement itself when it has none)."""
    if not any(_parenthesized(node) for node in statement.find_all(exp.Subquery)):
        return statement
    statement = statement.copy()
    names = (f"{_PREFIX}{n}" for n in itertools.count(1))
    for select in list(statement.find_all(exp.Select)):
        _unnest_in(select, tables, names)
    return statement


def _parenthesized(node: exp.Expression) -> bool:
    return isinstance(node, exp.Subquery) and isinstance(node.this, (exp.Table, exp.Subquery)) \
        and bool(node.this.args.get("joins"))


def _sources(select: exp.Select) -> list[exp.Expression]:
    found = select.args.get("from_") or select.args.get("from")
    first = [found.this] if found is not None else []
    return first + [join.this for join in select.args.get("joins") or []]


# per alias of a table inside a derived table: (the derived table's alias, the table's column → the derived table's)
Hidden = dict[str, tuple[str, dict[str, str]]]


def _unnest_in(select: exp.Select, tables: dict[str, TableEntry], names: Iterator[str]) -> Hidden:
    """Each parenthesized join among ``select``'s sources made a derived table, and ``select``'s references to
    the tables inside it (nested ones too) made references to its columns. Where those tables now are, for the
    enclosing level."""
    hidden: Hidden = {}
    for source in _sources(select):
        if not _parenthesized(source):
            continue
        inner = source.this.copy()
        joins = inner.args.get("joins") or []
        inner.set("joins", None)
        derived_select = exp.Select().from_(inner)
        derived_select.set("joins", joins)
        deeper = _unnest_in(derived_select, tables, names)
        renamed = _project(derived_select, tables)
        name = source.alias or next(names)
        source.replace(exp.Subquery(this=derived_select, alias=exp.TableAlias(this=exp.to_identifier(name))))
        if renamed is None:
            continue
        for alias, (within, columns) in deeper.items():  # a table inside a derived table inside this one
            if within in renamed:
                renamed[alias] = {column: renamed[within][inner_name] for column, inner_name in columns.items()
                                  if inner_name in renamed[within]}
        _point_at(select, name, renamed)
        hidden.update({alias: (name, columns) for alias, columns in renamed.items()})
    return hidden


def _columns(source: exp.Expression, tables: dict[str, TableEntry]) -> list[str] | None:
    """The column names of a join's source, when known before qualify."""
    if isinstance(source, exp.Table):
        entry = tables.get(qualified_key(source))
        return [name for name, _ in entry.columns] if entry is not None else None
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        outputs = source.this.expressions
        if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in outputs):
            return None
        return [e.alias_or_name.lower() for e in outputs]
    return None


def _project(select: exp.Select, tables: dict[str, TableEntry]) -> dict[str, dict[str, str]] | None:
    """Give the derived table's SELECT its columns: each source's, under a name unique among them. Per source
    alias, its column → the derived table's name for it (None when a source's columns are not known: then the
    SELECT is ``*`` and names stay as they are)."""
    columns = {}
    for source in _sources(select):
        known = _columns(source, tables)
        if known is None:
            select.select(exp.Star(), copy=False)
            return None
        columns[source.alias_or_name.lower()] = known
    counts: dict[str, int] = {}
    for known in columns.values():
        for column in known:
            counts[column] = counts.get(column, 0) + 1
    renamed: dict[str, dict[str, str]] = {}
    used: set[str] = set()
    for alias, known in columns.items():
        renamed[alias] = {}
        for column in known:
            name = column if counts[column] == 1 else f"{alias}_{column}"
            while name in used:
                name += "_"
            used.add(name)
            renamed[alias][column] = name
            select.select(exp.alias_(exp.column(column, table=alias), name), copy=False)
    return renamed


def _point_at(select: exp.Select, name: str, renamed: dict[str, dict[str, str]]) -> None:
    """``select``'s references to the tables now inside derived table ``name`` made references to its columns;
    ``alias.*`` becomes the list of that table's columns."""
    expanded = []
    for item in select.expressions:
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and item.table.lower() in renamed:
            expanded.extend(exp.alias_(exp.column(new, table=name), old)
                            for old, new in renamed[item.table.lower()].items())
        else:
            expanded.append(item)
    select.set("expressions", expanded)
    for column in list(select.find_all(exp.Column)):
        alias = column.table.lower()
        if alias not in renamed or isinstance(column.this, exp.Star) or not _in_scope(column, select, alias):
            continue
        new = renamed[alias].get(column.name.lower())
        if new is not None:
            column.set("table", exp.to_identifier(name))
            column.set("this", exp.to_identifier(new))


def _in_scope(column: exp.Column, select: exp.Select, alias: str) -> bool:
    """Whether ``column`` names ``select``'s table ``alias``: not inside a derived table made here, and not in a
    subquery that has a table of the same alias of its own."""
    node = column.parent
    while node is not None and node is not select:
        if isinstance(node, exp.Subquery) and node.alias_or_name.startswith(_PREFIX):
            return False
        if isinstance(node, exp.Select) and any(s.alias_or_name.lower() == alias for s in _sources(node)):
            return False
        node = node.parent
    return node is select
