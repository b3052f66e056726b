"""Spark's catalogs read into plain values: the external catalog (a Hive metastore), and the session's
temporary views."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from aipq.engine.jvm.gateway import (
    _aipq_class,
    _jvm,
)


@dataclass(frozen=True)
class MetastoreTable:
    """A table as Spark's external catalog (a Hive metastore) holds it, in plain values."""

    database: str
    name: str
    location: str
    provider: str  # a data source name (parquet, orc, csv), or "hive" for a Hive SerDe table
    input_format: str
    serde: str  # a Hive SerDe's class name ("" for a data source table)
    storage_properties: dict[str, str]
    schema_json: str  # the columns, partition columns last
    partition_columns: tuple[str, ...]
    table_type: str  # EXTERNAL, MANAGED or VIEW
    properties: dict[str, str]


def _external_catalog(spark: SparkSession):
    return spark._jsparkSession.sharedState().externalCatalog()


def _scala_map(jmap) -> dict[str, str]:
    found, entries = {}, jmap.iterator()
    while entries.hasNext():
        entry = entries.next()
        found[str(entry._1())] = str(entry._2())
    return found


def _scala_strings(seq) -> list[str]:
    found, items = [], seq.iterator()
    while items.hasNext():
        found.append(str(items.next()))
    return found


def _option(value, default: str = "") -> str:
    return str(value.get()) if value.isDefined() else default


def metastore_databases(spark: SparkSession) -> list[str]:
    return _scala_strings(_external_catalog(spark).listDatabases())


def metastore_table_names(spark: SparkSession, database: str) -> list[str]:
    return _scala_strings(_external_catalog(spark).listTables(database))


def metastore_database_location(spark: SparkSession, database: str) -> str | None:
    catalog = _external_catalog(spark)
    if not catalog.databaseExists(database):
        return None
    return str(catalog.getDatabase(database).locationUri().toString())


def metastore_table(spark: SparkSession, database: str, name: str) -> MetastoreTable | None:
    """The table ``database.name`` in the session's external catalog, or None when there is none."""
    catalog = _external_catalog(spark)
    if not catalog.tableExists(database, name):
        return None
    table = catalog.getTable(database, name)
    storage = table.storage()
    location = str(storage.locationUri().get().toString()) if storage.locationUri().isDefined() else ""
    return MetastoreTable(database, name, location, _option(table.provider(), "hive").lower(),
                          _option(storage.inputFormat()), _option(storage.serde()), _scala_map(storage.properties()),
                          table.schema().json(),
                          tuple(_scala_strings(table.partitionColumnNames())), str(table.tableType().name()),
                          _scala_map(table.properties()))


def class_loadable(spark: SparkSession, name: str) -> bool:
    """Whether the driver can load the class ``name`` (a table's SerDe) the way Spark's Hive table scan does: from
    the session's class loader, which holds the jars of ``spark.jars``."""
    from py4j.protocol import Py4JError

    jvm = _jvm(spark)
    try:
        jvm.java.lang.Class.forName(name, False, jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
        return True
    except Py4JError:
        return False


def metastore_partitions(spark: SparkSession, database: str, name: str) -> list[tuple[dict[str, str], str]]:
    """(spec, location) of each partition of ``database.name`` the external catalog holds."""
    partitions = _external_catalog(spark).listPartitions(database, name, _jvm(spark).scala.Option.empty())
    found, items = [], partitions.iterator()
    while items.hasNext():
        partition = items.next()
        found.append((_scala_map(partition.spec()), str(partition.location().toString())))
    return found


def _session_catalog(spark: SparkSession):
    return spark._jsparkSession.sessionState().catalog()


def temporary_view_names(spark: SparkSession) -> list[str]:
    """The names of the session's (local) temporary views."""
    return _scala_strings(_session_catalog(spark).getTempViewNames())


@dataclass(frozen=True)
class ViewFile:
    """One file a view reads, as Spark listed it when the view was made."""

    path: str  # the URI's path part: /warehouse/t/part-0.parquet
    length: int
    modified_ms: int


@dataclass(frozen=True)
class TemporaryView:
    """A session's temporary view: its schema, and the path and files it reads when it is a plain parquet read."""

    schema_json: str
    root: str | None
    files: tuple[ViewFile, ...]


_MOST_VIEW_FILES = 256  # a view of more files is read by name alone: comparing them would cost more than it saves


def temporary_view(spark: SparkSession, name: str, global_view: bool = False) -> TemporaryView | None:
    """The temporary view ``name`` (a global one, read as ``global_temp.name``, with ``global_view``), or None:
    one call (``aipq.spark.ViewFiles``); its files when it is a plain parquet read of one path, as
    ``spark.read.parquet(path)`` makes it (no other reader option, no partition columns, nothing on top)."""
    found = _aipq_class(spark, "ViewFiles").describe(spark._jsparkSession, name, global_view, _MOST_VIEW_FILES)
    if found is None:
        return None
    schema_json, *lines = str(found).split("\n")
    files = []
    for line in lines[1:]:
        path, length, modified = line.rsplit("\t", 2)
        files.append(ViewFile(path, int(length), int(modified)))
    return TemporaryView(schema_json, lines[0] if lines else None, tuple(files))
