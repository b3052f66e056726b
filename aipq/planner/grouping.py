"""GROUP BY with GROUPING SETS, ROLLUP and CUBE, as Spark SQL and Hive read them, expanded to the list of group
expressions and the grouping sets over them.

``GROUP BY a, ROLLUP(b, c)`` is the sets (a, b, c), (a, b), (a); ``CUBE(b, c)`` every subset of (b, c);
several such parts combine as their cross product with the plain expressions in every set. Hive's trailing forms
(``GROUP BY a, b WITH ROLLUP``, ``… WITH CUBE``, ``GROUP BY a, b GROUPING SETS ((a), (a, b))``) apply to the
plain list, which then only names the group columns.
"""

from __future__ import annotations

from itertools import combinations, product

from sqlglot import exp


def _set_items(item: exp.Expression) -> list[exp.Expression]:
    if isinstance(item, exp.Tuple):
        return list(item.expressions)
    if isinstance(item, exp.Paren):
        return _set_items(item.this)
    return [item]


def _rollup(items: list[exp.Expression]) -> list[list[exp.Expression]]:
    return [items[:size] for size in range(len(items), -1, -1)]


def _cube(items: list[exp.Expression]) -> list[list[exp.Expression]]:
    return [list(chosen) for size in range(len(items), -1, -1) for chosen in combinations(items, size)]


def _unique(items: list[exp.Expression]) -> list[exp.Expression]:
    seen: dict[str, exp.Expression] = {}
    for item in items:
        seen.setdefault(item.sql(), item)
    return list(seen.values())


def _without_atomic_parens(item: exp.Expression) -> exp.Expression:
    """``item`` without parentheses around a column, literal or function call: sqlglot reads
    ``ROLLUP(year(d))`` as ``YEAR((d))``, which would not match ``year(d)`` in the SELECT list."""
    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Paren) and isinstance(node.this, (exp.Column, exp.Literal, exp.Func)):
            return node.this
        return node

    return item.transform(strip)


def expand_group_by(group: exp.Group | None) -> tuple[list[exp.Expression], list[list[exp.Expression]] | None]:
    """The group expressions (each once, in the order written) and the grouping sets over them, or None for a
    plain GROUP BY."""
    if group is None:
        return [], None
    plain: list[exp.Expression] = []
    parts: list[list[list[exp.Expression]]] = []
    for item in group.expressions:
        if isinstance(item, (exp.Rollup, exp.Cube, exp.GroupingSets)):
            item = _without_atomic_parens(item)
        if isinstance(item, exp.Rollup):
            parts.append(_rollup(list(item.expressions)))
        elif isinstance(item, exp.Cube):
            parts.append(_cube(list(item.expressions)))
        elif isinstance(item, exp.GroupingSets):
            parts.append([_set_items(s) for s in item.expressions])
        else:
            plain.append(item)
    trailing = False
    for rollup in group.args.get("rollup") or []:
        parts.append(_rollup(list(rollup.expressions) or plain))
        trailing = True
    for cube in group.args.get("cube") or []:
        parts.append(_cube(list(cube.expressions) or plain))
        trailing = True
    for sets in group.args.get("grouping_sets") or []:
        parts.append([_set_items(s) for s in sets.expressions])
        trailing = True
    if not parts:
        return _unique(plain), None
    every = [] if trailing else plain  # Hive's trailing forms: the plain list names the columns only
    sets = [_unique(every + [e for chosen in choice for e in chosen]) for choice in product(*parts)]
    everything = _unique(plain + [e for part in parts for s in part for e in s])
    return everything, sets
