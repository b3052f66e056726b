"""The planner pipeline, in order. Each pass is a pure function of its input.

SQL text ─parse→ statements ─resolve→ qualified AST ─build→ logical plan ─push_down_filters→
─order_joins→ ─prune_columns→ ─choose_physical_joins→ ─preaggregate→ ─share_subplans→ ─cut_stages→
─add_scan_summaries or add_transfers→ StageDag
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from sqlglot import exp

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.errors import UnsupportedSqlError
from aipq.files import FileSource, Sizes
from aipq.ip.scan_summaries import add_scan_summaries, scan_summary_bound
from aipq.ip.transfer import TRANSFER_STRATEGIES, add_transfers
from aipq.ip.written_scans import scans_to_cut
from aipq.planner.build import build_plan
from aipq.planner.cartesian import check_cartesian
from aipq.planner.join_order import JoinCosting, worst_connected_order
from aipq.planner.joins import join_graph, order_joins
from aipq.planner.logical import JoinBlock, QueryPlan
from aipq.planner.parenthesized import unnest_parenthesized_joins
from aipq.planner.parse import parse_statements
from aipq.planner.partitions import prune_partitions
from aipq.planner.physical import choose_physical_joins
from aipq.planner.preaggregate import PreaggregationCosting, preaggregate
from aipq.planner.predicate_order import order_scan_filters
from aipq.planner.prune import prune_columns
from aipq.planner.pushdown import push_down_filters
from aipq.planner.reoptimize import collapse_finished, references_resolve
from aipq.planner.resolve import lookup_tables, qualify_statement
from aipq.planner.shared import SharingCosting, share_subplans
from aipq.planner.stages import Stage, StageDag, cut_stages
from aipq.planner.table_output import TableShape, shape_for_table


@dataclass(frozen=True)
class PlannedQuery:
    sql: str
    statement: exp.Expression
    qualified: exp.Expression
    dag: StageDag
    source_name: str | None = None
    written: QueryPlan | None = None  # the logical plan as built, before optimizing: what re-planning starts from
    table: TableShape | None = None  # a table write's output shape


def display_names(statement: exp.Expression) -> list[str] | None:
    """Output column names as a user wrote them (``sum(l_quantity)`` rather than sqlglot's ``_col_5``)."""
    if not isinstance(statement, exp.Select):
        return None
    names = []
    for item in statement.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return None
        names.append(item.alias_or_name if isinstance(item, (exp.Alias, exp.Column)) else item.sql("spark"))
    return names


def _build(statement: exp.Expression, sql: str, catalog, settings: Settings,
           source_name: str | None) -> tuple[exp.Expression, QueryPlan]:
    """The qualified statement and its logical plan, as written (join blocks unordered)."""
    tables = lookup_tables(statement, catalog, sql, source_name)
    qualified = qualify_statement(unnest_parenthesized_joins(statement, tables), tables, sql, settings.dialect,
                                  source_name)
    return qualified, build_plan(qualified, tables, sql, source_name, display_names(statement))


def optimize_plan(plan: QueryPlan, settings: Settings, sizes: Sizes,
                  costing: JoinCosting | None = None) -> QueryPlan:
    root = prune_partitions(push_down_filters(plan.root))
    notes: list[str] = []
    root = order_joins(root, settings.plan, costing, notes)
    root = prune_columns(root)
    root = choose_physical_joins(root, settings.broadcast_threshold, sizes,
                                 costing.estimates.rows if costing is not None else None,
                                 how=settings.broadcast_sizes)
    preaggregated: list[str] = []
    if settings.preaggregate != "off":
        root = preaggregate(root, PreaggregationCosting(costing, settings.staging == "hive",
                                                        always=settings.preaggregate == "always"), preaggregated)
    root = order_scan_filters(root)
    shared_notes: list[str] = []
    shared: frozenset[int] = frozenset()
    if settings.share_subplans != "off":
        root, shared = share_subplans(root, SharingCosting(costing, always=settings.share_subplans == "always"),
                                      shared_notes)
    return replace(plan, root=root, join_order=tuple(notes), preaggregations=tuple(preaggregated),
                   shared=shared, shared_notes=tuple(shared_notes))


def plan_statement(statement: exp.Expression, sql: str, catalog, settings: Settings, files: FileSource,
                   source_name: str | None = None, table: TableShape | None = None,
                   costing: JoinCosting | None = None) -> PlannedQuery:
    """Plan one query statement; with ``table`` its output is shaped (named and typed) for a table write. Table
    sizes come from ``files`` (engine/storage.py, or a test's own); ``--plan cost`` prices join orders with
    ``costing`` (the estimator's, over the statistics repository)."""
    sizes = Sizes(files)
    qualified, written = _build(statement, sql, catalog, settings, source_name)
    plan = optimize_plan(written, settings, sizes, costing)
    if settings.cartesian == "refuse":
        check_cartesian(plan.root, sql, source_name, sizes)
    return PlannedQuery(sql=sql, statement=statement, qualified=qualified,
                        dag=_stage_dag(plan, table, sql, source_name, settings, sizes, costing),
                        source_name=source_name, written=written, table=table)


def _stage_dag(plan: QueryPlan, table: TableShape | None, sql: str, source_name: str | None, settings: Settings,
               sizes: Sizes, costing: JoinCosting | None, finished: Sequence[Stage] = ()) -> StageDag:
    if table is not None:
        plan = shape_for_table(plan, table, sql, source_name)
    return _cut(plan, table, settings, sizes, costing, finished)


def transfer_alternative(planned: PlannedQuery, settings: Settings, files: FileSource,
                         costing: JoinCosting | None) -> StageDag | None:
    """``planned``'s plan (its join order and physical joins) cut into stages under predicate transfer, for the
    benefit estimator to price against the plan without it (``estimator/transfer_price.py``); None when the
    schedule makes no pass."""
    dag = _cut(planned.dag.plan, planned.table, replace(settings, ip="transfer"), Sizes(files), costing)
    return dag if dag.transfer_passes else None


def _cut(plan: QueryPlan, table: TableShape | None, settings: Settings, sizes: Sizes, costing: JoinCosting | None,
         finished: Sequence[Stage] = ()) -> StageDag:
    dag = cut_stages(plan, finished, scans_to_cut(plan.root, settings, sizes) | plan.shared)
    if settings.ip in TRANSFER_STRATEGIES:
        bound = scan_summary_bound(dag, settings.scan_summaries, sizes)
        estimates = costing.estimates if costing is not None else None
        dag = add_transfers(dag, estimates.rows if estimates else (lambda node: None), sizes, bound,
                            estimates.distinct if estimates else (lambda node, column: None),
                            estimates.table_rows if estimates else (lambda scan: None), settings.transfer_survivors)
    else:
        dag = add_scan_summaries(dag, settings, sizes)
    if table is not None:
        dag = replace(dag, partition_by=table.partition_by, write_format=table.format)
    return dag


def replan_dag(planned: PlannedQuery, dag: StageDag, finished: Iterable[int], settings: Settings,
               files: FileSource, costing: JoinCosting) -> tuple[StageDag, list[int]] | None:
    """Corrective re-optimization: the query planned again with the joins that ``dag``'s ``finished`` stages
    computed standing in their blocks as reads of their outputs (``planner/reoptimize.py``), ordered from what
    ``costing`` now knows; the new DAG holds the finished stages first. With the finished stages it read; None
    when the query cannot be re-planned so (the plan as it was then runs on)."""
    if planned.written is None or settings.ip in TRANSFER_STRATEGIES:
        return None  # a transfer schedule is laid out for the whole query before it runs
    finished = set(finished)
    done = [s.id for s in dag.stages if s.id in finished]
    root = prune_partitions(push_down_filters(planned.written.root))
    collapsed = collapse_finished(root, dag, done)
    if collapsed is None or not collapsed[1]:
        return None
    root, used = collapsed
    if _redone(dag, done, used):
        return None  # a finished stage other than the joins standing in their blocks would run again
    sizes = Sizes(files)
    plan = optimize_plan(replace(planned.written, root=root), settings, sizes, costing)
    if not references_resolve(plan.root):
        return None
    new = _stage_dag(plan, planned.table, planned.sql, planned.source_name, settings, sizes, costing,
                     [s for s in dag.stages if s.id in finished])
    if new.plan.root.output != dag.plan.root.output:
        return None
    return new, used


def plan_query(sql: str, catalog: Catalog, settings: Settings, files: FileSource,
               source_name: str | None = None, costing: JoinCosting | None = None) -> PlannedQuery:
    """Plan a text holding one query (``aipq explain`` of a single SELECT, benchmarks, tests)."""
    statements = parse_statements(sql, settings.dialect, source_name)
    if len(statements) > 1 or not isinstance(statements[0], (exp.Select, exp.SetOperation, exp.Subquery)):
        raise UnsupportedSqlError("expected a single query", source_name=source_name)
    return plan_statement(statements[0], sql, catalog, settings, files, source_name, costing=costing)


def _redone(dag: StageDag, done: list[int], used: list[int]) -> bool:
    """Whether a finished stage (summary pre-passes aside) is neither one of ``used`` nor read by one."""
    reached, stack = set(), list(used)
    while stack:
        stage_id = stack.pop()
        if stage_id not in reached:
            reached.add(stage_id)
            stack.extend(dag.stage(stage_id).input_stages)
    return any(stage_id not in reached and dag.stage(stage_id).operator != "SCAN" for stage_id in done)


def worst_order_text(sql: str, catalog: Catalog, settings: Settings, costing: JoinCosting) -> str | None:
    """The query with its largest comma-joined FROM list reordered so that every table has a join condition with
    one before it and the written (left-deep) order costs the most (``join_order.worst_connected_order``):
    issue 42's bad-order variants. None when no FROM list of three or more comma joins has a join block of its
    own, or a table lacks statistics."""
    statement = parse_statements(sql, settings.dialect)[0]
    lists = [(select, select.args.get("from_") or select.args.get("from"), select.args.get("joins") or [])
             for select in statement.find_all(exp.Select)]
    lists = [(select, from_, joins) for select, from_, joins in lists if from_ is not None and len(joins) >= 2
             and all(_is_comma_join(join) for join in joins)]
    if not lists:
        return None
    select, from_, joins = max(lists, key=lambda found: len(found[2]))
    _, plan = _build(statement.copy(), sql, catalog, settings, None)
    root = prune_partitions(push_down_filters(plan.root))  # the blocks hold their filters, as ordering sees them
    blocks = [node for node in root.walk() if isinstance(node, JoinBlock) and len(node.relations) == len(joins) + 1]
    if len(blocks) != 1:
        return None
    order = worst_connected_order(join_graph(blocks[0]), costing)
    if order is None:
        return None
    items = [from_.this.copy()] + [join.this.copy() for join in joins]
    from_.set("this", items[order[0]])
    for join, index in zip(joins, order[1:]):
        join.set("this", items[index])
    return statement.sql(dialect=settings.dialect, pretty=True)


def _is_comma_join(join: exp.Join) -> bool:
    return (not join.args.get("on") and not join.args.get("using") and not join.args.get("side")
            and (join.args.get("kind") or "CROSS").upper() == "CROSS")
