"""The table catalog: names → data files, formats and schemas, persisted under the aipq home.

It follows Spark's catalog conventions: tables live in databases (``default`` unless qualified as
``db.table``), names are case-insensitive, and formats are Spark data source names (parquet, orc, csv).
Registrations are kept in SQLite so that concurrent aipq processes can read and write them safely. Tables not
When the Spark session is configured for a Hive metastore, the metastore is the catalog of record instead
(``aipq.engine.metastore.MetastoreCatalog``, which keeps views and locks here).

The catalog lives outside planner/ and engine/ because both read it: the planner for schemas, the engine for
paths and formats.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aipq.errors import BadInputError

DEFAULT_DATABASE = "default"
# The path of a table found in Spark's own catalog: Spark reads it by name, it has no data path of aipq's.
SPARK_CATALOG_PREFIX = "spark-catalog:"
FORMATS = ("parquet", "orc", "csv")


# Hive's directory name for a NULL (or empty) partition value.
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
# Characters Hive escapes in a partition directory name (FileUtils.escapePathName), as %XX.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def escape_partition_value(value: str | None) -> str:
    if value is None or value == "":
        return DEFAULT_PARTITION_NAME
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_partition_value(text: str) -> str | None:
    if text == DEFAULT_PARTITION_NAME:
        return None
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 3 <= len(text) and all(c in "0123456789abcdefABCDEF" for c in text[i + 1:i + 3]):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def partition_spec(columns: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """``dt=2024-01-01/country=US``: a partition's folder below its table's, as Hive names it."""
    return "/".join(f"{c}={escape_partition_value(v)}" for c, v in zip(columns, values))


@dataclass(frozen=True)
class Partition:
    """One partition of a partitioned table: its values (text, in the table's partition-column order; None is
    Hive's default partition) and the folder holding its data."""

    values: tuple[str | None, ...]
    path: str

    def spec(self, columns: tuple[str, ...]) -> str:
        return partition_spec(columns, self.values)


@dataclass(frozen=True)
class TableEntry:
    database: str
    name: str
    path: str
    format: str
    columns: tuple[tuple[str, str], ...]  # (column name, Spark SQL type); partition columns last
    options: tuple[tuple[str, str], ...] = ()
    # "aipq" (registered here), "spark" (found in Spark's catalog, read by name), or "view" (a given session's
    # temporary view that reads the parquet files at ``path``: read by its name, sized and known by those files)
    source: str = "aipq"
    partition_columns: tuple[str, ...] = ()
    # the registered partitions; a scan's entry holds only those its filters (or summaries) leave
    partitions: tuple[Partition, ...] = ()
    # why aipq refuses to read the table ("" when it can): a Hive SerDe whose class the session cannot load
    unreadable: str = ""

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def spark_name(self) -> str | None:
        """The name Spark reads the table by, for one aipq does not read by its files (None for aipq's own)."""
        if self.source == "spark":
            return self.path.removeprefix(SPARK_CATALOG_PREFIX)
        if self.source == "view":  # a local temporary view by its own name, a global one as global_temp.NAME
            return self.name if self.database == DEFAULT_DATABASE else self.qualified_name
        return None

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_columns)

    def column_types(self) -> dict[str, str]:
        return dict(self.columns)

    def partition_folder(self, values: tuple[str | None, ...]) -> str:
        """Where Hive's layout puts the partition with ``values``: its folder below the table's."""
        return f"{self.path.rstrip('/')}/{partition_spec(self.partition_columns, values)}"

    def data_paths(self) -> tuple[str, ...]:
        """Where the rows are: the table's path, or the folder of each partition."""
        return tuple(p.path for p in self.partitions) if self.partitioned else (self.path,)


class TableLookup(Protocol):
    """Something that can find a table by (database, name); the catalog chains these."""

    def find(self, database: str, name: str) -> TableEntry | None: ...


def split_name(name: str) -> tuple[str, str]:
    """``db.table`` → (db, table); a bare name is in the default database. Lower-cased, as Spark does."""
    parts = name.strip().strip("`").lower().split(".")
    if len(parts) == 1:
        return DEFAULT_DATABASE, parts[0]
    if len(parts) == 2:
        return parts[0].strip("`"), parts[1].strip("`")
    raise BadInputError(f"invalid table name {name!r}", hint="use NAME or DATABASE.NAME")


