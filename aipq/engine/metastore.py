"""A Hive metastore as the catalog of record, when the Spark session is configured for one
(``spark.sql.catalogImplementation=hive``, ``spark.hadoop.hive.metastore.uris`` or a hive-site.xml).

Table names resolve to the metastore's tables: their location, format, schema and partitions, so statistics,
summaries and partition pruning see their files exactly as they see registered ones. What a workflow writes
goes there too: the data is written aside and moved into place first (``engine/tables.py``), and only then is
the metastore told (a new table created EXTERNAL at its location, a version folder switched with ``SET
LOCATION``, partitions added or moved), so that readers of the metastore see old data or new, never a mix.
aipq's own options (who created a table) are table properties; a text table's delimiter is its SerDe's.

Views and locks stay in the aipq home (``catalog.Catalog``): a view is aipq's SQL text, read by aipq only.
Metadata is read through Spark's external catalog (``engine/jvm/metastore.py``) and written with Spark's DDL, so every
setting the session has for the metastore (URIs, Kerberos, hive-site.xml) applies.
"""

from __future__ import annotations

import json
import socket
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from aipq.catalog import (
    DEFAULT_DATABASE,
    DEFAULT_PARTITION_NAME,
    SPARK_CATALOG_PREFIX,
    Catalog,
    Partition,
    TableEntry,
    TableLookup,
    split_name,
)
from aipq.engine import jvm
from aipq.engine.session import METASTORE_TIMEOUT_SETTING
from aipq.engine.storage import is_local, local_path
from aipq.errors import AipqError, ExecutionError

# Spark's session setting for the metastore's URIs, and Hive's own name for it
URIS_SETTINGS = ("spark.hadoop.hive.metastore.uris", "hive.metastore.uris")
# aipq's options kept as table properties (the rest of a table's options are its format's)
PROPERTY_PREFIX = "aipq."
_CONNECT_SECONDS = 5.0


def metastore_uris(spark) -> str:
    """The thrift URIs the session's metastore client connects to ("" for an embedded metastore)."""
    for key in URIS_SETTINGS:
        value = spark.conf.get(key, None) or jvm.hadoop_setting(spark, key)
        if value:
            return str(value)
    return ""


def check_reachable(uris: str) -> None:
    """Exit 1 before any stage runs when no metastore URI answers (Spark's client would retry for minutes)."""
    addresses = [urlparse(uri.strip()) for uri in uris.split(",") if uri.strip()]
    for address in addresses:
        try:
            with socket.create_connection((address.hostname or "localhost", address.port or 9083), _CONNECT_SECONDS):
                return
        except OSError:
            continue
    if addresses:
        raise ExecutionError(f"the Hive metastore at {uris} does not answer",
                             hint="start it, or check spark.hadoop.hive.metastore.uris")


