"""What staging costs: aipq's stage DAG against the same query handed whole to ``spark.sql``.

Both run in one session with the same SQL settings (shuffle partitions, broadcast threshold, AQE and Spark's
runtime filters off), interleaved so that machine drift hits both alike, and both write their result as parquet.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import sqlglot

from aipq.catalog import Catalog
from aipq.config import Settings
from aipq.engine.executor import remove_work_dir, run_dag
from aipq.engine.session import get_session, read_table, sql_conf, stage_sql_conf
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
    return conf


def _time_spark_sql(spark, sql: str, settings: Settings, scratch: Path) -> float:
    target = scratch / f"spark-{time.monotonic_ns()}"
    with sql_conf(spark, plain_spark_conf(settings)):
        started = time.perf_counter()
        spark.sql(sql).write.parquet(str(target))
        seconds = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    return seconds


def _time_aipq(spark, dag, settings: Settings, home: Path) -> float:
    started = time.perf_counter()
    record = run_dag(spark, dag, settings, home)
    seconds = time.perf_counter() - started
    remove_work_dir(record)
    return seconds


def view_name(database: str, name: str) -> str:
    """The temporary view a registered table is known by in ``spark.sql`` (views cannot carry a database)."""
    return name if database in ("", "default") else f"{database}__{name}"


def bench_session(home: Path, base: Settings):
    """The session with every registered table visible to ``spark.sql`` (see ``spark_sql_text``), the catalog,
    and a scratch folder (the caller removes it)."""
    spark = get_session(base, home)
    catalog = Catalog(home)
    for entry in catalog.entries():
        read_table(spark, entry).createOrReplaceTempView(view_name(entry.database, entry.name))
    return spark, catalog, Path(tempfile.mkdtemp(prefix="aipq-bench-", dir=home))


def spark_sql_text(text: str, dialect: str) -> str:
    """The query in Spark's dialect, reading the bench session's views."""
    tree = sqlglot.parse_one(text, read=dialect)
    for table in tree.find_all(sqlglot.exp.Table):
        if table.db:
            table.set("this", sqlglot.exp.to_identifier(view_name(table.db, table.name)))
            table.set("db", None)
    return tree.sql(dialect="spark")


def compare_staging(home: Path, queries: list[int], thresholds: list[int], repeat: int,
                    base: Settings, progress=None) -> list[StagingResult]:
    spark, catalog, scratch = bench_session(home, base)
    results = []
    try:
        for number in queries:
            text = query_text(number)
            spark_sql = spark_sql_text(text, base.dialect)
            for threshold in thresholds:
                settings = replace(base, broadcast_threshold=threshold)
                dag = plan_query(text, catalog, settings).dag
                result = StagingResult(number, threshold, len(dag.stages))
                _time_aipq(spark, dag, settings, home)  # warm-up
                _time_spark_sql(spark, spark_sql, settings, scratch)
                for _ in range(repeat):
                    result.aipq_seconds.append(_time_aipq(spark, dag, settings, home))
                    result.spark_seconds.append(_time_spark_sql(spark, spark_sql, settings, scratch))
                    if progress:
                        progress()
                results.append(result)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results
