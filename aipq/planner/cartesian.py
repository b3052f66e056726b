"""Hive's strict check on Cartesian products (``hive.strict.checks.cartesian.product``): a join with no
condition between two inputs that are not known to be small is refused before it runs for hours.

Allowed: a join written as ``CROSS JOIN``, one whose side is at most one row (a scalar subquery's value) or reads
only base tables whose files total at most ``SMALL_INPUT_BYTES`` (64 KB), and any join when the check is turned off.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aipq.errors import BadInputError
from aipq.files import table_bytes
from aipq.planner.logical import Join, Node, Scan
from aipq.planner.physical import at_most_one_row
from aipq.planner.resolve import find_word

_CROSS_JOIN = re.compile(r"\bcross\s+join\b", re.IGNORECASE)
SMALL_INPUT_BYTES = 64 * 1024  # a few thousand rows of parquet: pairing them with any table stays cheap


def known_small(node: Node, sizes: Callable[[str], int | None]) -> bool:
    if at_most_one_row(node):
        return True
    total = 0
    for sub in node.walk():
        if isinstance(sub, Scan):
            size = table_bytes(sizes, sub.table)
            if size is None:
                return False
            total += size
    return total <= SMALL_INPUT_BYTES


def check_cartesian(root: Node, sql: str, source_name: str | None, sizes: Callable[[str], int | None]) -> None:
    if _CROSS_JOIN.search(sql):
        return  # written as a Cartesian product on purpose (sqlglot parses a comma join as CROSS too)
    for node in root.walk():
        if isinstance(node, Join) and node.kind == "cross" and not (known_small(node.left, sizes)
                                                                    or known_small(node.right, sizes)):
            scans = [s for s in node.right.walk() if isinstance(s, Scan)]
            position = find_word(sql, scans[0].alias) if scans else None
            raise BadInputError(
                "this join has no condition: it would pair every row of one side with every row of the other "
                "(a Cartesian product)", position=position, source_name=source_name,
                hint="add the join condition (ON a.key = b.key, or in WHERE); if the product is what you want, "
                     "write CROSS JOIN, or SET hive.strict.checks.cartesian.product=false")
