"""Pre-aggregation (ADP's, Ives, Halevy & Weld; eager aggregation, Yan & Larson 1995): a GROUP BY right above a
repartition inner join whose aggregates read one input only is computed partially on that input, grouped by the
input's group and join columns, and finished above the join. The join then shuffles one row per partial group
instead of every row.

It is correct for SUM, COUNT, MIN and MAX without DISTINCT: each partial row stands for the input rows of its
group, and every join partner of one of them is a partner of the partial row (the join keys are group keys),
so summing sums and counts, and taking the least of minima and the greatest of maxima, gives the same values.
A count of no rows is 0, not the NULL a sum of nothing gives.

It is applied where the statistics say it pays (``PreaggregationCosting``), on an input that is no join (a
table's rows and keys are known; a join's are estimated from them): the partial groups, estimated from
the columns' distinct counts, shuffled by the partial aggregate and again by the join (unless the join is
partitioned on exactly the group columns and the groups are not written between), a stage's fixed cost, and
under Hive staging their write, against the input's rows shuffled as they are; with information passing on,
both after the pruning the join's other input's summary does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from aipq.planner.join_order import JoinCosting
from aipq.planner.logical import Aggregate, Join, Node, Project, Scan, col, refs, transform_up

# Pre-aggregate only when the estimate says it halves the input's cost at least: the partial groups are estimated
# as if Spark's map-side partial aggregation met each group once, which holds only for clustered keys.
SHARE_OF_COST = 0.5
_DECOMPOSABLE = (exp.Sum, exp.Count, exp.Min, exp.Max)


@dataclass(frozen=True)
class PreaggregationCosting:
    join: JoinCosting | None  # None: no statistics to price with
    hive_staging: bool  # every stage output written: a partial aggregate is a stage written and read back
    always: bool = False  # wherever the aggregates decompose, paying or not (``--preaggregate always``)


def preaggregate(root: Node, costing: PreaggregationCosting, notes: list[str]) -> Node:
    """Every GROUP BY above a repartition inner join pre-aggregated on the join's input where it pays; what was
    done is appended to ``notes``."""
    return transform_up(root, lambda node: _rewrite(node, costing, notes) if isinstance(node, Aggregate) else node)


def _passthrough(node: Node) -> tuple[list[Project], Node]:
    """The projections that only pass columns on (same names) between an aggregate and what is below them."""
    chain = []
    while isinstance(node, Project) and all(isinstance(e, exp.Column) and e.name == n for n, e in node.items):
        chain.append(node)
        node = node.child
    return chain, node


def _decomposable(expression: exp.Expression) -> bool:
    return isinstance(expression, _DECOMPOSABLE) and not expression.find(exp.Distinct)


def _rewrite(aggregate: Aggregate, costing: PreaggregationCosting, notes: list[str]) -> Node:
    if aggregate.grouping_sets is not None or not all(isinstance(e, exp.Column) for _, e in aggregate.groups):
        return aggregate
    if not all(_decomposable(e) for _, e in aggregate.aggregates):
        return aggregate
    chain, join = _passthrough(aggregate.child)
    if not isinstance(join, Join) or join.kind != "inner" or join.physical != "repartition":
        return aggregate
    read = set().union(*(refs(e) for _, e in aggregate.aggregates))
    for side in ("left", "right"):
        below = join.left if side == "left" else join.right
        if not read <= set(below.output):
            continue
        join_keys = join.left_keys if side == "left" else join.right_keys
        other, other_keys = (join.right, join.right_keys) if side == "left" else (join.left, join.left_keys)
        keys = list(dict.fromkeys([e.name for _, e in aggregate.groups if e.name in below.output]
                                  + list(join_keys) + sorted(refs(join.residual) & set(below.output))))
        priced = _price(below, keys, set(join_keys), other, list(other_keys), costing)
        if priced is None:
            continue
        groups, rows = priced
        partial_names = {name: f"_pre_{name}" for name, _ in aggregate.aggregates}
        partial = Aggregate(below, tuple((k, col(k)) for k in keys),
                            tuple((partial_names[name], e.copy()) for name, e in aggregate.aggregates))
        joined = replace(join, left=partial) if side == "left" else replace(join, right=partial)
        dropped = set(below.output) - set(keys)
        child: Node = joined
        for project in reversed(chain):
            kept = [(n, e) for n, e in project.items if n not in dropped]
            child = Project(child, tuple(kept + [(p, col(p)) for p in partial_names.values()]))
        estimated = (f"about {groups:,.0f} groups of {rows:,.0f} rows (estimated)" if groups is not None
                     else "not priced (--preaggregate always)")
        notes.append(f"pre-aggregated below the join on {', '.join(join_keys)}: {_describe(below)} grouped by "
                     f"{', '.join(keys)}, {estimated}")
        return replace(aggregate, child=child, aggregates=tuple(
            (name, _finish(e, partial_names[name])) for name, e in aggregate.aggregates))
    return aggregate


def _price(below: Node, keys: list[str], join_keys: set[str], other: Node, other_keys: list[str],
           costing: PreaggregationCosting) -> tuple[float | None, float | None] | None:
    """(partial groups, rows) of the input when pre-aggregating it pays, else None; (None, None) when it is
    applied unpriced."""
    if costing.always:
        return None, None
    units = costing.join
    if units is None or units.estimates.missing_statistics(below):
        return None
    if any(isinstance(node, Join) for node in below.walk()):
        return None  # a join's rows are an estimate built on estimates (docs/decisions.md)
    estimates = units.estimates
    rows = estimates.rows(below)
    if rows is None or rows <= 0:
        return None
    groups = 1.0
    for key in keys:
        distinct = estimates.distinct(below, key)
        groups *= distinct if distinct is not None else rows
    groups = min(groups, rows)
    kept = _kept_by_summary(below, list(join_keys), other, other_keys, units) if units.passing else 1.0
    rows, groups = rows * kept, groups * kept
    # the partial aggregate's own shuffle, and the join's: again when the join is partitioned on fewer columns,
    # or when the partial groups were written (Hive staging) and so lost their partitioning
    shuffles = 1 if set(keys) == join_keys and not costing.hive_staging else 2
    with_partial = units.shuffled_row_seconds * groups * shuffles + units.stage_seconds  # a stage of its own
    if costing.hive_staging:
        with_partial += units.written_row_seconds * groups
    without = units.shuffled_row_seconds * rows
    return (groups, rows) if with_partial <= SHARE_OF_COST * without else None


def _kept_by_summary(below: Node, keys: list[str], other: Node, other_keys: list[str], units: JoinCosting) -> float:
    """The share of ``below``'s rows a summary of the join's other input keeps, with information passing on:
    the input is pruned before it is aggregated or shuffled, whichever of the two runs."""
    estimates = units.estimates
    share = 1.0
    for mine, theirs in zip(keys, other_keys):
        have, offered = estimates.distinct(below, mine), estimates.distinct(other, theirs)
        if have and offered:
            share = min(share, offered / have)
    return share


def _finish(partial: exp.Expression, name: str) -> exp.Expression:
    """The final aggregate over a partial one's column: sums and counts are summed (a count of nothing is 0),
    minima and maxima taken again."""
    column = col(name)
    if isinstance(partial, exp.Count):
        return exp.Coalesce(this=exp.Sum(this=column), expressions=[exp.Literal.number(0)])
    return type(partial)(this=column)


def _describe(node: Node) -> str:
    scans = [n.table.name for n in node.walk() if isinstance(n, Scan)]
    return " ⋈ ".join(scans) if scans else "its input"