class MetastoreCatalog(Catalog):
    """Tables in the session's Hive metastore; views and table locks in the aipq home."""

    def __init__(self, home: Path, spark, fallbacks: tuple[TableLookup, ...] = ()):
        super().__init__(home, fallbacks)
        self.spark = spark
        self.uris = metastore_uris(spark)
        check_reachable(self.uris)

    @property
    def timeout(self) -> str:
        """How long the session's metastore client waits for an answer, as it is set (Hive's default: 600s)."""
        value = self.spark.conf.get(METASTORE_TIMEOUT_SETTING, None) or jvm.hadoop_setting(
            self.spark, METASTORE_TIMEOUT_SETTING.removeprefix("spark.hadoop.")) or "600s"
        return f"{value}s" if str(value).isdigit() else str(value)

    @property
    def described(self) -> str:
        return f"the Hive metastore at {self.uris}" if self.uris else "Spark's embedded Hive metastore"

    def with_fallbacks(self, *fallbacks: TableLookup) -> MetastoreCatalog:
        return MetastoreCatalog(self.home, self.spark, self.fallbacks + tuple(fallbacks))

    def check_writable(self) -> None:
        """Tables are written to the metastore, whatever the home's permissions (views check theirs)."""

    @contextmanager
    def _metastore(self, doing: str):
        """Errors of the metastore as aipq's, naming it (exit 1)."""
        try:
            yield
        except AipqError:
            raise
        except Exception as error:  # noqa: BLE001 — py4j and Spark errors alike
            if _timed_out(error):
                raise ExecutionError(f"{self.described} did not answer within {self.timeout} while {doing}",
                                     hint="check that it runs and is not overloaded, then continue the workflow "
                                          "with --resume (aipq.metastore.timeout sets the wait)") from error
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ExecutionError(f"{self.described} failed while {doing}: {message}",
                                 hint="check that it runs and that this user may change it") from error

    def _find_own(self, database: str, name: str) -> TableEntry | None:
        with self._metastore(f"looking up {database}.{name}"):
            table = jvm.metastore_table(self.spark, database, name)
            return None if table is None else self._entry(table)

    def _entry(self, table: jvm.MetastoreTable) -> TableEntry:
        from pyspark.sql.types import StructType

        schema = StructType.fromJson(json.loads(table.schema_json))
        columns = tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)
        options = tuple((k, v) for k, v in table.properties.items() if k.startswith(PROPERTY_PREFIX))
        fmt, format_options = _format(table)
        partitioning = tuple(c.lower() for c in table.partition_columns)
        if fmt is None or table.table_type == "VIEW":  # a view, or a Hive SerDe table: Spark reads it by name
            unreadable = ""
            if table.serde and table.table_type != "VIEW" and not jvm.class_loadable(self.spark, table.serde):
                unreadable = f"its SerDe {table.serde} is not on the classpath of this Spark session"
            return TableEntry(table.database, table.name, f"{SPARK_CATALOG_PREFIX}{table.database}.{table.name}",
                              "spark", columns, options, source="spark", unreadable=unreadable)
        partitions = self._partitions(table, partitioning) if partitioning else ()
        return TableEntry(table.database, table.name, table.location, fmt, columns, (*format_options, *options),
                          partition_columns=partitioning, partitions=partitions)

    def _partitions(self, table: jvm.MetastoreTable, columns: tuple[str, ...]) -> tuple[Partition, ...]:
        found = (Partition(tuple(_partition_value(spec, c) for c in columns), location)
                 for spec, location in jvm.metastore_partitions(self.spark, table.database, table.name))
        return tuple(sorted(found, key=lambda p: tuple((v is None, v or "") for v in p.values)))

    def register(self, entry: TableEntry) -> bool:
        """Create the table (EXTERNAL, at ``entry.path``), or point the existing one at its new data."""
        with self._metastore(f"registering {entry.qualified_name}"):
            current = jvm.metastore_table(self.spark, entry.database, entry.name)
            existing = None if current is None else self._entry(current)
            if existing is not None and _same_shape(existing, entry):
                if _qualified(existing.path) != _qualified(entry.path):
                    self._sql(f"ALTER TABLE {_name(entry)} SET LOCATION {_text(entry.path)}")
                self._reconcile_partitions(entry, _locations(existing))
                return True
            if existing is not None:
                self._sql(f"DROP TABLE {_name(entry)}")
            self._create(entry)
        return existing is not None

    def _create(self, entry: TableEntry) -> None:
        if jvm.metastore_database_location(self.spark, entry.database) is None:
            self._create_database(entry.database)
        data = [(c, t) for c, t in entry.columns if c not in entry.partition_columns]
        partitions = [(c, t) for c, t in entry.columns if c in entry.partition_columns]
        columns = ", ".join(f"`{c}` {t}" for c, t in [*data, *partitions])
        format_options = [(k, v) for k, v in entry.options if not k.startswith(PROPERTY_PREFIX)]
        properties = [(k, v) for k, v in entry.options if k.startswith(PROPERTY_PREFIX)]
        text = f"CREATE TABLE {_name(entry)} ({columns}) USING {entry.format}"
        if format_options:
            text += f" OPTIONS ({_pairs(format_options)})"
        if entry.partition_columns:
            text += f" PARTITIONED BY ({', '.join(f'`{c}`' for c in entry.partition_columns)})"
        text += f" LOCATION {_text(entry.path)}"
        if properties:
            text += f" TBLPROPERTIES ({_pairs(properties)})"
        self._sql(text)
        self._reconcile_partitions(entry, {})

    def _reconcile_partitions(self, entry: TableEntry, current: dict[tuple, str]) -> None:
        """The metastore's partitions (``current``: values → location) made those of ``entry``."""
        after = _locations(entry)
        added = [p for p in entry.partitions if current.get(p.values) != after[p.values]]
        self._change_partitions(entry, current, added,
                                [Partition(v, path) for v, path in current.items() if v not in after])

    def set_partitions(self, name: str, added: tuple[Partition, ...] = (), dropped: tuple[Partition, ...] = ()) -> None:
        with self._metastore(f"changing the partitions of {name}"):
            entry = self.lookup(name)
            if entry is None:
                raise ExecutionError(f"table {name} is gone from {self.described}", hint="another run dropped it")
            current = _locations(entry)
            self._change_partitions(entry, current, [p for p in added if current.get(p.values) != _qualified(p.path)],
                                    list(dropped))

    def _change_partitions(self, entry: TableEntry, current: dict[tuple, str], added: list[Partition],
                           dropped: list[Partition]) -> None:
        """Partitions added (or moved to a new folder) and dropped, in the metastore, which has ``current``; the
        data stays where it is (aipq moves and removes data itself)."""
        if dropped:  # one statement: the metastore drops them in one transaction
            specs = ", ".join(f"PARTITION ({_spec(entry, p)})" for p in dropped)
            self._sql(f"ALTER TABLE {_name(entry)} DROP IF EXISTS {specs}")
        new = [p for p in added if p.values not in current]
        if new:  # one statement: the metastore adds them in one transaction
            specs = " ".join(f"PARTITION ({_spec(entry, p)}) LOCATION {_text(p.path)}" for p in new)
            self._sql(f"ALTER TABLE {_name(entry)} ADD {specs}")
        for partition in added:
            if partition.values in current:
                self._sql(f"ALTER TABLE {_name(entry)} PARTITION ({_spec(entry, partition)}) "
                          f"SET LOCATION {_text(partition.path)}")

    def drop(self, name: str) -> bool:
        database, table = split_name(name)
        with self._metastore(f"dropping {database}.{table}"):
            if jvm.metastore_table(self.spark, database, table) is None:
                return False
            self._sql(f"DROP TABLE `{database}`.`{table}`")
        return True

    def records_statistics(self) -> bool:
        return True

    def record_statistics(self, name: str, rows: int, size: int, files: int) -> None:
        """The table's row count and size as Hive's ``stats.autogather`` keeps them (``numRows``, ``totalSize``,
        ``numFiles``), which Spark reads too when no ``ANALYZE TABLE`` has recorded its own: without them Spark and
        Hive plan a table aipq wrote as empty."""
        database, table = split_name(name)
        stats = [("numRows", str(rows)), ("totalSize", str(size)), ("numFiles", str(files))]
        with self._metastore(f"recording the statistics of {database}.{table}"):
            self._sql(f"ALTER TABLE `{database}`.`{table}` SET TBLPROPERTIES ({_pairs(stats)})")

    def deletes_files_on_drop(self, name: str) -> str | None:
        """A MANAGED table's location: the metastore deletes its files when it is dropped (an EXTERNAL table's
        stay, aipq's own tables are EXTERNAL)."""
        database, table = split_name(name)
        with self._metastore(f"looking up {database}.{table}"):
            found = jvm.metastore_table(self.spark, database, table)
        return found.location if found is not None and found.table_type == "MANAGED" else None

    def database_exists(self, database: str) -> bool:
        with self._metastore(f"looking up database {database}"):
            return jvm.metastore_database_location(self.spark, database) is not None

    def entries(self) -> list[TableEntry]:
        with self._metastore("listing its tables"):
            found = []
            for database in jvm.metastore_databases(self.spark):
                for name in jvm.metastore_table_names(self.spark, database):
                    table = jvm.metastore_table(self.spark, database, name)
                    if table is not None:
                        found.append(self._entry(table))
        return sorted(found, key=lambda e: (e.database, e.name))

    def known_names(self) -> list[str]:
        with self._metastore("listing its tables"):
            names = []
            for database in jvm.metastore_databases(self.spark):
                for name in jvm.metastore_table_names(self.spark, database):
                    names.append(name if database == DEFAULT_DATABASE else f"{database}.{name}")
        return names

    def create_database(self, database: str, location: str | None, if_not_exists: bool) -> bool:
        with self._metastore(f"creating database {database}"):
            if jvm.metastore_database_location(self.spark, database) is not None:
                if if_not_exists:
                    return False
                raise ExecutionError(f"database {database} already exists in {self.described}",
                                     hint="write CREATE DATABASE IF NOT EXISTS")
            self._create_database(database, location)
        return True

    def _create_database(self, database: str, location: str | None = None) -> None:
        """A new database, in the folder given or the one Hive gives it beside the default database's (Spark
        would put it under the session's own warehouse)."""
        folder = location or self.database_location(database)
        self._sql(f"CREATE DATABASE IF NOT EXISTS `{database}`" + (f" LOCATION {_text(folder)}" if folder else ""))

    def database_location(self, database: str) -> str | None:
        """Where the metastore keeps the managed tables of ``database``: its folder, or for a database not yet
        created, the folder Hive would give it (``<default database's folder>/<name>.db``)."""
        with self._metastore(f"looking up database {database}"):
            found = jvm.metastore_database_location(self.spark, database)
            if found is None:
                default = jvm.metastore_database_location(self.spark, DEFAULT_DATABASE)
                found = f"{default.rstrip('/')}/{database}.db" if default else None
            return found

    def _sql(self, text: str) -> None:
        self.spark.sql(text).collect()


