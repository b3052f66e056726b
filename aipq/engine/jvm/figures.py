"""What Spark measured of a job group: I/O figures (``aipq.spark.JobGroupFigures``), rows through counted
filters (``aipq.spark.FilterRowCounts``), join operators (``aipq.spark.PlanJoins``), code generation."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from aipq.engine.jvm.gateway import (
    _RECORD,
    _aipq_class,
    _jvm,
)


def counted_filter(condition: Column, mark: int) -> Column:
    """``condition`` as a filter that Spark keeps as a plan node of its own and that ``filter_row_counts`` finds
    by ``mark`` (a negative number below -2**40) in the executed plan. Being nondeterministic (the CASE on
    ``monotonically_increasing_id``, which is always above the mark), it is never merged with neighbouring
    filters, so its rows in and out are Spark's own SQL metrics of that node. Counting with an observation
    instead would cut whole-stage code generation in two: +0.23 s on 6 M rows here."""
    return F.when(F.monotonically_increasing_id() > F.lit(int(mark)), condition)


def filter_row_counts(spark: SparkSession, job_group: str,
                      marks: Collection[int]) -> dict[int, tuple[int | None, int | None]]:
    """Rows into and out of each ``counted_filter`` of ``marks`` in the SQL executions that ran the jobs of
    ``job_group``, from Spark's SQL status store (the plan graph and its metrics), read in one JVM call by
    ``aipq.spark.FilterRowCounts``. A filter Spark removed or never ran is left out."""
    if not marks:
        return {}
    # the status store is fed asynchronously: the JVM waits for Spark's listener bus first
    found = _aipq_class(spark, "FilterRowCounts").countForGroup(
        spark._jsparkSession, job_group, ",".join(map(str, marks)), _RECENT_EXECUTIONS, 10_000)
    counts: dict[int, tuple[int | None, int | None]] = {}
    for record in filter(None, found.split(";")):
        mark, rows_in, rows_out = record.split(",")
        counts[int(mark)] = (int(rows_in) if rows_in else None, int(rows_out) if rows_out else None)
    return counts


_RECENT_EXECUTIONS = 16  # a stage's write and its subqueries are among the last few SQL executions


@dataclass(frozen=True)
class ShuffleFigures:
    shuffle_read_bytes: int = 0
    shuffle_read_records: int = 0
    shuffle_write_bytes: int = 0
    shuffle_write_records: int = 0
    input_bytes: int = 0
    input_records: int = 0
    output_bytes: int = 0
    output_records: int = 0


def job_group_figures(spark: SparkSession, job_group: str) -> ShuffleFigures:
    """Spark's own I/O metrics summed over the completed stages of a job group."""
    return job_groups_figures(spark, [job_group])[0]


def job_groups_figures(spark: SparkSession, job_groups: Sequence[str]) -> list[ShuffleFigures]:
    """Spark's own I/O metrics summed over the completed stages of each job group (from its status store, in one
    call to ``aipq.spark.JobGroupFigures``, after the listener bus has fed the store)."""
    if not job_groups:
        return []
    if any(_RECORD in group for group in job_groups):
        raise ValueError("a job group's name holds a NUL character")
    text = _aipq_class(spark, "JobGroupFigures").sums(spark.sparkContext._jsc.sc(), _RECORD.join(job_groups), 10_000)
    return [ShuffleFigures(*(int(value) for value in record.split(","))) for record in text.split(_RECORD)]


def codegen_compilations(spark: SparkSession) -> int:
    """Classes Spark's code generator has compiled in this JVM (a cache hit compiles nothing)."""
    return int(_jvm(spark).org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def join_strategies(spark: SparkSession, job_group: str) -> dict[str, int]:
    """The joins Spark ran in a job group, by physical operator (``SortMergeJoin``, ``BroadcastHashJoin``, …),
    from the SQL status store's plans: with AQE on, the final adaptive plan (``aipq.spark.PlanJoins``)."""
    text = _aipq_class(spark, "PlanJoins").count(spark._jsparkSession, job_group, 10_000)
    return {name: int(count) for name, count in (pair.split("=") for pair in text.split(",") if pair)}

