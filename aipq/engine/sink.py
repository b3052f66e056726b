"""Deliver a run's result: rows for display, or a file written to a temporary place and moved into place only
when complete, so an interrupted run never leaves a half-written output."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from aipq.errors import BadInputError

OUTPUT_FORMATS = ("csv", "json", "parquet")


def unique_names(names: tuple[str, ...]) -> list[str]:
    """Column names a file can hold, spelled as the query wrote them; a name that repeats another (Spark
    compares names case-insensitively) gets a numeric suffix."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, n = name, 2
        while candidate.lower() in taken:
            candidate, n = f"{name}_{n}", n + 1
        taken.add(candidate.lower())
        result.append(candidate)
    return result


def result_frame(spark, result_path: Path, names: tuple[str, ...]):
    df = spark.read.parquet(str(result_path))
    return df.toDF(*unique_names(names))


def head_rows(spark, result_path: Path, names: tuple[str, ...], limit: int) -> list[tuple]:
    rows = result_frame(spark, result_path, names).take(limit)
    return [tuple(row) for row in rows]


def write_output(spark, result_path: Path, names: tuple[str, ...], target: Path, fmt: str) -> None:
    if fmt not in OUTPUT_FORMATS:
        raise BadInputError(f"cannot write format {fmt!r}", hint=f"use one of {', '.join(OUTPUT_FORMATS)}")
    target = Path(target).resolve()
    if target.is_dir():
        raise BadInputError(f"--output {target} is a directory", hint="give a file path")
    if not target.parent.is_dir():
        raise BadInputError(f"the folder of --output ({target.parent}) does not exist")
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        writer = result_frame(spark, result_path, names).coalesce(1).write.mode("overwrite")
        if fmt == "csv":
            writer = writer.option("header", "true")
        getattr(writer, fmt)(str(staging / "data"))
        parts = sorted((staging / "data").glob("part-*"))
        if not parts and fmt in ("csv", "json"):  # Spark writes no file for an empty text result
            empty = staging / "empty"
            empty.write_text(",".join(unique_names(names)) + "\n" if fmt == "csv" else "")
            parts = [empty]
        if len(parts) != 1:
            raise RuntimeError(f"expected one output file, found {len(parts)}")
        os.replace(parts[0], target)  # atomic within one file system
    finally:
        shutil.rmtree(staging, ignore_errors=True)