def _timed_out(error: Exception) -> bool:
    """Whether a metastore call failed because the metastore did not answer in time (the Thrift client's read
    timed out; Spark and Hive wrap it, the Java trace names it)."""
    text = str(error)
    return "SocketTimeoutException" in text or "Read timed out" in text


def _format(table: jvm.MetastoreTable) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The data source aipq reads a metastore table with itself, and its options; None for a table Spark reads by
    name. Parquet and ORC files read the same whoever reads them (Spark converts a Hive parquet or ORC table to
    its own reader too). A Hive SerDe's text (LazySimpleSerDe's delimiters, ``\\N`` for NULL, escapes and no quote
    character; OpenCSVSerde's quoting; JSON, Avro, regular expressions) has rules of its own that Spark's CSV
    reader only approximates, so such a table is read by Spark's Hive table scan, with its SerDe."""
    if table.provider in ("parquet", "orc"):
        return table.provider, ()
    if table.provider == "csv":
        keep = ("sep", "delimiter", "header", "quote", "escape", "nullValue")
        # Spark reads a CSV table without a header unless its options say so (aipq's default for files is one)
        return "csv", (("header", "false"), *((k, v) for k, v in table.storage_properties.items() if k in keep))
    if table.provider != "hive":
        return None, ()
    serde_format = table.input_format.lower()
    if "parquet" in serde_format:
        return "parquet", ()
    if "orc" in serde_format:
        return "orc", ()
    return None, ()


def _partition_value(spec: dict[str, str], column: str) -> str | None:
    value = {k.lower(): v for k, v in spec.items()}.get(column)
    return None if value is None or value == DEFAULT_PARTITION_NAME else value


def _same_shape(existing: TableEntry, entry: TableEntry) -> bool:
    return (existing.columns == entry.columns and existing.format == entry.format
            and existing.partition_columns == entry.partition_columns)


def _locations(entry: TableEntry) -> dict[tuple, str]:
    """A table's partitions: values → location, as the metastore gives locations back."""
    return {p.values: _qualified(p.path) for p in entry.partitions}


def _qualified(path: str) -> str:
    """A path as the metastore gives it back (a local one as ``file:/…``), to compare with one it gave."""
    return f"file:{local_path(path)}" if is_local(path) else path


def _name(entry: TableEntry) -> str:
    return f"`{entry.database}`.`{entry.name}`"


def _text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{_text(k)} = {_text(v)}" for k, v in pairs)


def _spec(entry: TableEntry, partition: Partition) -> str:
    return ", ".join(f"`{c}` = {_text(DEFAULT_PARTITION_NAME if v is None else v)}"
                     for c, v in zip(entry.partition_columns, partition.values))
