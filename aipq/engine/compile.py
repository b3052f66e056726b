"""One stage's plan → a Spark DataFrame.

Expressions are rendered to Spark SQL and parsed by Spark; projections, aggregates and join conditions go through
``jvm`` in one py4j call each. Joins get an explicit broadcast hint when the planner chose a map-side join
(automatic broadcast is off in aipq's stages, so every other join is a repartition join).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.engine import jvm
from aipq.engine.session import read_table, union_frames
from aipq.engine.shared_scans import SharedScan, table_key
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
    render,
)
from aipq.planner.stages import StageRead

_HOW = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer", "semi": "left_semi",
        "anti": "left_anti", "cross": "cross"}


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
    def __init__(self, spark, stage_paths: dict[int, str]):
        self.spark = spark
        self.stage_paths = stage_paths
        self._tables: dict[tuple[str, tuple[str, ...]], DataFrame] = {}
        # id of a Scan/StageRead leaf → what to do with its rows first (information passing probes)
        self.input_hooks: dict[int, Callable[[DataFrame], DataFrame]] = {}
        # id of a Scan → an observer of the raw table read, before its filters (piggybacked statistics)
        self.scan_observers: dict[int, Callable[[DataFrame], DataFrame]] = {}
        # id of a Scan of a partitioned table → the partitions it reads, after summaries of its partition column
        # pruned them (information passing into the file listing)
        self.partition_pruners: dict[int, Callable[[Scan], TableEntry]] = {}
        # stage id → the schema its output was written with: read back without Spark inferring it from a footer
        self.stage_schemas: dict[int, StructType] = {}
        # stage id → its rows computed in the reader's plan, for a stage fused into its consumer (``ip/staging``)
        self.fused: dict[int, Callable[[], DataFrame]] = {}
        # id of a repartition Join → the side to broadcast, now that the earlier stage outputs it reads are
        # measured (``physical.measured_broadcasts``)
        self.measured_broadcasts: dict[int, str] = {}
        # False while a stage runs again after the driver ran out of memory broadcasting: every join repartitions
        self.broadcasts_allowed = True
        # a batch's tables read by several of its queries, each read once for all of them (``shared_scans.py``)
        self.shared_scans: dict[tuple[str, tuple[str, ...]], SharedScan] = {}

    def table(self, entry: TableEntry, columns: frozenset[str] = frozenset()) -> DataFrame:
        """The table's rows: from a batch's shared scan when it holds ``columns`` (``engine/shared_scans.py``),
        else read."""
        key = table_key(entry)  # two scans may read different partitions of one table
        shared = self.shared_scans.get(key)
        if shared is not None and columns <= shared.columns:
            return shared.frame
        if key not in self._tables:
            self._tables[key] = read_table(self.spark, entry)
        return self._tables[key]

    def compile(self, node: Node) -> DataFrame:
        df = self._compile(node)
        hook = self.input_hooks.get(id(node))
        return hook(df) if hook is not None else df

    def _compile(self, node: Node) -> DataFrame:
        if isinstance(node, Scan):
            pruner = self.partition_pruners.get(id(node))
            entry = pruner(node) if pruner is not None else node.table
            read = node.columns + node.filter_only
            source = self.table(entry, frozenset(src for _, src in read))
            # statistics describe whole tables: a scan of some partitions only observes nothing
            observer = self.scan_observers.get(id(node)) if entry is node.table else None
            if observer is not None:  # sees only the columns the scan reads (it keeps Spark's column pruning)
                source = observer(jvm.select_sql(source, list(dict.fromkeys(_quoted(src) for _, src in read))))
            df = jvm.select_sql(source, [f"{_quoted(src)} AS {_quoted(name)}" for name, src in read])
            if node.filters:
                df = df.filter(" AND ".join(f"({render(condition)})" for condition in node.filters))
            return jvm.select_sql(df, [_quoted(name) for name, _ in node.columns]) if node.filter_only else df
        if isinstance(node, StageRead):
            if node.stage_id in self.fused:
                return jvm.select_sql(self.fused[node.stage_id](), [_quoted(c) for c in node.columns])
            reader = self.spark.read
            if node.stage_id in self.stage_schemas:
                reader = reader.schema(self.stage_schemas[node.stage_id])
            return jvm.select_sql(reader.parquet(self.stage_paths[node.stage_id]), [_quoted(c) for c in node.columns])
        if isinstance(node, Values):
            if not node.names:
                return self.spark.range(1).select()  # one row of no columns: SELECT without FROM
            rows = ", ".join("(" + ", ".join(render(value) for value in row) + ")" for row in node.rows)
            return self.spark.sql(f"SELECT * FROM VALUES {rows} AS _values({', '.join(map(_quoted, node.names))})")
        if isinstance(node, Generate):
            child = self.compile(node.child)
            return jvm.select_sql(child, [_quoted(c) for c in node.child.output]
                                  + [f"{_generator_sql(node)} AS ({', '.join(map(_quoted, node.names))})"])
        if isinstance(node, Filter):
            return self.compile(node.child).filter(render(node.condition))
        if isinstance(node, Project):
            return jvm.select_sql(self.compile(node.child), [_aliased(e, name) for name, e in node.items])
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate) and node.grouping_sets is not None:
            return self.grouping_sets(node)
        if isinstance(node, Aggregate):
            return jvm.aggregate_sql(self.compile(node.child), [_aliased(e, name) for name, e in node.groups],
                                     [_aliased(e, name) for name, e in node.aggregates])
        if isinstance(node, Window):
            return jvm.select_sql(self.compile(node.child), [_quoted(name) for name in node.child.output]
                                  + [_aliased(e, name) for name, e in node.items])
        if isinstance(node, Sort):
            return self.compile(node.child).orderBy(*[_sort_column(k) for k in node.keys])
        if isinstance(node, Limit):
            return self.compile(node.child).limit(node.count)
        if isinstance(node, Union):
            return union_frames([self.compile(child).toDF(*node.names) for child in node.inputs])
        raise TypeError(f"cannot compile {type(node).__name__}")

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

    def join(self, node: Join) -> DataFrame:
        left, right = self.compile(node.left), self.compile(node.right)
        side = self.measured_broadcasts.get(id(node))
        if node.physical == "broadcast":
            side = node.broadcast_side or "right"
        if not self.broadcasts_allowed:
            side = None
        if side == "left":
            left = F.broadcast(left)
        elif side == "right":
            right = F.broadcast(right)
        condition = node.condition()
        if condition is None:
            if node.kind in ("semi", "anti"):
                return left.join(right, F.lit(True), _HOW[node.kind])
            return left.crossJoin(right)
        return jvm.join_sql(left, right, render(condition), _HOW[node.kind])


def _aliased(expression, name: str) -> str:
    return f"{render(expression)} AS {_quoted(name)}"


def _sort_column(key):
    column = F.col(_quoted(key.column))
    nulls_first = key.nulls_first if key.nulls_first is not None else not key.descending
    if key.descending:
        return column.desc_nulls_first() if nulls_first else column.desc_nulls_last()
    return column.asc_nulls_first() if nulls_first else column.asc_nulls_last()
