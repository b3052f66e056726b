"""SQL text → sqlglot statements, with syntax errors mapped to line, column and caret."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import TokenType

from aipq.errors import BadInputError, SourcePosition, SqlSyntaxError


@contextmanager
def _quiet_parser() -> Iterator[None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse_statements(sql: str, dialect: str, source_name: str | None = None) -> list[exp.Expression]:
    """Parse ``;``-separated statements; empty statements (e.g. a trailing ``;``) are dropped."""
    if "\x00" in sql:  # aipq hands SQL fragments to its JVM classes NUL-separated (engine/jvm/)
        raise SqlSyntaxError("the SQL text holds a NUL character (code 0)",
                             position=offset_position(sql, sql.index("\x00")), source_name=source_name,
                             hint="remove it; where a value needs that character, write chr(0)")
    check_clauses(sql, dialect, source_name)
    try:
        with _quiet_parser():  # statements it reads as text (MSCK …) are checked by the workflow, not logged
            statements = sqlglot.parse(sql, read=dialect)
    except ParseError as error:
        raise _syntax_error(error, sql, source_name) from error
    except TokenError as error:
        raise SqlSyntaxError(f"cannot read the SQL text: {error}", source_name=source_name,
                             hint="look for an unterminated string, comment or quoted identifier") from error
    except ValueError as error:  # unknown dialect
        raise BadInputError(str(error), hint="use --dialect hive or --dialect spark") from error
    found = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    if not found:
        raise SqlSyntaxError("the SQL text holds no statement", source_name=source_name)
    for statement in found:
        check_typed_literals(statement, sql, source_name)
        check_interval_literals(statement, sql, source_name)
    return found


# Keywords that must be followed by something, and what (sqlglot's parser accepts ``JOIN t ON`` and ``GROUP BY``
# with nothing after them: the first would run a Cartesian product, the second aggregate everything).
_OPERAND = {
    TokenType.SELECT: "a list of expressions", TokenType.FROM: "a table", TokenType.WHERE: "a condition",
    TokenType.HAVING: "a condition", TokenType.ON: "a join condition", TokenType.AND: "a condition",
    TokenType.OR: "a condition", TokenType.JOIN: "a table", TokenType.USING: "a list of columns",
    TokenType.GROUP_BY: "a list of expressions", TokenType.ORDER_BY: "a list of expressions",
    TokenType.SORT_BY: "a list of expressions", TokenType.CLUSTER_BY: "a list of expressions",
    TokenType.DISTRIBUTE_BY: "a list of expressions", TokenType.LIMIT: "a row count",
    TokenType.UNION: "a query", TokenType.INTERSECT: "a query", TokenType.EXCEPT: "a query",
    TokenType.WINDOW: "a window definition", TokenType.COMMA: "another item",
}
# Tokens that cannot start an operand: a keyword above followed by one of these (or by the end) lacks its own.
_CLAUSE_END = {
    TokenType.SEMICOLON, TokenType.R_PAREN, TokenType.FROM, TokenType.WHERE, TokenType.HAVING, TokenType.ON,
    TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.SORT_BY, TokenType.CLUSTER_BY, TokenType.DISTRIBUTE_BY,
    TokenType.LIMIT, TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT, TokenType.JOIN, TokenType.WINDOW,
    TokenType.AND, TokenType.OR, TokenType.COMMA,
}
_QUERY_STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.INSERT, TokenType.CREATE,
                 TokenType.L_PAREN}


def check_clauses(sql: str, dialect: str, source_name: str | None) -> None:
    """Refuse a clause keyword with nothing after it (``… JOIN orders o ON``, ``GROUP BY`` at the end), at the
    keyword's position; statements other than queries and table writes are left to the parser."""
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except (SqlglotError, ValueError):
        return  # the parser reports what is wrong with the text
    _check_parentheses(sql, tokens, source_name)
    statement_start = True
    checking = False
    for index, token in enumerate(tokens):
        if statement_start:
            checking = token.token_type in _QUERY_STARTS
        statement_start = token.token_type == TokenType.SEMICOLON
        if not checking or token.token_type not in _OPERAND:
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is None or following.token_type in _CLAUSE_END:
            keyword = " ".join(token.text.upper().split())
            raise SqlSyntaxError(f"syntax error: {keyword} is not followed by {_OPERAND[token.token_type]}",
                                 position=offset_position(sql, token.start, token.end - token.start + 1),
                                 source_name=source_name, hint="complete the clause, or remove it")


