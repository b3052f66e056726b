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

import json
from urllib.parse import urlparse

from pyspark.sql.types import StructType

from aipq.catalog import DEFAULT_DATABASE, SPARK_CATALOG_PREFIX, TableEntry
from aipq.engine import jvm
from aipq.engine.storage import Storage, is_local, local_path
from aipq.errors import AipqError


def _entry(spark, database: str, name: str, read_as: str) -> TableEntry | None:
    try:
        schema = spark.table(read_as).schema
    except Exception:  # noqa: BLE001 — the session cannot read it (a view over a table since dropped): not here
        return None
    columns = tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)
    return TableEntry(database, name, f"{SPARK_CATALOG_PREFIX}{read_as}", "spark", columns, source="spark")


def _files_now(view: jvm.TemporaryView, storage: Storage) -> str | None:
    """The path a view reads as plain parquet, when the files Spark listed for it are the files there now."""
    if view.root is None or not view.files:
        return None
    try:
        there = storage.data_files(view.root) or []
    except AipqError:  # this process cannot list them (Spark did, when the view was made): read by name alone
        return None
    now = sorted((urlparse(f.path).path, f.length, f.modified_ms) for f in there)
    if now != sorted((f.path, f.length, f.modified_ms) for f in view.files):
        return None
    return local_path(view.root) if is_local(view.root) else view.root  # as a local table is registered


class SessionTemporaryViews:
    """The session's temporary views (an unqualified name) and the global ones (``global_temp.NAME``): looked
    up before aipq's catalog, as Spark resolves them before its tables."""

    def __init__(self, spark, storage: Storage):
        self.spark = spark
        self.storage = storage
        self.global_database = spark.conf.get("spark.sql.globalTempDatabase", "global_temp").lower()

    def find(self, database: str, name: str) -> TableEntry | None:
        global_view = database == self.global_database
        if not global_view and database != DEFAULT_DATABASE:
            return None
        view = jvm.temporary_view(self.spark, name, global_view)
        if view is None:
            return None
        read_as = f"{database}.{name}" if global_view else name
        path = _files_now(view, self.storage)
        if path is None:  # read by name alone: the session must be able to read it
            return _entry(self.spark, database, name, read_as)
        schema = StructType.fromJson(json.loads(view.schema_json))
        columns = tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)
        return TableEntry(database, name, path, "parquet", columns, source="view")


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
