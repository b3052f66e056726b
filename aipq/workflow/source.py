"""Where a command's SQL comes from: a file, stdin, a bundled TPC-H or TPC-DS query, or ``--sql`` text."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from aipq.errors import BadInputError
from aipq.tpcds.queries import query_text as tpcds_query_text
from aipq.tpch.queries import query_text


@dataclass(frozen=True)
class SqlSource:
    text: str
    name: str
    # what a workflow given as text (``aipq.sql``) is known by, for its journal and the tables it created: a
    # digest of the text; a file is known by its path
    identity: str | None = None



def load_sql(source: str | None, inline: str | None) -> SqlSource:
    """SQL from a file, ``-`` (stdin), ``tpch:N`` (a bundled TPC-H query), ``tpcds:N`` (a TPC-DS query) or
    ``--sql`` text; a leading UTF-8 byte-order mark (as some Windows editors write) is dropped."""
    found = _read_sql(source, inline)
    return SqlSource(found.text.removeprefix("\ufeff"), found.name)



def statements_file(source: str | None) -> str | None:
    """The SQL file a run's source names (None for stdin, tpch:N, tpcds:N or --sql), which it must never write."""
    if source is None or source == "-" or source.lower().startswith(("tpch:", "tpcds:")):
        return None
    return source if Path(source).is_file() else None


def _read_sql(source: str | None, inline: str | None) -> SqlSource:
    if inline is not None:
        if source is not None:
            raise BadInputError("give either a FILE or --sql, not both")
        return SqlSource(inline, "<--sql>")
    if source is None:
        raise BadInputError("no query given", hint="aipq run FILE, aipq run tpch:5, or aipq run --sql 'SELECT …'")
    if source == "-":
        return SqlSource(sys.stdin.read(), "<stdin>")
    if source.lower().startswith("tpch:"):
        number = source.split(":", 1)[1].lstrip("qQ")
        if not number.isdigit() or not 1 <= int(number) <= 22:
            raise BadInputError(f"{source!r} is not a TPC-H query", hint="use tpch:1 … tpch:22")
        return SqlSource(query_text(int(number)), f"tpch:q{int(number)}")
    if source.lower().startswith("tpcds:"):
        number = source.split(":", 1)[1].lstrip("qQ")
        if not number.isdigit() or not 1 <= int(number) <= 99:
            raise BadInputError(f"{source!r} is not a TPC-DS query", hint="use tpcds:1 … tpcds:99")
        return SqlSource(tpcds_query_text(int(number)), f"tpcds:q{int(number)}")
    path = Path(source)
    if not path.is_file():
        raise BadInputError(f"no such SQL file: {source}")
    try:
        return SqlSource(path.read_text(), str(path))
    except UnicodeDecodeError as error:
        raise BadInputError(f"{source} is not a UTF-8 text file") from error

