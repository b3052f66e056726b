"""What staging costs: aipq's stage DAG against the same query handed whole to ``spark.sql``.

Both run in one session with the same SQL settings (shuffle partitions, broadcast threshold, AQE and Spark's
runtime filters off), interleaved so that machine drift hits both alike, and both write their result as parquet.
"""

from __future__ import annotations

import statistics
import time
import uuid
from dataclasses import dataclass, field, replace

import sqlglot

from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.executor import run_dag
from aipq.engine.session import LONG_DECIMALS_SETTING, read_table, sql_conf, stage_sql_conf
from aipq.engine.storage import join
from aipq.engine.work_dirs import remove_work_dir
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text


@dataclass
class StagingResult:
    query: int
    broadcast_threshold: int
    stages: int
    aipq_seconds: list[float] = field(default_factory=list)
    spark_seconds: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.aipq_seconds) / statistics.median(self.spark_seconds)


def plain_spark_conf(settings: Settings) -> dict[str, str]:
    conf = stage_sql_conf(settings)
    conf["spark.sql.autoBroadcastJoinThreshold"] = str(settings.broadcast_threshold or -1)
    conf[LONG_DECIMALS_SETTING] = "false"  # Spark's own arithmetic, as spark.sql has it
    return conf


def _time_spark_sql(context: RunContext, sql: str, scratch: str) -> float:
    target = join(scratch, f"spark-{time.monotonic_ns()}")
    with sql_conf(context.spark, plain_spark_conf(context.settings)):
        started = time.perf_counter()
        context.spark.sql(sql).write.parquet(target)
        seconds = time.perf_counter() - started
    context.storage.delete(target)
    return seconds


def _time_aipq(context: RunContext, dag) -> float:
    started = time.perf_counter()
    record = run_dag(context, dag)
    seconds = time.perf_counter() - started
    remove_work_dir(context.storage, record.work_dir)
    return seconds


def view_name(database: str, name: str) -> str:
    """The temporary view a registered table is known by in ``spark.sql`` (views cannot carry a database)."""
    return name if database in ("", "default") else f"{database}__{name}"


def bench_session(context: RunContext) -> str:
    """Every registered table made visible to ``spark.sql`` (see ``spark_sql_text``); a scratch folder beside
    the runs' work directories, where every executor writes (the caller removes it)."""
    for entry in context.catalog.entries():
        read_table(context.spark, entry).createOrReplaceTempView(view_name(entry.database, entry.name))
    scratch = join(context.runs_dir, f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}")
    context.storage.mkdirs(scratch)
    return scratch


def spark_sql_text(text: str, dialect: str) -> str:
    """The query in Spark's dialect, reading the bench session's views. A table renamed to its view keeps its
    own name as an alias, so that columns qualified with it (``time_dim.t_time_sk``) still resolve."""
    tree = sqlglot.parse_one(text, read=dialect)
    for table in tree.find_all(sqlglot.exp.Table):
        if table.db:
            if not table.alias:
                table.set("alias", sqlglot.exp.TableAlias(this=sqlglot.exp.to_identifier(table.name)))
            table.set("this", sqlglot.exp.to_identifier(view_name(table.db, table.name)))
            table.set("db", None)
    return tree.sql(dialect="spark")


def compare_staging(context: RunContext, queries: list[int], thresholds: list[int], repeat: int,
                    progress=None) -> list[StagingResult]:
    scratch = bench_session(context)
    results = []
    try:
        for number in queries:
            text = query_text(number)
            spark_sql = spark_sql_text(text, context.settings.dialect)
            for threshold in thresholds:
                run = context.with_settings(replace(context.settings, broadcast_threshold=threshold))
                dag = plan_query(text, run.catalog, run.settings, run.storage, costing=run.join_costing()).dag
                result = StagingResult(number, threshold, len(dag.stages))
                _time_aipq(run, dag)  # warm-up
                _time_spark_sql(run, spark_sql, scratch)
                for _ in range(repeat):
                    result.aipq_seconds.append(_time_aipq(run, dag))
                    result.spark_seconds.append(_time_spark_sql(run, spark_sql, scratch))
                    if progress:
                        progress()
                results.append(result)
    finally:
        context.storage.delete(scratch)
    return results
