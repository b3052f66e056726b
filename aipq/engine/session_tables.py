"""The names a session handed to aipq (``aipq.sql(..., spark=…)``) knows beyond aipq's catalog, found as
``spark.sql`` finds them on that session: its temporary views first (a temporary view shadows a table of the same
name), ``global_temp.NAME`` for the application's global temporary views, and after aipq's own catalog the
tables of the session's catalog. Each is read by Spark by its name."""

from __future__ import annotations

from aipq.catalog import DEFAULT_DATABASE, SPARK_CATALOG_PREFIX, TableEntry
from aipq.engine import jvm


def _entry(spark, database: str, name: str, read_as: str) -> TableEntry | None:
    try:
        schema = spark.table(read_as).schema
    except Exception:  # noqa: BLE001 — the session cannot read it (a view over a table since dropped): not here
        return None
    columns = tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)
    return TableEntry(database, name, f"{SPARK_CATALOG_PREFIX}{read_as}", "spark", columns, source="spark")


class SessionTemporaryViews:
    """The session's temporary views (an unqualified name) and the global ones (``global_temp.NAME``): looked
    up before aipq's catalog, as Spark resolves them before its tables."""

    def __init__(self, spark):
        self.spark = spark
        self.global_database = spark.conf.get("spark.sql.globalTempDatabase", "global_temp").lower()

    def find(self, database: str, name: str) -> TableEntry | None:
        if database == self.global_database:
            if jvm.is_global_temporary_view(self.spark, name):
                return _entry(self.spark, database, name, f"{database}.{name}")
            return None
        if database == DEFAULT_DATABASE and jvm.is_temporary_view(self.spark, name):
            return _entry(self.spark, database, name, name)
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
