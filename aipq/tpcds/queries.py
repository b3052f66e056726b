"""The 99 TPC-DS queries, read from DuckDB's tpcds extension (the optional extra ``aipq[tpcds]`` installs it as
a Python package) and rewritten into Hive's dialect with their tables qualified by the database ``aipq tpcds gen``
registers them in."""

from __future__ import annotations

from functools import cache

from sqlglot import exp, parse_one

from aipq.errors import BadInputError
from aipq.tpcds.generate import TABLES

QUERY_NUMBERS = tuple(range(1, 100))
_HINT = "pip install 'aipq[tpcds]' (DuckDB's tpcds extension, packaged as duckdb-extension-tpcds)"


@cache
def duckdb_texts() -> dict[int, str]:
    """Query number → its text as DuckDB's tpcds extension ships it (DuckDB's dialect, tables unqualified)."""
    try:
        import duckdb
        from duckdb_extensions import import_extension
    except ImportError as error:
        raise BadInputError(f"the TPC-DS queries need DuckDB's tpcds extension ({error})", hint=_HINT) from None
    con = duckdb.connect()
    try:
        import_extension("tpcds", con=con)
        con.execute("LOAD tpcds")
        return dict(con.execute("SELECT query_nr, query FROM tpcds_queries()").fetchall())
    except (duckdb.Error, ModuleNotFoundError) as error:
        raise BadInputError(f"DuckDB's tpcds extension does not load: {error}",
                            hint=f"{_HINT}; its version must match duckdb's") from None
    finally:
        con.close()


def query_text(number: int, database: str = "tpcds") -> str:
    """TPC-DS query ``number`` in Hive's dialect, its tables in ``database``."""
    if number not in QUERY_NUMBERS:
        raise ValueError(f"TPC-DS has queries 1 to 99, not {number}")
    tree = parse_one(duckdb_texts()[number], read="duckdb")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not table.db and table.name.lower() in TABLES and table.name.lower() not in ctes:
            table.set("db", exp.to_identifier(database))
    return tree.sql(dialect="hive", pretty=True) + "\n"
