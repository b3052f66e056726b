"""Files through Hadoop's FileSystem (``aipq.spark.Storage``) and parquet footers
(``aipq.spark.FooterStatistics``), and the session's Hadoop settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from aipq.engine.jvm.gateway import (
    _FIELD,
    _RECORD,
    _aipq_class,
)


@dataclass(frozen=True)
class FooterColumn:
    """A column's statistics over every row group of some parquet files, from their footers."""

    nulls: int
    min: str | None  # as parquet's stringifier renders it (dates ISO, decimals with their scale); None: all null
    max: str | None


@dataclass(frozen=True)
class ParquetFooters:
    """What the footers of some parquet files hold: their rows, and statistics of the columns every row group
    has them for."""

    rows: int | None  # None: a file cannot be read as parquet
    columns: dict[str, FooterColumn]


def parquet_footers(spark: SparkSession, files: Sequence[str], columns: Sequence[str]) -> ParquetFooters:
    """Rows of the parquet ``files``, and nulls, min and max of ``columns`` (top-level, any case) over all their
    row groups, read from the footers with Spark's parquet-mr (no data page is read) by
    ``aipq.spark.FooterStatistics`` in one call. A column is left out when any row group lacks its statistics;
    nothing is known when the files cannot be read as parquet."""
    found_text = _aipq_class(spark, "FooterStatistics").read(
        spark.sparkContext._jsc.hadoopConfiguration(), _RECORD.join(files), _RECORD.join(columns))
    if found_text is None:
        return ParquetFooters(None, {})
    rows, *records = found_text.split(_RECORD)
    found = {}
    for record in records:
        name, nulls, has_values, low, high = record.split(_FIELD)
        values = has_values == "1"
        found[name] = FooterColumn(int(nulls), low if values else None, high if values else None)
    return ParquetFooters(int(rows), found)


def parquet_footer_statistics(spark: SparkSession, files: Sequence[str],
                              columns: Sequence[str]) -> dict[str, FooterColumn]:
    """Nulls, min and max of ``columns`` from the footers of the parquet ``files`` (``parquet_footers``)."""
    return parquet_footers(spark, files, columns).columns


class HadoopFiles:
    """Hadoop FileSystem operations on any URI Spark reads (``aipq.spark.Storage``), one py4j call each; the
    file primitives of ``engine/storage.py`` for every store that is not a plain local path."""

    def __init__(self, spark: SparkSession):
        self._storage = _aipq_class(spark, "Storage")
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def qualify(self, uri: str) -> str:
        return self._storage.qualify(self._conf, uri)

    def status(self, uri: str) -> tuple[bool, int, int] | None:
        """(is a directory, length, modified ms), or None when nothing is there."""
        text = self._storage.status(self._conf, uri)
        if not text:
            return None
        kind, length, modified = text.split(_FIELD)
        return kind == "d", int(length), int(modified)

    def data_files(self, uri: str) -> list[tuple[str, str, int, int]] | None:
        """(path, path relative to ``uri``, length, modified ms) of each data file; None when nothing is there."""
        text = self._storage.dataFiles(self._conf, uri)
        if text is None:
            return None
        files = []
        for record in text.split(_RECORD):
            if record:
                path, relative, length, modified = record.split(_FIELD)
                files.append((path, relative, int(length), int(modified)))
        return files

    def children(self, uri: str) -> list[tuple[str, bool, int]]:
        """(path, is a directory, modified ms) of each entry directly under ``uri``."""
        entries = []
        for record in self._storage.children(self._conf, uri).split(_RECORD):
            if record:
                path, kind, modified = record.split(_FIELD)
                entries.append((path, kind == "d", int(modified)))
        return entries

    def mkdirs(self, uri: str) -> bool:
        return self._storage.mkdirs(self._conf, uri)

    def rename(self, source: str, target: str) -> bool:
        return self._storage.rename(self._conf, source, target)

    def delete(self, uri: str, recursive: bool = True) -> bool:
        return self._storage.delete(self._conf, uri, recursive)

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._storage.writeBytes(self._conf, uri, bytearray(data))

    def read_bytes(self, uri: str) -> bytes:
        return bytes(self._storage.readBytes(self._conf, uri))

    def append_to_local(self, uris: Sequence[str], local_file: str) -> int:
        return self._storage.appendToLocal(self._conf, _RECORD.join(uris), local_file)

    def content_digests(self, uris: Sequence[str]) -> list[str]:
        """What identifies each file's content (the store's checksum, a parquet footer's digest or the bytes'),
        in one call (``Storage.contentDigests``)."""
        return self._storage.contentDigests(self._conf, _RECORD.join(uris)).split(_RECORD) if uris else []


def hadoop_setting(spark: SparkSession, key: str) -> str | None:
    """A setting of the session's Hadoop configuration (where hive-site.xml's land)."""
    value = spark.sparkContext._jsc.hadoopConfiguration().get(key)
    return None if value is None else str(value)

