"""``aipq calibrate``: the unit costs of the benefit model measured on the session's master (this machine, or
a cluster with ``--master``) with small Spark and storage micro-benchmarks, kept per master.

Pages are counted the way the estimator counts them (rows × the estimator's row width, ``PAGE_BYTES`` each),
so that the measured seconds per page apply to its page counts. The model's figures are per task (the paper's
M is pages per map task), and the micro-benchmarks run as many tasks as there are cores, so the Spark page and
row costs are the job's seconds per page or row times the tasks that ran at once:

- C_R: reading a parquet table through Spark (scan, decode, rows), per page;
- C_W: writing it as parquet, beyond producing the rows, per page;
- C_T: shuffling it (hash repartition: map-side write, fetch, reduce-side read), beyond producing it, per page;
- C_S: sorting the shuffled rows in memory (as a sort-merge join does), beyond shuffling them, per page;
- U_R, U_W: reading and writing a summary file's bytes on the work directory's store, per byte;
- U_T: copying a summary file's bytes (read, then written elsewhere on that store), per byte;
- probe: probing a Bloom filter (xxhash64 + bit tests) per row, beyond reading it; per task, so ×parallelism;
- build: building a summary (Bloom filter and HLL key sketch) inside a write's observation, per row and core.

Each figure is the median of a few runs after a warm-up.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable

from aipq.engine.context import RunContext
from aipq.engine.storage import Storage, join
from aipq.estimator.cost_model import UnitCosts
from aipq.estimator.parameters import PAGE_BYTES

ROW_WIDTH = 8 + 8 + 24 + 24  # two BIGINT and two string columns, as the estimator sizes rows


def _median_seconds(action: Callable[[], object], runs: int) -> float:
    action()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _observed(frame, metrics: list) -> None:
    from pyspark.sql import Observation

    frame.observe(Observation(), *metrics).write.format("noop").mode("overwrite").save()


def _bytes_costs(storage: Storage, folder: str, size: int, runs: int) -> tuple[float, float, float]:
    """U_R, U_W, U_T per byte: a summary's file written, read and copied (read, then written elsewhere) on
    the work directory's store by the driver, as runs store their summaries."""
    data = os.urandom(1 << 20) * (size >> 20)
    source, copy = join(folder, "bytes.bin"), join(folder, "copy.bin")
    write_seconds = _median_seconds(lambda: storage.write_bytes(source, data), runs)
    read_seconds = _median_seconds(lambda: storage.read_bytes(source), runs)
    copy_seconds = _median_seconds(lambda: storage.write_bytes(copy, storage.read_bytes(source)), runs)
    return read_seconds / len(data), write_seconds / len(data), copy_seconds / len(data)


def measure(context: RunContext, megabytes: int = 64, runs: int = 3) -> tuple[UnitCosts, float, float]:
    """Unit costs and the probe and build costs per row, from about ``megabytes`` of rows, on the context's
    master and work directory (a cluster's executors write where its runs write)."""
    from pyspark.sql import functions as F

    from aipq.engine import jvm

    rows = max(megabytes * PAGE_BYTES // ROW_WIDTH, 10_000)
    pages = rows * ROW_WIDTH / PAGE_BYTES
    spark, storage = context.spark, context.storage
    folder = join(context.runs_dir, f"calibrate-{uuid.uuid4().hex[:8]}")
    storage.mkdirs(folder)
    try:
        generated = spark.range(0, rows, numPartitions=2).selectExpr(
            "id", "id * 7 AS k", "sha2(CAST(id AS STRING), 256) AS a", "sha2(CAST(id + 1 AS STRING), 256) AS b")
        table = join(folder, "table")
        generated.write.parquet(table)
        noop = _median_seconds(lambda: generated.write.format("noop").mode("overwrite").save(), runs)
        target = join(folder, "written")
        write = _median_seconds(lambda: generated.write.mode("overwrite").parquet(target), runs)
        read_back = spark.read.parquet(table)
        read = _median_seconds(lambda: read_back.write.format("noop").mode("overwrite").save(), runs)
        shuffled = _median_seconds(
            lambda: generated.repartition(8, "k").write.format("noop").mode("overwrite").save(), runs)
        sorted_after = _median_seconds(lambda: generated.repartition(8, "k").sortWithinPartitions("k", "a")
                                       .write.format("noop").mode("overwrite").save(), runs)
        # a filter of 1 % of the keys, probed with every row, against a plain filter keeping the same rows
        hashed = F.xxhash64(F.col("k"))
        kept = read_back.filter("id % 100 = 0")
        bloom = kept.agg(jvm.bloom_filter_agg(spark, hashed, rows // 100 + 1, rows // 10 + 64).alias("f")).first()["f"]
        probe_frame = read_back.filter(jvm.might_contain(spark, jvm.bloom_broadcast(spark, bytes(bloom)), hashed))
        probed = _median_seconds(lambda: probe_frame.write.format("noop").mode("overwrite").save(), runs)
        plain = _median_seconds(lambda: kept.write.format("noop").mode("overwrite").save(), runs)
        counted = _median_seconds(lambda: _observed(generated, [F.count(F.lit(1))]), runs)
        built = _median_seconds(lambda: _observed(generated, [
            F.count(F.lit(1)), F.expr("hll_sketch_agg(k, 12)"),
            jvm.bloom_filter_agg(spark, hashed, rows, max(rows * 10 // 64 * 64, 64))]), runs)
        u_read, u_write, u_transfer = _bytes_costs(storage, folder, 32 << 20, runs)
        parallelism = spark.sparkContext.defaultParallelism
        # all tasks ran at once: a task's page takes the job's seconds per page times the tasks running
        per_task_page = parallelism / pages
        costs = UnitCosts(
            c_read=max(read * per_task_page, 1e-6), c_write=max((write - noop) * per_task_page, 1e-6),
            c_transfer=max((shuffled - noop) * per_task_page, 1e-6),
            u_read=u_read, u_write=u_write, u_transfer=u_transfer,
            c_sort=max((sorted_after - shuffled) * per_task_page, 1e-6))
        probe = max((probed - plain) / rows * parallelism, 1e-10)
        build = max((built - counted) / rows * parallelism, 1e-10)
        return costs, probe, build
    finally:
        storage.delete(folder)
