"""One stage's plan → a Spark DataFrame.

Expressions are rendered to Spark SQL and parsed by Spark. The stage's logical plan is built step by step, one
py4j call a step, and analysed once when its DataFrame is asked for (``jvm.LazyPlan``); a hook that needs a
DataFrame (a probe, a statistics observer) has its input analysed there. Joins get an explicit broadcast hint when
the planner chose a map-side join (automatic broadcast is off in aipq's stages, so every other join is a
repartition join).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType
from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.engine import jvm
from aipq.engine.jvm import LazyPlan
from aipq.engine.kept_rows import KeptRows
from aipq.engine.like_prefilter import with_like_prefilters
from aipq.engine.session import union_frames
from aipq.engine.shared_scans import SharedScan, table_key
from aipq.engine.table_reads import session_table_reads
from aipq.files import FileSource
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Generate,
    Join,
    Limit,
    Node,
    Project,
    Scan,
    Sort,
    Union,
    Values,
    Window,
)
from aipq.planner.logical import render as render_sql
from aipq.planner.stages import StageRead

_ROW_ID = "__aipq_row_id"  # a semi join's preserved rows, numbered where they are broadcast
_HOW = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer", "semi": "left_semi",
        "anti": "left_anti", "cross": "cross"}


def render(expression: exp.Expression) -> str:
    """Spark SQL text of an expression, its regular-expression LIKEs prefiltered (``like_prefilter``)."""
    return render_sql(with_like_prefilters(expression))


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _generator_sql(node: Generate) -> str:
    """The generator in Spark SQL; OUTER as Spark spells it (explode_outer, posexplode_outer, inline_outer)."""
    text = render(node.generator)
    if not node.outer:
        return text
    name, _, rest = text.partition("(")
    return f"{name}_OUTER({rest}" if name.upper() in ("EXPLODE", "POSEXPLODE", "INLINE") else text


class StageCompiler:
    def __init__(self, spark, stage_paths: dict[int, str], files: FileSource):
        self.spark = spark
        self.stage_paths = stage_paths
        self.files = files  # where the tables' files are listed, to reuse a session's reads of unchanged tables
        self._tables: dict[tuple[str, tuple[str, ...]], DataFrame] = {}
        # id of a Scan/StageRead leaf → what to do with its rows first (information passing probes)
        self.input_hooks: dict[int, Callable[[DataFrame], DataFrame]] = {}
        # id of a Scan → an observer of the raw table read, before its filters (piggybacked statistics)
        self.scan_observers: dict[int, Callable[[DataFrame], DataFrame]] = {}
        # id of a Scan of a partitioned table → the partitions it reads, after summaries of its partition column
        # pruned them (information passing into the file listing)
        self.partition_pruners: dict[int, Callable[[Scan], TableEntry]] = {}
        # id of the Sort that orders a result written as one file: sorted in one task (``LazyPlan.sort``)
        self.one_task_sorts: set[int] = set()
        # stage id → the schema its output was written with: read back without Spark inferring it from a footer
        self.stage_schemas: dict[int, StructType] = {}
        # stage id → its rows computed in the reader's plan, for a stage fused into its consumer (``ip/staging``)
        self.fused: dict[int, Callable[[], LazyPlan]] = {}
        # id of a repartition Join → the side to broadcast, now that the earlier stage outputs it reads are
        # measured (``physical.measured_broadcasts``)
        self.measured_broadcasts: dict[int, str] = {}
        # False while a stage runs again after the driver ran out of memory broadcasting: every join repartitions
        self.broadcasts_allowed = True
        # a batch's tables read by several of its queries, each read once for all of them (``shared_scans.py``)
        self.shared_scans: dict[tuple[str, tuple[str, ...]], SharedScan] = {}
        # scans whose filtered rows a predicate-transfer pass kept: read from there, not the table (scan once)
        self.kept = KeptRows()

    def table(self, entry: TableEntry, columns: frozenset[str] = frozenset()) -> DataFrame:
        """The table's rows: from a batch's shared scan when it holds ``columns`` (``engine/shared_scans.py``),
        else read."""
        key = table_key(entry)  # two scans may read different partitions of one table
        shared = self.shared_scans.get(key)
        if shared is not None and columns <= shared.columns:
            return shared.frame
        if key not in self._tables:
            self._tables[key] = session_table_reads(self.spark).read(self.spark, self.files, entry)
        return self._tables[key]

    def compile(self, node: Node) -> DataFrame:
        """The node's rows as a DataFrame: its plan built whole, then analysed once (``jvm.LazyPlan``)."""
        return self.plan(node).frame()

    def plan(self, node: Node) -> LazyPlan:
        """The node's rows as a plan not analysed yet: a scan whose rows a transfer pass kept reads them, and
        the pass that keeps them keeps its rows as probed."""
        kept = self.kept.frame(node) if isinstance(node, Scan) else None
        plan = LazyPlan.of(kept) if kept is not None else self._compile(node)
        hook = self.input_hooks.get(id(node))
        if hook is not None:
            plan = LazyPlan.of(hook(plan.frame()))
        keeping = self.kept.keeping
        if keeping is not None and keeping[0] is node:
            plan = LazyPlan.of(self.kept.keep(node, plan.frame()))
        return plan

    def _compile(self, node: Node) -> LazyPlan:
        if isinstance(node, Scan):
            return self._scan(node)
        if isinstance(node, StageRead):
            if node.stage_id in self.fused:
                return self.fused[node.stage_id]().select([_quoted(c) for c in node.columns])
            reader = self.spark.read
            if node.stage_id in self.stage_schemas:
                reader = reader.schema(self.stage_schemas[node.stage_id])
            return LazyPlan.of(reader.parquet(self.stage_paths[node.stage_id])).select(
                [_quoted(c) for c in node.columns])
        if isinstance(node, Values):
            return LazyPlan.of(self._values(node))
        if isinstance(node, Generate):
            generated = f"{_generator_sql(node)} AS ({', '.join(map(_quoted, node.names))})"
            return self.plan(node.child).select([_quoted(c) for c in node.child.output] + [generated])
        if isinstance(node, Filter):
            return self.plan(node.child).filter(render(node.condition))
        if isinstance(node, Project):
            return self.plan(node.child).select([_aliased(e, name) for name, e in node.items])
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate) and node.grouping_sets is not None:
            return LazyPlan.of(self.grouping_sets(node))
        if isinstance(node, Aggregate):
            return self.plan(node.child).aggregate([_aliased(e, name) for name, e in node.groups],
                                                    [_aliased(e, name) for name, e in node.aggregates])
        if isinstance(node, Window):
            return self.plan(node.child).select([_quoted(name) for name in node.child.output]
                                                 + [_aliased(e, name) for name, e in node.items])
        if isinstance(node, Sort):
            return self.plan(node.child).sort([_sort_key(k) for k in node.keys], id(node) in self.one_task_sorts)
        if isinstance(node, Limit):
            return self.plan(node.child).limit(node.count)
        if isinstance(node, Union):
            return LazyPlan.of(union_frames([self.compile(child).toDF(*node.names) for child in node.inputs]))
        raise TypeError(f"cannot compile {type(node).__name__}")

    def _scan(self, node: Scan) -> LazyPlan:
        pruner = self.partition_pruners.get(id(node))
        entry = pruner(node) if pruner is not None else node.table
        read = node.columns + node.filter_only
        source = self.table(entry, frozenset(src for _, src in read))
        # statistics describe whole tables: a scan of some partitions only observes nothing
        observer = self.scan_observers.get(id(node)) if entry is node.table else None
        if observer is not None:  # sees only the columns the scan reads (it keeps Spark's column pruning)
            source = observer(jvm.select_sql(source, list(dict.fromkeys(_quoted(src) for _, src in read))))
        plan = LazyPlan.of(source).select([f"{_quoted(src)} AS {_quoted(name)}" for name, src in read])
        if node.filters:
            plan = plan.filter(" AND ".join(f"({render(condition)})" for condition in node.filters))
        return plan.select([_quoted(name) for name, _ in node.columns]) if node.filter_only else plan

    def _values(self, node: Values) -> DataFrame:
        if not node.names:
            return self.spark.range(1).select()  # one row of no columns: SELECT without FROM
        rows = ", ".join("(" + ", ".join(render(value) for value in row) + ")" for row in node.rows)
        return self.spark.sql(f"SELECT * FROM VALUES {rows} AS _values({', '.join(map(_quoted, node.names))})")

    def grouping_sets(self, node: Aggregate) -> DataFrame:
        """GROUPING SETS (ROLLUP, CUBE): group expressions that are not plain columns are computed first, so
        that every set names its members as columns (Spark matches a set's members with the group columns)."""
        df = self.compile(node.child)
        computed = [(name, e) for name, e in node.groups if not (isinstance(e, exp.Column) and e.name == name)]
        if computed:
            df = jvm.select_sql(df, [_quoted(c) for c in df.columns] + [_aliased(e, name) for name, e in computed])
        names = [name for name, _ in node.groups]
        sets = [[names.index(member) for member in chosen] for chosen in node.grouping_sets or ()]
        return jvm.aggregate_sets_sql(df, [_quoted(n) for n in names], sets,
                                      [_aliased(e, name) for name, e in node.aggregates])

    def join(self, node: Join) -> LazyPlan:
        left, right = self.plan(node.left), self.plan(node.right)
        side = self.measured_broadcasts.get(id(node))
        if node.physical == "broadcast":
            side = node.broadcast_side or "right"
        if not self.broadcasts_allowed:
            side = None
        condition = node.condition()
        if condition is None and node.kind in ("semi", "anti"):
            return left.join(right, "true", _HOW[node.kind], side)
        if condition is None:
            return left.join(right, None, "cross", side)
        if node.kind == "semi" and side == "left":
            return _semi_join_from_preserved_side(left, right, render(condition), node.left.output)
        return left.join(right, render(condition), _HOW[node.kind], side)


def _semi_join_from_preserved_side(left: LazyPlan, right: LazyPlan, condition: str,
                                   columns: tuple[str, ...]) -> LazyPlan:
    """``left ⋉ right`` with ``left`` broadcast (``physical._semi_join_preserved_side``): each left row tagged with
    an id (the broadcast side is computed once, so its ids hold), inner-joined map-side where ``right`` is read,
    and kept once per id: a left row that matches is kept once, as often as the left input holds it."""
    row_id = _quoted(_ROW_ID)
    names = [_quoted(c) for c in columns]
    tagged = left.select([*names, f"monotonically_increasing_id() AS {row_id}"])
    matched = tagged.join(right, condition, "inner", "left")
    return matched.aggregate([row_id], [f"first({name}) AS {name}" for name in names]).select(names)


def _aliased(expression, name: str) -> str:
    return f"{render(expression)} AS {_quoted(name)}"


def _sort_key(key) -> tuple[str, bool, bool]:
    """(column, descending, nulls first), NULLs where Hive puts them unless the query says: first ascending,
    last descending."""
    nulls_first = key.nulls_first if key.nulls_first is not None else not key.descending
    return _quoted(key.column), key.descending, nulls_first
