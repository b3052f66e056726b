"""SQL text → sqlglot statements, with syntax errors mapped to line, column and caret."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from aipq.errors import BadInputError, SourcePosition, SqlSyntaxError


def parse_statements(sql: str, dialect: str, source_name: str | None = None) -> list[exp.Expression]:
    """Parse ``;``-separated statements; empty statements (e.g. a trailing ``;``) are dropped."""
    if "\x00" in sql:  # aipq hands SQL fragments to its JVM classes NUL-separated (engine/jvm.py)
        at = sql.index("\x00")
        line, column = sql.count("\n", 0, at) + 1, at - sql.rfind("\n", 0, at)
        raise SqlSyntaxError("the SQL text holds a NUL character (code 0)",
                             position=SourcePosition(line=line, column=column, sql=sql), source_name=source_name,
                             hint="remove it; where a value needs that character, write chr(0)")
    try:
        statements = sqlglot.parse(sql, read=dialect)
    except ParseError as error:
        raise _syntax_error(error, sql, source_name) from error
    except TokenError as error:
        raise SqlSyntaxError(f"cannot read the SQL text: {error}", source_name=source_name,
                             hint="look for an unterminated string, comment or quoted identifier") from error
    except ValueError as error:  # unknown dialect
        raise BadInputError(str(error), hint="use --dialect hive or --dialect spark") from error
    found = [s for s in statements if s is not None]
    if not found:
        raise SqlSyntaxError("the SQL text holds no statement", source_name=source_name)
    return found


def _syntax_error(error: ParseError, sql: str, source_name: str | None) -> SqlSyntaxError:
    details = error.errors[0] if error.errors else {}
    line, col = details.get("line"), details.get("col")
    highlight = details.get("highlight") or ""
    description = details.get("description") or str(error)
    position = None
    if line and col:
        start = max(col - len(highlight) + 1, 1)
        position = SourcePosition(line=line, column=start, sql=sql, length=max(len(highlight), 1))
    near = f" near {highlight!r}" if highlight else ""
    return SqlSyntaxError(f"syntax error{near}: {_friendly(description)}", position=position,
                          source_name=source_name)


def _friendly(description: str) -> str:
    if description.startswith("Required keyword"):
        return "the clause before this point is incomplete (" + description + ")"
    return description


def node_position(node: exp.Expression, sql: str) -> SourcePosition | None:
    """Where a parsed node came from, if sqlglot kept it (identifiers carry line/col/start/end)."""
    for candidate in (node, node.this if isinstance(node.this, exp.Expression) else None):
        meta = getattr(candidate, "meta", None) or {}
        if "line" in meta and "col" in meta:
            length = meta["end"] - meta["start"] + 1 if "start" in meta and "end" in meta else 1
            column = max(meta["col"] - length + 1, 1)
            return SourcePosition(line=meta["line"], column=column, sql=sql, length=length)
    return None