class Catalog:
    """Registered tables, stored in ``<home>/catalog.db``."""

    def __init__(self, home: Path, fallbacks: tuple[TableLookup, ...] = ()):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.path = self.home / "catalog.db"
        self.fallbacks = fallbacks
        # looked up before this catalog's own tables: a given session's temporary views (``engine/context.py``)
        self.shadowing: tuple[TableLookup, ...] = ()
        # a read-only home (or catalog file) still answers lookups; registering then says why it cannot
        self.read_only = not os.access(self.home, os.W_OK) or (self.path.exists()
                                                                and not os.access(self.path, os.W_OK))
        if self.read_only:
            return
        with self._connect() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS tables (database TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL,"
                " format TEXT NOT NULL, columns TEXT NOT NULL, options TEXT NOT NULL, registered_at REAL NOT NULL,"
                " PRIMARY KEY (database, name))"
            )
            if "partition_columns" not in {row[1] for row in con.execute("PRAGMA table_info(tables)")}:
                con.execute("ALTER TABLE tables ADD COLUMN partition_columns TEXT NOT NULL DEFAULT '[]'")
            con.execute("CREATE TABLE IF NOT EXISTS views (database TEXT NOT NULL, name TEXT NOT NULL,"
                        " query TEXT NOT NULL, PRIMARY KEY (database, name))")
            con.execute(
                "CREATE TABLE IF NOT EXISTS partitions (database TEXT NOT NULL, name TEXT NOT NULL,"
                " partition_values TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY (database, name, partition_values))"
            )
            con.execute("CREATE TABLE IF NOT EXISTS databases (name TEXT NOT NULL PRIMARY KEY)")

    def check_writable(self) -> None:
        if self.read_only:
            raise BadInputError(f"the catalog {self.path} is read-only, so tables cannot be registered or dropped",
                                hint="make the aipq home writable, or use another --home")

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write:
            self.check_writable()
        try:
            if self.read_only:
                con = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30)
            else:
                con = sqlite3.connect(self.path, timeout=30)
                con.execute("PRAGMA journal_mode=WAL")
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            if self.read_only and not self.path.exists():
                con = sqlite3.connect(":memory:")  # a read-only home with no catalog yet: no tables
                con.execute("CREATE TABLE tables (database TEXT, name TEXT, path TEXT, format TEXT, columns TEXT,"
                            " options TEXT, registered_at REAL, partition_columns TEXT)")
                con.execute("CREATE TABLE partitions (database TEXT, name TEXT, partition_values TEXT, path TEXT)")
                con.execute("CREATE TABLE views (database TEXT, name TEXT, query TEXT)")
                con.execute("CREATE TABLE databases (name TEXT)")
            else:
                raise BadInputError(f"cannot open the catalog {self.path}: {exc}",
                                    hint="check the permissions of the aipq home and of catalog.db") from exc
        except sqlite3.DatabaseError as exc:
            raise BadInputError(
                f"the catalog {self.path} is not a readable SQLite database ({exc})",
                hint="move it aside; aipq creates a new one (tables then need registering again)",
            ) from exc
        try:
            with con:
                yield con
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc):
                raise BadInputError(f"the catalog {self.path} is read-only: {exc}",
                                    hint="make the aipq home writable, or use another --home") from exc
            raise
        finally:
            con.close()

    @contextmanager
    def table_lock(self, name: str) -> Iterator[None]:
        """An exclusive lock on one table's commit across aipq processes (a file lock under ``<home>/locks``)."""
        folder = self.home / "locks"
        folder.mkdir(exist_ok=True)
        with (folder / f"{name}.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def with_fallbacks(self, *fallbacks: TableLookup) -> Catalog:
        return Catalog(self.home, self.fallbacks + tuple(fallbacks))

    def register(self, entry: TableEntry) -> bool:
        """Add or replace a registration, its partitions with it; returns True when it replaced one."""
        with self._connect(write=True) as con:
            existed = con.execute(
                "SELECT 1 FROM tables WHERE database=? AND name=?", (entry.database, entry.name)
            ).fetchone()
            con.execute(
                "INSERT OR REPLACE INTO tables (database, name, path, format, columns, options, registered_at,"
                " partition_columns) VALUES (?,?,?,?,?,?,?,?)",
                (entry.database, entry.name, entry.path, entry.format, json.dumps(entry.columns),
                 json.dumps(entry.options), time.time(), json.dumps(entry.partition_columns)),
            )
            con.execute("DELETE FROM partitions WHERE database=? AND name=?", (entry.database, entry.name))
            _insert_partitions(con, entry.database, entry.name, entry.partitions)
        return existed is not None

    def set_partitions(self, name: str, added: tuple[Partition, ...] = (), dropped: tuple[Partition, ...] = ()) -> None:
        """Register partitions (replacing those with the same values) and unregister others, in one transaction."""
        database, table = split_name(name)
        with self._connect(write=True) as con:
            for partition in dropped:
                con.execute("DELETE FROM partitions WHERE database=? AND name=? AND partition_values=?",
                            (database, table, json.dumps(partition.values)))
            _insert_partitions(con, database, table, added)

    def create_database(self, database: str, location: str | None, if_not_exists: bool) -> bool:
        """A database recorded by name (tables and views name it; a LOCATION has no use here); True when new."""
        if location is not None:
            raise BadInputError(f"CREATE DATABASE {database} LOCATION: aipq's own catalog keeps no database folders",
                                hint="leave LOCATION out, or use a Hive metastore (docs/guide/catalogs.md)")
        if self.database_exists(database):
            return False
        with self._connect(write=True) as con:
            con.execute("INSERT OR IGNORE INTO databases VALUES (?)", (database,))
        return True

    def database_exists(self, database: str) -> bool:
        """Whether a statement may create a table in ``database``: the default one, one CREATE DATABASE made, or
        one a registered table or view is in (``aipq table add db.name`` and ``tpch gen --database`` make it)."""
        if database == DEFAULT_DATABASE:
            return True
        with self._connect() as con:
            return any(con.execute(f"SELECT 1 FROM {kind} WHERE {column}=? LIMIT 1", (database,)).fetchone()
                       for kind, column in (("databases", "name"), ("tables", "database"), ("views", "database")))

    def records_statistics(self) -> bool:
        """Whether the catalog keeps a table's row count and size for other engines (a Hive metastore does)."""
        return False

    def record_statistics(self, name: str, rows: int, size: int, files: int) -> None:
        """Keep what a write left in table ``name`` (aipq's own statistics live in its repository, not here)."""

    def deletes_files_on_drop(self, name: str) -> str | None:
        """Where the files are that dropping table ``name`` from the catalog deletes by itself (None: it deletes
        none; aipq's registrations are names for files that stay)."""
        return None

    def register_view(self, name: str, query: str) -> None:
        """A view kept in the catalog: its query's text (Hive's dialect), read in place of its name."""
        database, view = split_name(name)
        with self._connect(write=True) as con:
            con.execute("INSERT OR REPLACE INTO views VALUES (?,?,?)", (database, view, query))

    def drop_view(self, name: str) -> bool:
        database, view = split_name(name)
        with self._connect(write=True) as con:
            return con.execute("DELETE FROM views WHERE database=? AND name=?", (database, view)).rowcount > 0

    def view_query(self, name: str) -> str | None:
        database, view = split_name(name)
        with self._connect() as con:
            try:
                row = con.execute("SELECT query FROM views WHERE database=? AND name=?", (database, view)).fetchone()
            except sqlite3.OperationalError:  # a read-only catalog from before views were kept
                return None
        return row[0] if row else None

    def view_names(self) -> list[str]:
        with self._connect() as con:
            try:
                rows = con.execute("SELECT database, name FROM views ORDER BY database, name").fetchall()
            except sqlite3.OperationalError:
                return []
        return [name if database == DEFAULT_DATABASE else f"{database}.{name}" for database, name in rows]

    def drop(self, name: str) -> bool:
        database, table = split_name(name)
        with self._connect(write=True) as con:
            cur = con.execute("DELETE FROM tables WHERE database=? AND name=?", (database, table))
            con.execute("DELETE FROM partitions WHERE database=? AND name=?", (database, table))
        return cur.rowcount > 0

    def entries(self) -> list[TableEntry]:
        with self._connect() as con:
            rows = con.execute(f"SELECT {_ENTRY_COLUMNS} FROM tables ORDER BY database, name").fetchall()
            return [_entry_from_row(con, row) for row in rows]

    def find(self, database: str, name: str) -> TableEntry | None:
        """The table as Spark would resolve its name: a shadowing lookup's (a given session's temporary view), else
        this catalog's own, else its fallbacks' (the given session's catalog)."""
        for lookup in self.shadowing:
            found = lookup.find(database, name)
            if found is not None:
                return found
        found = self._find_own(database, name)
        if found is not None:
            return found
        for fallback in self.fallbacks:
            found = fallback.find(database, name)
            if found is not None:
                return found
        return None

    def _find_own(self, database: str, name: str) -> TableEntry | None:
        with self._connect() as con:
            row = con.execute(f"SELECT {_ENTRY_COLUMNS} FROM tables WHERE database=? AND name=?",
                              (database, name)).fetchone()
            return _entry_from_row(con, row) if row is not None else None

    def lookup(self, name: str) -> TableEntry | None:
        return self.find(*split_name(name))

    def known_names(self) -> list[str]:
        names = []
        for entry in self.entries():
            names.append(entry.name if entry.database == DEFAULT_DATABASE else entry.qualified_name)
        return names


_ENTRY_COLUMNS = "database, name, path, format, columns, options, partition_columns"


def _insert_partitions(con: sqlite3.Connection, database: str, name: str, partitions: tuple[Partition, ...]) -> None:
    con.executemany("INSERT OR REPLACE INTO partitions VALUES (?,?,?,?)",
                    [(database, name, json.dumps(p.values), p.path) for p in partitions])


def _entry_from_row(con: sqlite3.Connection, row: tuple) -> TableEntry:
    database, name, path, fmt, columns, options, partition_columns = row
    partitioning = tuple(json.loads(partition_columns or "[]"))
    partitions: tuple[Partition, ...] = ()
    if partitioning:
        found = con.execute("SELECT partition_values, path FROM partitions WHERE database=? AND name=?",
                            (database, name)).fetchall()
        partitions = tuple(sorted((Partition(tuple(json.loads(values)), where) for values, where in found),
                                  key=lambda p: tuple((v is None, v or "") for v in p.values)))
    return TableEntry(
        database=database, name=name, path=path, format=fmt,
        columns=tuple(tuple(c) for c in json.loads(columns)),
        options=tuple(tuple(o) for o in json.loads(options)),
        partition_columns=partitioning, partitions=partitions,
    )
