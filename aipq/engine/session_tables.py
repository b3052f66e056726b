"""The names a session handed to aipq (``aipq.sql(..., spark=…)``) knows beyond aipq's catalog, found as
``spark.sql`` finds them on that session: its temporary views first (a temporary view shadows a table of the same
name), ``global_temp.NAME`` for the application's global temporary views, and after aipq's own catalog the
tables of the session's catalog. Each is read by Spark by its name.

A temporary view that is a plain parquet read (``spark.read.parquet(path).createOrReplaceTempView(name)``, the
usual way a PySpark program names its files) is still read by its name, but it is known by its files: when the
files Spark listed for it are the files there now, its entry's path is theirs, so that its size, its statistics
and the stage cache's fingerprints are those files', as for a table of aipq's catalog. When they differ (the
files changed since the view was made), Spark reads the view's own listing and aipq cannot tell which rows that
is: the view is then a name alone, as any other view."""

from __future__ import annotations

from urllib.parse import urlparse

from aipq.catalog import DEFAULT_DATABASE, SPARK_CATALOG_PREFIX, TableEntry
from aipq.engine import jvm
from aipq.engine.storage import Storage, is_local, local_path


def _entry(spark, database: str, name: str, read_as: str, storage: Storage | None = None) -> TableEntry | None:
    try:
        frame = spark.table(read_as)
        schema = frame.schema
    except Exception:  # noqa: BLE001 — the session cannot read it (a view over a table since dropped): not here
        return None
    columns = tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)
    files = _files_read(frame, storage) if storage is not None else None
    if files is not None:
        return TableEntry(database, name, files, "parquet", columns, source="view")
    return TableEntry(database, name, f"{SPARK_CATALOG_PREFIX}{read_as}", "spark", columns, source="spark")


def _files_read(frame, storage: Storage) -> str | None:
    """The path a view reads as plain parquet, when the files Spark listed for it are the files there now."""
    found = jvm.plain_parquet_read(frame)
    if found is None:
        return None
    root, listed = found
    there = storage.data_files(root) or []
    now = sorted((urlparse(f.path).path, f.length, f.modified_ms) for f in there)
    if not listed or now != sorted((f.path, f.length, f.modified_ms) for f in listed):
        return None
    return local_path(root) if is_local(root) else root  # as a local table is registered: its statistics' key


class SessionTemporaryViews:
    """The session's temporary views (an unqualified name) and the global ones (``global_temp.NAME``): looked
    up before aipq's catalog, as Spark resolves them before its tables."""

    def __init__(self, spark, storage: Storage):
        self.spark = spark
        self.storage = storage
        self.global_database = spark.conf.get("spark.sql.globalTempDatabase", "global_temp").lower()

    def find(self, database: str, name: str) -> TableEntry | None:
        if database == self.global_database:
            if jvm.is_global_temporary_view(self.spark, name):
                return _entry(self.spark, database, name, f"{database}.{name}", self.storage)
            return None
        if database == DEFAULT_DATABASE and jvm.is_temporary_view(self.spark, name):
            return _entry(self.spark, database, name, name, self.storage)
        return None


class SessionCatalogTables:
    """Tables (and views) of the session's own catalog that aipq's catalog does not have: a table a PySpark
    program saved with ``saveAsTable`` in an in-memory catalog, say."""

    def __init__(self, spark):
        self.spark = spark

    def find(self, database: str, name: str) -> TableEntry | None:
        qualified = f"{database}.{name}"
        try:
            if not self.spark.catalog.tableExists(f"{database}.{name}"):
                return None
        except Exception:  # noqa: BLE001 — a database the session does not know: not here
            return None
        return _entry(self.spark, database, name, qualified)
