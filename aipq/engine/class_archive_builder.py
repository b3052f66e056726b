"""The background builder of the driver's class-data-sharing archive (``engine/class_archive.py``), started as
``python -m aipq.engine.class_archive_builder``: runs a training workload under ``-XX:ArchiveClassesAtExit`` and
moves the archive into place. The workload is a few TPC-H queries planned by ``pipeline`` and run by the engine's
``run_dag`` with statistics collected in passing, as a command runs them: the JVM classes a run loads, without
reaching above the engine."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

from aipq.catalog import Catalog, TableEntry
from aipq.config import Settings
from aipq.engine import jvm
from aipq.engine.class_archive import (
    DUMP_TIMEOUT_SECONDS,
    PREFIX,
    RECORD_VARIABLE,
    archive_path,
    being_built,
    driver_memory,
    failed_marker,
    lock_path,
)
from aipq.engine.context import RunContext
from aipq.engine.dag_run import RunOptions
from aipq.engine.executor import run_dag
from aipq.engine.statistics import collector_for
from aipq.engine.work_dirs import remove_work_dir
from aipq.pipeline import plan_query
from aipq.tpch import generate as tpch_generate
from aipq.tpch.queries import query_text

# The training runs: (TPC-H query, strategy, broadcast joins) — repartition and broadcast joins, summaries built
# and probed, piggybacked statistics: the classes a run loads.
TRAINING_RUNS = ((3, "always", False), (9, "adaptive", True), (18, "hip", False), (13, "off", True))


def build(final: Path) -> bool:
    """Record the archive with a training workload and move it to ``final``; False when another builder holds
    the lock or the JVM wrote nothing."""
    final.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(final)
    if being_built(final):
        return False
    lock.unlink(missing_ok=True)  # stale
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    writing = final.parent / f"{final.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part"
    scratch = Path(tempfile.mkdtemp(prefix="aipq-class-archive-"))
    try:
        os.environ[RECORD_VARIABLE] = str(writing)
        spark = _train(scratch)
        _stop_and_wait(spark)
        if not (writing.is_file() and writing.stat().st_size > 0):
            return False
        os.replace(writing, final)
        for other in final.parent.glob(f"{PREFIX}*"):
            if other.suffix in (".jsa", ".failed") and other != final:
                other.unlink(missing_ok=True)
        return True
    finally:
        os.environ.pop(RECORD_VARIABLE, None)
        writing.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
        lock.unlink(missing_ok=True)


def _train(home: Path):
    """Run the training workload in a session that records its classes; returns the session."""
    settings = Settings()
    context = RunContext(home, settings)
    _register_tpch(context.catalog, home)
    spark = None
    for number, strategy, broadcast in TRAINING_RUNS:
        run_settings = replace(settings, ip=strategy,
                               broadcast_threshold=settings.broadcast_threshold if broadcast else 0)
        run_context = context.with_settings(run_settings)
        dag = plan_query(query_text(number), context.catalog, run_settings, context.storage).dag
        collector = collector_for(run_context, dag, "class archive")
        record = run_dag(run_context, dag, RunOptions(statistics=collector))
        spark = run_context.spark
        spark.read.parquet(record.result_path).collect()
        remove_work_dir(run_context.storage, record.work_dir)
    return spark


def _register_tpch(catalog: Catalog, home: Path) -> None:
    """TPC-H at SF 0.01 in the scratch home, its tables registered in the home's own catalog."""
    folder = tpch_generate.generate(home, 0.01, 1)
    for table in tpch_generate.TABLES:
        catalog.register(TableEntry("default", table, str(tpch_generate.table_path(folder, table)), "parquet",
                                    tpch_generate.COLUMNS[table]))


def _stop_and_wait(spark) -> None:
    """Stop the session and wait for its JVM to exit, writing the archive as it does."""
    jvm.stop_and_wait(spark, DUMP_TIMEOUT_SECONDS)


def main(final: Path) -> int:
    """The background builder: build, or leave the failure marker when no archive could be made."""
    try:
        if build(final) or being_built(final):
            return 0
    except Exception:  # a cache: a failure is recorded, never raised at the user
        pass
    with contextlib.suppress(OSError):
        failed_marker(final).touch()
    return 1


if __name__ == "__main__":
    if hasattr(os, "nice"):
        os.nice(10)  # the user's next command comes first
    # the archive's path, or (run by hand, e.g. by CI before tests) this Java's and installation's own
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else archive_path(driver_memory())
    sys.exit(1 if target is None else main(target))
