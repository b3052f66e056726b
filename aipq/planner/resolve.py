"""Resolve names against the catalog and normalize: sqlglot's qualify, then the rewrites of ``normalize`` (those
of canonicalize and simplify that keep Spark's semantics).

After this pass every column is ``alias.column``, stars are expanded, string literals compared with dates are
cast, and constant date arithmetic is folded (``date '1998-12-01' - interval '90' day`` becomes a literal).
Unknown tables and columns become errors that name the closest known names.
"""

from __future__ import annotations

import difflib
import re

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from aipq.catalog import Catalog, TableEntry, split_name
from aipq.errors import BadInputError, SourcePosition, UnknownNameError, UnsupportedSqlError
from aipq.planner.normalize import canonicalize, factor_common_conjuncts, simplify
from aipq.planner.parse import node_position, offset_position


def referenced_tables(statement: exp.Expression) -> list[exp.Table]:
    """Tables read by the statement that are not CTE names."""
    cte_names = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    return [t for t in statement.find_all(exp.Table)
            if t.name and not (not t.db and t.name.lower() in cte_names)]


def table_name(table: exp.Table) -> str:
    return f"{table.db}.{table.name}" if table.db else table.name


def qualified_key(table: exp.Table) -> str:
    """``database.name`` of a table reference, with the default database filled in."""
    return ".".join(split_name(table_name(table)))


def lookup_tables(statement: exp.Expression, catalog: Catalog, sql: str,
                  source_name: str | None) -> dict[str, TableEntry]:
    """Catalog entries for every table the statement reads, keyed by ``database.name``."""
    refuse_self_reference(statement, sql, source_name)
    found: dict[str, TableEntry] = {}
    for table in referenced_tables(statement):
        key = qualified_key(table)
        if key in found:
            continue
        entry = catalog.lookup(key)
        if entry is None:
            raise _unknown_table(table, catalog, sql, source_name)
        if entry.unreadable:
            raise BadInputError(f"cannot read table {entry.qualified_name}: {entry.unreadable}",
                                position=node_position(table.this, sql), source_name=source_name,
                                hint="put the SerDe's jar on the session's classpath (--conf spark.jars=…), or read "
                                     "a copy of the table in a format Spark reads")
        found[key] = entry
    return found


def refuse_self_reference(statement: exp.Expression, sql: str, source_name: str | None) -> None:
    """``WITH x AS (SELECT … FROM x)``: a CTE that reads itself would need recursion, which aipq does not run."""
    for cte in statement.find_all(exp.CTE):
        name = cte.alias_or_name.lower()
        for table in cte.this.find_all(exp.Table):
            if not table.db and table.name.lower() == name:
                raise UnsupportedSqlError(f"WITH {cte.alias_or_name} reads itself (a recursive CTE)",
                                          position=node_position(table.this, sql), source_name=source_name,
                                          hint="give the CTE another name than the table it reads")


def _unknown_table(table: exp.Table, catalog: Catalog, sql: str, source_name: str | None) -> UnknownNameError:
    name = table_name(table)
    known = catalog.known_names()
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else None
    if not known:
        hint = "no tables are registered: run `aipq tpch gen --sf 0.01` or `aipq table add NAME PATH`"
    elif hint is None:
        hint = f"known tables: {', '.join(known[:12])}" + (" …" if len(known) > 12 else "")
    return UnknownNameError(f"unknown table {name!r}", hint=hint, position=node_position(table.this, sql),
                            source_name=source_name)


def sqlglot_schema(tables: dict[str, TableEntry]) -> dict:
    """The nested {db: {table: {column: type}}} mapping sqlglot's qualify expects."""
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for key, entry in tables.items():
        database, name = split_name(key)
        schema.setdefault(database, {})[name] = entry.column_types()
    return schema


_POSITION = re.compile(r"Line: (\d+), Col: (\d+)")
_UNKNOWN_COLUMN = re.compile(r"Unknown column: (\S+)")
_UNKNOWN_OUTPUT = re.compile(r"Unknown output column: (\S+)")
_COLUMN = re.compile(r"Column '([^']+)' could not be resolved(?: for table: '([^']+)')?")


def inline_named_windows(statement: exp.Expression, sql: str, source_name: str | None) -> exp.Expression:
    """``OVER w`` with ``WINDOW w AS (PARTITION BY … ORDER BY …)`` → ``OVER (PARTITION BY … ORDER BY …)``; a
    frame given at the use (``OVER (w ROWS …)``) is kept."""
    for select in statement.find_all(exp.Select):
        named = {w.this.name.lower(): w for w in select.args.get("windows") or []}
        if not named:
            continue
        for window in select.find_all(exp.Window):
            name = window.args.get("alias")
            if window.find_ancestor(exp.Select) is not select or name is None:
                continue
            definition = named.get(name.name.lower())
            if definition is None:
                raise BadInputError(f"no window named {name.name!r}", position=node_position(name, sql),
                                    source_name=source_name, hint=f"define it: WINDOW {name.name} AS (…)")
            window.set("alias", None)
            for key in ("partition_by", "order", "spec"):
                if not window.args.get(key) and definition.args.get(key):
                    window.set(key, definition.args[key].copy() if isinstance(definition.args[key], exp.Expression)
                               else [e.copy() for e in definition.args[key]])
        select.set("windows", None)
    return statement


