"""The background builder of the driver's class-data-sharing archive (``engine/class_archive.py``): runs a
training workload under ``-XX:ArchiveClassesAtExit`` and moves the archive into place. It lives at the top of the
package, beside ``app``, because it runs whole queries; the engine only starts it."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

from aipq import app
from aipq.config import Settings
from aipq.engine import jvm
from aipq.engine.class_archive import (
    DUMP_TIMEOUT_SECONDS,
    PREFIX,
    RECORD_VARIABLE,
    being_built,
    failed_marker,
    lock_path,
)
from aipq.engine.context import RunContext
from aipq.pipeline import plan_query
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
    app.generate_tpch(RunContext(home), 0.01, "default")
    context = RunContext(home, settings)
    spark = None
    for number, strategy, broadcast in TRAINING_RUNS:
        run_settings = replace(settings, ip=strategy,
                               broadcast_threshold=settings.broadcast_threshold if broadcast else 0)
        run_context = context.with_settings(run_settings)
        run = app.execute(plan_query(query_text(number), context.catalog, run_settings, context.storage),
                          run_context)
        spark = run.spark
        spark.read.parquet(run.record.result_path).collect()
        run.close()
    return spark


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
    sys.exit(main(Path(sys.argv[1])))
