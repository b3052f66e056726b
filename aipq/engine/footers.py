"""What a parquet table's files tell without reading a row: its rows, and its columns' nulls, min and max, from
their footers. Plans over tables the statistics repository does not know yet are priced with these."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from aipq.catalog import TableEntry
from aipq.engine import jvm
from aipq.files import FileSource
from aipq.stats.fingerprint import data_files
from aipq.stats.repository import ColumnStats

INTEGRAL = ("tinyint", "smallint", "int", "bigint")


@dataclass(frozen=True)
class FooterStatistics:
    """What a parquet table's footers tell without reading a row."""

    rows: int
    columns: dict[str, ColumnStats]  # by lower-case name; a partition column (not in the files) is left out


def parquet_paths(files: FileSource, entry: TableEntry) -> list[str]:
    """The data files of a table's folders (a partitioned table's, each partition's)."""
    return [path for folder in entry.data_paths() for path in data_files(files, folder).paths]


def footer_rows(spark, files: FileSource, entry: TableEntry) -> int | None:
    """A parquet table's rows from its files' footers; None for other formats, no files found, or footers that
    cannot be read."""
    paths = parquet_paths(files, entry) if entry.format == "parquet" else []
    return jvm.parquet_footers(spark, paths, []).rows if paths else None


def footer_statistics(spark, files: FileSource, entry: TableEntry) -> FooterStatistics | None:
    """A parquet table's rows, and its columns' nulls, min and max, and for an integral column at most
    max − min + 1 distinct values (a surrogate key's range bounds its distinct count: TPC-H's foreign keys),
    from its files' footers in one JVM call. Other columns' distinct counts stay unknown (0). None for other
    formats or files that are not parquet. For planning queries over tables without statistics."""
    if entry.format != "parquet":
        return None
    types = entry.column_types()
    footers = jvm.parquet_footers(spark, parquet_paths(files, entry), list(types))
    if footers.rows is None:
        return None
    rows, stats = footers.rows, {}
    for column, footer in footers.columns.items():
        data_type = types.get(column.lower(), "")
        ndv = 0.0
        if data_type in INTEGRAL and footer.min is not None and footer.max is not None:
            with contextlib.suppress(ValueError):
                ndv = float(min(rows - footer.nulls, int(footer.max) - int(footer.min) + 1))
        stats[column.lower()] = ColumnStats(column.lower(), data_type, rows, footer.nulls, max(ndv, 0.0), 0, 0.0,
                                            footer.min, footer.max, collected_by="parquet footers")
    return FooterStatistics(rows, stats)
