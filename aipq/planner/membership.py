"""IN/EXISTS subqueries where a semi join cannot go (under OR, inside CASE, in the SELECT list): rewritten into
COUNT scalar subqueries, which are planned as a LEFT join with the subquery grouped by its correlation keys (a
mark join: one match count per outer row).

- ``EXISTS (q)`` → ``(SELECT COUNT(*) FROM … q's WHERE) > 0`` (EXISTS is never NULL, and neither is a count).
- ``x IN (SELECT y …)`` in a filter's positive position (reached from the condition's root through AND, OR and
  parentheses only, where NULL and FALSE both drop the row) → ``(SELECT COUNT(*) … AND y = x) > 0``.
- elsewhere, SQL's three values: TRUE when some ``y = x``; else NULL when ``x`` is NULL and the subquery has
  rows, or some ``y`` is NULL; else FALSE.

The subquery must be a plain SELECT (no GROUP BY, HAVING, DISTINCT, LIMIT or set operation), so that its WHERE
can take the extra condition; ``x`` must be a column, as a scalar subquery's correlation is column = value.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

_BLOCKING = ("group", "having", "distinct", "limit", "offset", "qualify", "with")
_POSITIVE = (exp.And, exp.Or, exp.Paren)


def nested_memberships(expression: exp.Expression) -> list[exp.Expression]:
    """The IN-subquery and EXISTS nodes of ``expression`` itself (not those inside its own subqueries)."""
    found = []
    for node in expression.find_all(exp.Exists, exp.In):
        if isinstance(node, exp.In) and node.args.get("query") is None:
            continue
        if node.find_ancestor(exp.Select, exp.Subquery) is None:
            found.append(node)
    return found


def memberships_as_counts(expression: exp.Expression, condition: bool,
                          refuse: Callable[[str, exp.Expression], Exception]) -> exp.Expression:
    """``expression`` (detached, e.g. a copy) with each nested IN/EXISTS subquery rewritten into COUNT scalar
    subqueries. ``condition``: the expression is a filter (WHERE, HAVING), where a positive position may treat
    NULL as FALSE. ``refuse(what, node)`` makes the error for a form that cannot be rewritten."""
    for node in nested_memberships(expression):
        if isinstance(node, exp.Exists):
            replacement = _positive(_count(_plain(node.this, node, refuse), None))
        else:
            replacement = _in_subquery(node, condition and _in_positive_position(node, expression), refuse)
        if node is expression:
            return replacement
        node.replace(replacement)
    return expression


def _in_positive_position(node: exp.Expression, root: exp.Expression) -> bool:
    while node is not root:
        node = node.parent
        if not isinstance(node, _POSITIVE):
            return False
    return True


def _plain(query: exp.Expression, where: exp.Expression, refuse) -> exp.Select:
    if isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, exp.Select) or any(query.args.get(arg) for arg in _BLOCKING):
        raise refuse("an IN/EXISTS subquery with GROUP BY, HAVING, DISTINCT, LIMIT or a set operation inside OR, "
                     "CASE or the SELECT list", where)
    return query


def _without_alias(query: exp.Select, alias: str) -> exp.Select:
    """``query`` with its own relation named ``alias`` renamed, so that the outer column qualified by ``alias``
    that joins the count's WHERE is not captured by it (TPC-DS Q45: ``item.i_item_id IN (SELECT i_item_id FROM
    item …)``)."""
    if not any(t.alias_or_name.lower() == alias and t.find_ancestor(exp.Select) is query
               for t in query.find_all(exp.Table)):
        return query
    renamed = query.copy()
    fresh = f"{alias}__inner"
    for table in renamed.find_all(exp.Table):
        if table.alias_or_name.lower() == alias and table.find_ancestor(exp.Select) is renamed:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(fresh)))
    for column in renamed.find_all(exp.Column):
        if column.table.lower() == alias and _resolves_to(column, renamed, alias):
            column.set("table", exp.to_identifier(fresh))
    return renamed


def _resolves_to(column: exp.Column, query: exp.Select, alias: str) -> bool:
    """Whether ``column`` names ``query``'s own relation ``alias`` (no SELECT between them has one so named)."""
    select = column.find_ancestor(exp.Select)
    while select is not None and select is not query:
        if any(t.alias_or_name.lower() == alias for t in select.find_all(exp.Table)
               if t.find_ancestor(exp.Select) is select):
            return False
        select = select.find_ancestor(exp.Select)
    return select is query


def _count(query: exp.Select, extra: exp.Expression | None) -> exp.Expression:
    """``(SELECT COUNT(*) FROM … WHERE … [AND extra])`` as a scalar subquery."""
    counted = query.copy()
    counted.set("expressions", [exp.Count(this=exp.Star())])
    counted.set("order", None)  # the order of the rows counted means nothing
    if extra is not None:
        counted = counted.where(extra, copy=False)
    return exp.Subquery(this=counted)


def _positive(count: exp.Expression) -> exp.Expression:
    return exp.GT(this=count, expression=exp.Literal.number(0))


def _in_subquery(node: exp.In, positive: bool, refuse) -> exp.Expression:
    query = _plain(node.args["query"], node, refuse)
    value = node.this
    if isinstance(value, exp.Tuple) or len(query.expressions) != 1:
        raise refuse("an IN subquery over several columns inside OR, CASE or the SELECT list", node)
    if not isinstance(value, exp.Column):
        raise refuse("an IN subquery inside OR, CASE or the SELECT list whose left side is not a column", node)
    if value.table:
        query = _without_alias(query, value.table.lower())
    inner = query.expressions[0].unalias()
    match = _positive(_count(query, exp.EQ(this=inner.copy(), expression=value.copy())))
    if positive:
        return match
    unknown = exp.Cast(this=exp.Null(), to=exp.DataType.build("boolean"))
    # one pass over the subquery for both: 0 no rows, 1 rows and no NULL y, 2 some y is NULL
    rows, values = exp.Count(this=exp.Star()), exp.Count(this=inner.copy())
    shape = query.copy()
    shape.set("expressions", [exp.Case(ifs=[
        exp.If(this=exp.EQ(this=rows, expression=exp.Literal.number(0)), true=exp.Literal.number(0)),
        exp.If(this=exp.GT(this=rows.copy(), expression=values), true=exp.Literal.number(2)),
    ], default=exp.Literal.number(1))])
    shape.set("order", None)
    state = exp.Subquery(this=shape)
    outer_null = exp.Is(this=value.copy(), expression=exp.Null())
    return exp.Case(ifs=[
        exp.If(this=outer_null, true=exp.Case(ifs=[exp.If(this=_positive(state), true=unknown)],
                                              default=exp.false())),
        exp.If(this=match, true=exp.true()),
        exp.If(this=exp.EQ(this=state.copy(), expression=exp.Literal.number(2)), true=unknown.copy()),
    ], default=exp.false())
