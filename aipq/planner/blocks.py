"""What the logical plan builder (``planner/build.py``) works with: the relations a SELECT's scope names, the
blocks a query's parts become, the enclosing query a subquery reads, fresh column names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from aipq.planner.logical import Node
from aipq.planner.subqueries import ScalarJoin


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
    """A planned query block: its plan and the visible names of its output columns.

    A correlated subquery's block also carries its correlation conditions, over its output columns (which
    then include the inner columns they read, after the visible ones) and the enclosing query's columns.
    """

    node: Node
    names: list[str]
    correlated: tuple[exp.Expression, ...] = ()
    one_row_per_group: bool = False  # an aggregate without GROUP BY/HAVING (per correlation key, if any)
    empty_value: exp.Expression | None = None  # its value over no rows, when that is not NULL (COUNT)



@dataclass(frozen=True)
class Outer:
    """The query enclosing a subquery: its FROM scope, and how the subquery's correlations are planned —
    ``filter`` (EXISTS/IN: inner columns exposed for the join) or ``group`` (scalar: grouped by them)."""

    scope: dict[str, Relation]
    mode: Literal["filter", "group"]



@dataclass
class SelectParts:
    """A SELECT's items, order keys, correlation outputs, HAVING and scalar subqueries as translated, before
    grouping puts them in terms of the aggregate's output."""

    items: list[tuple[str, exp.Expression]]
    order_items: list
    extras: list[exp.Expression]
    having: exp.Expression | None
    scalars: list[ScalarJoin]

