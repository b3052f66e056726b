"""The 22 TPC-H queries in their standard text (validation parameters), shipped as package data."""

from __future__ import annotations

import re
from importlib import resources

import sqlglot
from sqlglot import exp

QUERY_NUMBERS = tuple(range(1, 23))


def query_text(number: int) -> str:
    if number not in QUERY_NUMBERS:
        raise ValueError(f"TPC-H has queries 1 to 22, not {number}")
    return resources.files("aipq.tpch").joinpath(f"queries/q{number:02d}.sql").read_text()


# ADP's variants (Ives, Halevy, Weld): Q3 and Q10 without their date predicates, where estimates made for the
# standard texts' selective date ranges no longer hold.
NO_DATE_QUERIES = (3, 10)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def without_date_filters(number: int) -> str:
    """The query with every WHERE conjunct that compares with a date literal left out."""
    statement = sqlglot.parse_one(query_text(number), read="hive")
    for where in list(statement.find_all(exp.Where)):
        parts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
        kept = [part for part in parts if not _DATE.search(part.sql(dialect="hive"))]
        if kept:
            where.set("this", exp.and_(*kept))
        else:
            where.pop()
    return f"-- TPC-H Q{number} without its date predicates (ADP's variant)\n" + statement.sql(dialect="hive",
                                                                                             pretty=True)
