"""Deliver a run's result: rows for display, or a file written to a temporary place and moved into place only
when complete, so an interrupted run never leaves a half-written output.

The file formats keep every value as it was:
- CSV (RFC 4180): a header line, then one line per row; a field holding a comma, a quote, a line break or
  leading or trailing spaces is quoted, with a quote inside written twice; NULL is an empty field and the empty
  string ``""``. So a one-column row whose value is NULL is an empty line (DuckDB reads it back as NULL, Python's
  ``csv`` as a row with no field). Values are Spark's text for their type (``CAST(x AS STRING)``: dates
  ``2024-01-31``, timestamps ``2024-01-31 12:00:00.5``); binary values are hex and nested values JSON.
- JSON lines: one object per row with every column, a NULL as ``null``.
- Parquet: one file, the result's own types.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import PurePath
from typing import BinaryIO

from aipq.engine.storage import Storage, join, parent
from aipq.errors import BadInputError

OUTPUT_FORMATS = ("csv", "json", "parquet")
EXTENSION_FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}


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


def output_format(target: str, given: str | None) -> str:
    """The format of ``--output target``: ``--format`` when given, else the file's extension."""
    if given is not None and given != "table":
        return given
    found = EXTENSION_FORMATS.get(PurePath(target).suffix.lower())
    if found is None:
        raise BadInputError(f"cannot tell the format of --output {target} from its extension",
                            hint="name it .csv, .json (JSON lines) or .parquet, or give --format csv|json|parquet")
    return found


@dataclass(frozen=True)
class Result:
    """Where a run's result is: a folder of parquet, or of CSV or JSON lines when the final stage wrote the
    requested format straight away (``engine/executor.run_dag``'s ``result_format``)."""

    path: str
    names: tuple[str, ...]
    format: str = "parquet"


def head_rows(spark, result: Result, limit: int) -> list[tuple]:
    rows = spark.read.parquet(result.path).toDF(*unique_names(result.names)).take(limit)
    return [tuple(row) for row in rows]


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _csv_field_sql(name: str, data_type: str) -> str:
    """Spark SQL for one column's CSV field, quoted as RFC 4180 asks."""
    column = _quote(name)
    if data_type == "binary":
        text = f"hex({column})"
    elif data_type.startswith(("array", "map", "struct")):
        text = f"to_json({column})"
    else:
        text = f"CAST({column} AS STRING)"
    return (f"CASE WHEN {column} IS NULL THEN '' WHEN {text} = '' THEN '\"\"' "
            f"WHEN {text} RLIKE '[\",\\\\r\\\\n]|^\\\\s|\\\\s$' "
            f"THEN concat('\"', replace({text}, '\"', '\"\"'), '\"') ELSE {text} END")


def _csv_header(names: list[str]) -> bytes:
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(names)
    return line.getvalue().encode("utf-8")


TEXT_FORMATS = ("csv", "json")


def write_text_frame(frame, names: tuple[str, ...], fmt: str, folder: str) -> None:
    """``frame``'s rows as CSV lines (no header) or JSON lines in Spark's output folder ``folder``: one part per
    task, named in partition order."""
    frame = frame.toDF(*unique_names(names))
    if fmt == "csv":
        line = "concat_ws(',', " + ", ".join(
            _csv_field_sql(f.name, f.dataType.simpleString()) for f in frame.schema.fields) + ")"
        frame.selectExpr(f"{line} AS value").write.option("lineSep", "\n").text(folder)
    else:
        frame.write.option("ignoreNullFields", "false").json(folder)


def _parts(storage: Storage, folder: str) -> list[str]:
    return [f.path for f in storage.data_files(folder) or [] if f.relative.startswith("part-")]


def _formatted_parts(spark, storage: Storage, result: Result, fmt: str, folder: str) -> list[str]:
    """The result's files in ``fmt``, in order: as the final stage wrote them when it wrote ``fmt`` (a result
    straight to its destination), else converted from its parquet into ``folder``."""
    if result.format == fmt and fmt in TEXT_FORMATS:
        return _parts(storage, result.path)
    frame = spark.read.parquet(result.path).coalesce(1)
    if fmt == "parquet":
        frame.toDF(*unique_names(result.names)).write.parquet(folder)
    else:
        write_text_frame(frame, result.names, fmt, folder)
    return _parts(storage, folder)


def write_output(spark, storage: Storage, result: Result, target: str, fmt: str) -> None:
    """The result in the driver-local file ``target``, put in place only once complete."""
    if fmt not in OUTPUT_FORMATS:
        raise BadInputError(f"cannot write format {fmt!r}", hint=f"use one of {', '.join(OUTPUT_FORMATS)}")
    folder = join(parent(result.path), f"output-{fmt}")
    try:
        parts = _formatted_parts(spark, storage, result, fmt, folder)
        if fmt == "parquet" and len(parts) != 1:
            raise RuntimeError(f"expected one parquet file, found {len(parts)}")
        header = _csv_header(unique_names(result.names)) if fmt == "csv" else b""
        storage.assemble_local(parts, target, header)
    finally:
        storage.delete(folder)


def stream_output(spark, storage: Storage, result: Result, fmt: str, out: BinaryIO) -> None:
    """The result as CSV or JSON lines on ``out`` (stdout), in the same form a file would hold."""
    folder = join(parent(result.path), f"output-{fmt}")
    try:
        parts = _formatted_parts(spark, storage, result, fmt, folder)
        out.write(_csv_header(unique_names(result.names)) if fmt == "csv" else b"")
        storage.copy_to(parts, out)
        out.flush()
    finally:
        storage.delete(folder)
