"""Column sketches gathered inside generated code (``aipq.spark.ColumnSketches``): HLL sketches, row and null
counts, width sums and value samples."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from aipq.engine.jvm.gateway import (
    _RECORD,
    _aipq_class,
    _frame,
    _jvm,
)

# DataSketches' memory library (inside Spark's catalyst JAR) prints "Warning: Java versions > Java 11 can only
# operate in restricted mode where no off-heap operations are allowed!" on the JVM's stderr as this class loads:
# in the middle of the first query that sketches a column. aipq's sketches are on-heap; the line tells its users
# nothing.
SKETCH_MEMORY_CLASS = "org.apache.datasketches.memory.internal.ResourceImpl"


def load_sketch_memory_quietly(spark: SparkSession) -> bool:
    """Load DataSketches' memory class with the JVM's stderr muted for that moment; True when the class was
    found (False: a Spark without it, nothing to quiet)."""
    from py4j.protocol import Py4JError

    jvm = _jvm(spark)
    system = jvm.java.lang.System
    stderr = system.err
    system.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
    try:
        jvm.java.lang.Class.forName(SKETCH_MEMORY_CLASS)
        return True
    except Py4JError:
        return False
    finally:
        system.setErr(stderr)


@dataclass(frozen=True)
class SketchedColumn:
    """What ``ColumnSketcher`` gathered for one column."""

    rows: int  # rows seen
    present: int  # of which non-null
    width_sum: int  # sum of the widths passed with the values
    sketch: bytes | None  # as ``hll_sketch_agg`` serializes it; None when every value was null
    sample: tuple[str, ...] = ()  # text columns: a uniform sample of the distinct values (bottom-k by hash)


class ColumnSketcher:
    """HLL sketches, row and null counts and width sums of a few columns, gathered inside generated code by the
    JVM accumulator ``aipq.spark.ColumnSketches`` (java/src; its comment says how and why).

    ``columns``: per column (the SQL of the value to sketch, BIGINT or STRING; the SQL of an INT width for a
    BIGINT value or None; whether the value is STRING, whose width is its byte count; the table column the value
    is computed from, or None). ``observe`` puts the always-true predicate feeding them on a raw table read;
    over a columnar scan the session extension ``aipq.spark.SketchBatches`` feeds them batch by batch instead,
    from the named table columns. ``results`` reads the figures once the job ran."""

    def __init__(self, spark: SparkSession, lg_k: int, columns: Sequence[tuple[str, str | None, bool, str | None]]):
        self._spark = spark
        self._count = len(columns)
        self._accumulator = _aipq_class(spark, "ColumnSketches").register(spark._jsparkSession, self._count, lg_k)
        self._spec = _RECORD.join(f"{'text' if text else 'long'}{_RECORD}{value}{_RECORD}{width or ''}"
                                  f"{_RECORD}{source or ''}" for value, width, text, source in columns)

    def observe(self, df: DataFrame) -> DataFrame:
        return _frame(self._spark, self._accumulator.observe(df._jdf, self._spec))

    def results(self) -> list[SketchedColumn]:
        data, offset, found = bytes(self._accumulator.results()), 0, []
        for _ in range(self._count):
            seen, present, widths, length = struct.unpack_from(">qqqi", data, offset)
            offset += 28
            sketch = data[offset:offset + length] if length >= 0 else None
            offset += max(length, 0)
            sample, offset = _sample_values(data, offset)
            found.append(SketchedColumn(seen, present, widths, sketch, sample))
        return found


def _sample_values(data: bytes, offset: int) -> tuple[tuple[str, ...], int]:
    """A column's sampled values as ``ColumnSketches.results`` lays them out: a count, then length and UTF-8."""
    (count,), offset = struct.unpack_from(">i", data, offset), offset + 4
    values = []
    for _ in range(count):
        (length,), offset = struct.unpack_from(">i", data, offset), offset + 4
        values.append(data[offset:offset + length].decode("utf-8"))
        offset += length
    return tuple(values), offset

