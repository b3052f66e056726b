"""The table catalog: names → data files, formats and schemas, persisted under the aipq home.

It follows Spark's catalog conventions: tables live in databases (``default`` unless qualified as
``db.table``), names are case-insensitive, and formats are Spark data source names (parquet, orc, csv).
Registrations are kept in SQLite so that concurrent aipq processes can read and write them safely. Tables not
registered here can still come from Spark's own session catalog (e.g. a Hive metastore configured with
``--conf``); see ``aipq.engine.session.SparkCatalogLookup``.

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


@dataclass(frozen=True)
class TableEntry:
    database: str
    name: str
    path: str
    format: str
    columns: tuple[tuple[str, str], ...]  # (column name, Spark SQL type)
    options: tuple[tuple[str, str], ...] = ()
    source: str = "aipq"  # "aipq" (registered here) or "spark" (found in Spark's catalog)

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.name}"

    def column_types(self) -> dict[str, str]:
        return dict(self.columns)


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
                            " options TEXT, registered_at REAL)")
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
        """Add or replace a registration; returns True when it replaced an existing one."""
        with self._connect(write=True) as con:
            existed = con.execute(
                "SELECT 1 FROM tables WHERE database=? AND name=?", (entry.database, entry.name)
            ).fetchone()
            con.execute(
                "INSERT OR REPLACE INTO tables VALUES (?,?,?,?,?,?,?)",
                (entry.database, entry.name, entry.path, entry.format, json.dumps(entry.columns),
                 json.dumps(entry.options), time.time()),
            )
        return existed is not None

    def drop(self, name: str) -> bool:
        database, table = split_name(name)
        with self._connect(write=True) as con:
            cur = con.execute("DELETE FROM tables WHERE database=? AND name=?", (database, table))
        return cur.rowcount > 0

    def entries(self) -> list[TableEntry]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT database, name, path, format, columns, options FROM tables ORDER BY database, name"
            ).fetchall()
        return [_entry_from_row(row) for row in rows]

    def find(self, database: str, name: str) -> TableEntry | None:
        with self._connect() as con:
            row = con.execute(
                "SELECT database, name, path, format, columns, options FROM tables WHERE database=? AND name=?",
                (database, name),
            ).fetchone()
        if row is not None:
            return _entry_from_row(row)
        for fallback in self.fallbacks:
            found = fallback.find(database, name)
            if found is not None:
                return found
        return None

    def lookup(self, name: str) -> TableEntry | None:
        return self.find(*split_name(name))

    def known_names(self) -> list[str]:
        names = []
        for entry in self.entries():
            names.append(entry.name if entry.database == DEFAULT_DATABASE else entry.qualified_name)
        return names


def _entry_from_row(row: tuple) -> TableEntry:
    database, name, path, fmt, columns, options = row
    return TableEntry(
        database=database, name=name, path=path, format=fmt,
        columns=tuple(tuple(c) for c in json.loads(columns)),
        options=tuple(tuple(o) for o in json.loads(options)),
    )