def qualify_statement(statement: exp.Expression, tables: dict[str, TableEntry], sql: str, dialect: str,
                      source_name: str | None) -> exp.Expression:
    schema = sqlglot_schema(tables)
    try:
        inlined = inline_named_windows(statement.copy(), sql, source_name)
        qualified = qualify(inlined, schema=schema, dialect=dialect, db="default",
                            quote_identifiers=False)
        typed = annotate_types(qualified, schema=schema, dialect=dialect)
        return factor_common_conjuncts(simplify(canonicalize(typed, dialect=dialect), dialect=dialect))
    except OptimizeError as error:
        ambiguous = _ambiguous_column(str(error), statement, tables, sql, source_name)
        raise (ambiguous or _resolution_error(str(error), tables, sql, source_name)) from error


def _ambiguous_column(message: str, statement: exp.Expression, tables: dict[str, TableEntry], sql: str,
                      source_name: str | None) -> BadInputError | None:
    """An unqualified column that several tables of the statement have: say so, with the qualified names."""
    missing = _COLUMN.search(message)
    if missing is None or missing.group(2):
        return None
    column = missing.group(1).lower()
    candidates = []
    for table in statement.find_all(exp.Table):
        entry = tables.get(qualified_key(table)) if table.name else None
        if entry is not None and column in entry.column_types():
            candidate = f"{table.alias_or_name}.{column}"
            if candidate not in candidates:
                candidates.append(candidate)
    if len(candidates) < 2:
        return None
    return BadInputError(f"ambiguous column {missing.group(1)!r}: it could be {' or '.join(candidates)}",
                         position=_column_position(message, column, sql), source_name=source_name,
                         hint=f"qualify it, e.g. {candidates[0]}")


def find_word(sql: str, word: str, after: tuple[str, ...] = ()) -> SourcePosition | None:
    """Where ``word`` first occurs in ``sql`` as a whole word (after one of ``after`` when given), for errors
    that come without a position."""
    prefix = rf"\b(?:{'|'.join(after)})\s+(?:[^;]*?[\s,])?" if after else ""
    match = re.search(prefix + rf"(?<![\w.])({re.escape(word)})(?!\w)", sql, flags=re.IGNORECASE)
    if match is None and after:
        match = re.search(rf"(?<![\w.])({re.escape(word)})(?!\w)", sql, flags=re.IGNORECASE)
    if match is None:
        match = re.search(rf"\.({re.escape(word)})(?!\w)", sql, flags=re.IGNORECASE)
    if match is None:
        return None
    return offset_position(sql, match.start(1), len(word))


def _column_position(message: str, column: str, sql: str) -> SourcePosition | None:
    """Where sqlglot's message says a column is (its ``Line: L, Col: C`` points at the column's last character)."""
    found = _POSITION.search(message)
    if found is None:
        return None
    line, end = int(found.group(1)), int(found.group(2))
    return SourcePosition(line=line, column=max(end - len(column) + 1, 1), sql=sql, length=len(column))


def _resolution_error(message: str, tables: dict[str, TableEntry], sql: str,
                      source_name: str | None) -> BadInputError:
    position = None
    found_position = _POSITION.search(message)
    missing = _COLUMN.search(message)
    unknown = _UNKNOWN_COLUMN.search(message)
    if unknown and not missing:
        column = unknown.group(1)
        candidates = sorted({c for entry in tables.values() for c, _ in entry.columns})
        close = difflib.get_close_matches(column.lower(), candidates, n=3, cutoff=0.5)
        return UnknownNameError(f"unknown column {column!r}", position=find_word(sql, column),
                                source_name=source_name,
                                hint=f"did you mean {', '.join(close)}?" if close else None)
    output = _UNKNOWN_OUTPUT.search(message)
    if output:
        what = output.group(1)
        return BadInputError(f"GROUP BY/ORDER BY refers to output column {what}, which the SELECT list does not have",
                             source_name=source_name, position=find_word(sql, what, after=("by",)),
                             hint="positions count from 1 over the SELECT list")
    if missing:
        column, table = missing.group(1), missing.group(2)
        candidates = sorted({c for entry in tables.values() for c, _ in entry.columns})
        close = difflib.get_close_matches(column.lower(), candidates, n=3, cutoff=0.5)
        position = _column_position(message, column, sql)
        where = f" in {table!r}" if table else ""
        hint = f"did you mean {', '.join(close)}?" if close else None
        return UnknownNameError(f"unknown column {column!r}{where}", hint=hint, position=position,
                                source_name=source_name)
    if found_position:
        position = SourcePosition(line=int(found_position.group(1)), column=int(found_position.group(2)),
                                  sql=sql)
    text = _POSITION.sub("", message).strip().rstrip(".")
    return BadInputError(f"cannot resolve names: {text}", position=position, source_name=source_name)