def _check_parentheses(sql: str, tokens: list, source_name: str | None) -> None:
    """Every ``(`` closed by a ``)`` (sqlglot's parser can pair them across clauses and read on)."""
    opened = []
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            opened.append(token)
        elif token.token_type == TokenType.R_PAREN:
            if not opened:
                raise SqlSyntaxError("syntax error: this ) closes no (", source_name=source_name,
                                     position=offset_position(sql, token.start))
            opened.pop()
    if opened:
        raise SqlSyntaxError("syntax error: this ( is never closed", source_name=source_name,
                             position=offset_position(sql, opened[-1].start), hint="add the missing )")


def offset_position(sql: str, start: int, length: int = 1) -> SourcePosition:
    """The line and column of character offset ``start``."""
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return SourcePosition(line=line, column=column, sql=sql, length=max(length, 1))


_DATE_TEXT = re.compile(r"\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?:([ T])(.*))?\s*", re.DOTALL)
_TIME_TEXT = re.compile(r"(\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.\d{1,9})?)?)?\s*(?:Z|[+-]\d{1,2}(?::?\d{2})?|"
                        r"[A-Za-z_]+(?:/[A-Za-z_+-]+)*)?\s*")


def check_typed_literals(statement: exp.Expression, sql: str, source_name: str | None) -> None:
    """A typed literal (``DATE '…'``, ``TIMESTAMP '…'``) whose text is no such value is an error, as in Spark
    and Hive; ``CAST('…' AS DATE)`` is not a literal and gives NULL under Hive's rules."""
    for cast in statement.find_all(exp.Cast):
        if type(cast) is not exp.Cast or not isinstance(cast.this, exp.Literal) or not cast.this.is_string:
            continue
        kind = cast.to.this
        timestamp = kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME,
                             exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPNTZ)
        if kind != exp.DataType.Type.DATE and not timestamp:
            continue
        text = cast.this.name
        if not _valid_datetime_text(text, timestamp):
            word = "TIMESTAMP" if timestamp else "DATE"
            at = sql.find(f"'{text}'")
            raise SqlSyntaxError(f"{word} '{text}' is not a valid {word.lower()}",
                                 position=offset_position(sql, at, len(text) + 2) if at >= 0 else None,
                                 source_name=source_name,
                                 hint=f"write it as '{'YYYY-MM-DD HH:MM:SS' if timestamp else 'YYYY-MM-DD'}', "
                                      f"or CAST('…' AS {word}) for a value that may be NULL")


def check_interval_literals(statement: exp.Expression, sql: str, source_name: str | None) -> None:
    """``INTERVAL 'x' DAY``: a single unit needs a number."""
    for interval in statement.find_all(exp.Interval):
        value, unit = interval.this, interval.args.get("unit")
        if isinstance(value, exp.Literal) and value.is_string and isinstance(unit, exp.Var) \
                and not re.fullmatch(r"\s*[+-]?\d+(\.\d+)?\s*", value.name):
            at = sql.find(f"'{value.name}'")
            raise SqlSyntaxError(f"INTERVAL '{value.name}' {unit.name} is not a number of {unit.name.lower()}s",
                                 position=offset_position(sql, at, len(value.name) + 2) if at >= 0 else None,
                                 source_name=source_name, hint=f"write it as INTERVAL '3' {unit.name}")


def _valid_datetime_text(text: str, timestamp: bool) -> bool:
    match = _DATE_TEXT.fullmatch(text)
    if match is None:
        return False
    year, month, day, separator, rest = match.groups()
    try:
        date(int(year), int(month or 1), int(day or 1))
    except ValueError:
        return False
    if not separator or not rest.strip():
        return True
    if not timestamp:
        return separator == "T" or separator == " "  # Spark ignores a time after a date
    time = _TIME_TEXT.fullmatch(rest)
    if time is None:
        return False
    hour, minute, second = (int(v) if v else 0 for v in time.groups())
    return hour < 24 and minute < 60 and second < 60


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
