"""The statistics repository (the paper's Fig. 4 "statistics repository"): an SQLite file under the aipq home.

Table statistics are keyed by the table's data path and valid only for the fingerprint they were collected on
(files, sizes, modification times): when the data changes, lookups stop returning them and the next query
collects them again. Stage-output statistics are keyed by a canonical form of the stage's subplan and carry
the fingerprints of the tables under it. Several aipq processes may share one repository: the database runs in
WAL mode, every write is one short ``BEGIN IMMEDIATE`` transaction, and rows are replaced whole, so a reader
sees each table's statistics from one collection or another, never a mix within a column.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

APPLICATION_ID = 0x61697071  # "aipq": marks the file as ours
SCHEMA_VERSION = 2

# What each older schema version needs to become the current one.
MIGRATIONS = {1: "ALTER TABLE column_stats ADD COLUMN sample TEXT;"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS table_stats (
    path TEXT PRIMARY KEY, name TEXT NOT NULL, fingerprint TEXT NOT NULL, rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL, files INTEGER NOT NULL, splits INTEGER NOT NULL,
    collected_at REAL NOT NULL, collected_by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS column_stats (
    path TEXT NOT NULL, column_name TEXT NOT NULL, fingerprint TEXT NOT NULL, data_type TEXT NOT NULL,
    rows INTEGER NOT NULL, nulls INTEGER NOT NULL, ndv REAL NOT NULL, lg_k INTEGER NOT NULL, sketch BLOB,
    width REAL NOT NULL, min_value TEXT, max_value TEXT, collected_at REAL NOT NULL, collected_by TEXT NOT NULL,
    sample TEXT, PRIMARY KEY (path, column_name));
CREATE TABLE IF NOT EXISTS stage_stats (
    plan_key TEXT PRIMARY KEY, description TEXT NOT NULL, inputs TEXT NOT NULL, rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL, columns TEXT NOT NULL, collected_at REAL NOT NULL, collected_by TEXT NOT NULL);
"""


@dataclass
class ColumnStats:
    column: str
    data_type: str
    rows: int
    nulls: int
    ndv: float
    lg_k: int
    width: float  # average bytes per value
    min_value: str | None = None
    max_value: str | None = None
    sketch: bytes | None = field(default=None, repr=False)  # Spark/DataSketches HLL, mergeable
    collected_at: float = 0.0
    collected_by: str = ""
    # text columns: a uniform sample of the distinct values (LIKE's selectivity is the share that matches)
    sample: tuple[str, ...] | None = field(default=None, repr=False)

    def public(self) -> dict:
        values = asdict(self)
        values.pop("sketch")
        values.pop("sample")
        values["sampled_values"] = len(self.sample or ())
        return values


@dataclass
class TableStats:
    path: str
    name: str
    fingerprint: str
    rows: int
    bytes: int
    files: int
    splits: int
    collected_at: float = 0.0
    collected_by: str = ""
    columns: dict[str, ColumnStats] = field(default_factory=dict)

    def public(self) -> dict:
        values = {k: v for k, v in asdict(self).items() if k != "columns"}
        values["columns"] = {name: c.public() for name, c in sorted(self.columns.items())}
        return values


@dataclass
class StageStats:
    plan_key: str
    description: str
    inputs: dict[str, str]  # table path → fingerprint the subplan read
    rows: int
    bytes: int
    columns: dict[str, float] = field(default_factory=dict)  # column → NDV estimate
    collected_at: float = 0.0
    collected_by: str = ""


# Per database path, the files' state (``_file_state``) this process saw just after ``_initialize`` checked and
# set up the database: while the database and its write-ahead log are in that state, the check's answer stands and
# the next repository opened on them in this process skips it (its write transaction and integrity check cost a
# commit to disk per query).
_CHECKED: dict[str, tuple] = {}
_CHECKED_LOCK = threading.Lock()


def _file_state(path: Path) -> tuple | None:
    """What changes whenever the database or its log is written, moved or replaced: each file's device, inode,
    size, and modification and change times (None when the database is missing)."""
    states = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
        except FileNotFoundError:
            if not suffix:
                return None
            states.append(None)
            continue
        states.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(states)


def _file_identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` names now (device and inode; None when there is none)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


@contextmanager
def _transaction(con: sqlite3.Connection, begin: str) -> Iterator[None]:
    """One transaction on ``con``: committed when the block completes, rolled back when it raises."""
    con.execute(begin)
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


class RepositoryProblem(Exception):
    """The file is not an aipq statistics database."""


class StatsRepository:
    """Statistics kept across queries in ``<home>/stats.db``."""

    def __init__(self, home: Path, notice: Callable[[str], None] | None = None):
        self.path = Path(home) / "stats.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.notice = notice or (lambda message: print(message, file=sys.stderr))
        self._readers = threading.local()  # each thread's reading connection (``_reading``)
        try:
            self._initialize()
        except (sqlite3.DatabaseError, RepositoryProblem) as problem:
            aside = self.path.with_name(f"stats.db.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                candidate = Path(str(self.path) + suffix)
                if candidate.exists():
                    candidate.replace(Path(str(aside) + suffix))
            self.notice(f"warning: the statistics repository {self.path} was not usable ({problem}); moved it to "
                        f"{aside.name} and started a new one (statistics are collected again as queries run)")
            self._initialize()

    def _initialize(self) -> None:
        """Check that the file is an aipq statistics database of this schema (creating or migrating it), unless
        this process checked it already and neither it nor its log changed since (``_CHECKED``)."""
        key = str(self.path.resolve())
        state = _file_state(self.path)
        if state is not None and _CHECKED.get(key) == state:
            return
        self._check_and_create()
        after = _file_state(self.path)
        with _CHECKED_LOCK:
            if after is None:
                _CHECKED.pop(key, None)
            else:
                _CHECKED[key] = after

    def _check_and_create(self) -> None:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("PRAGMA busy_timeout = 60000")
            application_id = con.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if application_id == 0 and tables:
                raise RepositoryProblem("it holds tables but is not an aipq statistics database")
            if application_id not in (0, APPLICATION_ID):
                raise RepositoryProblem(f"foreign SQLite application id {application_id:#x}")
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if application_id == APPLICATION_ID and version != SCHEMA_VERSION and version not in MIGRATIONS:
                raise RepositoryProblem(f"schema version {version}, this aipq uses {SCHEMA_VERSION}")
            con.execute("PRAGMA journal_mode = WAL")
            migrations = "".join(MIGRATIONS[v] for v in range(version, SCHEMA_VERSION)) \
                if application_id == APPLICATION_ID else ""
            con.executescript(f"BEGIN IMMEDIATE; {migrations} {SCHEMA} PRAGMA application_id = {APPLICATION_ID};"
                              f" PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            check = con.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise RepositoryProblem(f"integrity check failed: {check}")
        finally:
            con.close()

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if not write:
            with self._reading() as con:
                yield con
            return
        con = self._open()
        try:
            with _transaction(con, "BEGIN IMMEDIATE"):
                yield con
        finally:
            con.close()

    def _open(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("PRAGMA busy_timeout = 60000")
            con.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            con.close()
            raise
        return con

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction on this thread's reading connection: opened once per thread and kept, since a
        query's planning reads the repository tens of times (a connection each cost more than the read); opened
        again when the database file is no longer the one it opened (moved aside, replaced by another process)."""
        identity = _file_identity(self.path)
        held = getattr(self._readers, "held", None)
        if held is None or held[1] != identity:
            if held is not None:
                held[0].close()
            held = self._readers.held = (self._open(), identity)
        with _transaction(held[0], "BEGIN"):
            yield held[0]

    # tables ------------------------------------------------------------------------------------------------

    def save_table(self, stats: TableStats) -> None:
        """Store a collection: the table row and every column collected (other columns of the same fingerprint
        stay; columns of an older fingerprint are dropped)."""
        with self._connect(write=True) as con:
            con.execute("DELETE FROM column_stats WHERE path = ? AND fingerprint <> ?", (stats.path, stats.fingerprint))
            con.execute("INSERT OR REPLACE INTO table_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (stats.path, stats.name, stats.fingerprint, stats.rows, stats.bytes, stats.files,
                         stats.splits, stats.collected_at, stats.collected_by))
            for c in stats.columns.values():
                con.execute("INSERT OR REPLACE INTO column_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (stats.path, c.column, stats.fingerprint, c.data_type, c.rows, c.nulls, c.ndv, c.lg_k,
                             c.sketch, c.width, c.min_value, c.max_value, c.collected_at, c.collected_by,
                             None if c.sample is None else json.dumps(list(c.sample))))

    def table(self, path: str, fingerprint: str | None = None) -> TableStats | None:
        """The table's statistics, if collected on data with this fingerprint (any, if None)."""
        with self._connect() as con:
            row = con.execute("SELECT * FROM table_stats WHERE path = ?", (path,)).fetchone()
            if row is None or (fingerprint is not None and row[2] != fingerprint):
                return None
            stats = TableStats(*row)
            for c in con.execute("SELECT column_name, data_type, rows, nulls, ndv, lg_k, width, min_value, max_value,"
                                 " sketch, collected_at, collected_by, sample FROM column_stats"
                                 " WHERE path = ? AND fingerprint = ?", (path, stats.fingerprint)):
                sample = None if c[-1] is None else tuple(json.loads(c[-1]))
                stats.columns[c[0]] = ColumnStats(*c[:-1], sample=sample)
            return stats

    def tables(self) -> list[TableStats]:
        with self._connect() as con:
            paths = [r[0] for r in con.execute("SELECT path FROM table_stats ORDER BY name, path")]
        return [t for t in (self.table(p) for p in paths) if t is not None]

    def clear(self, path: str | None = None) -> int:
        """Forget one table's statistics (and stage statistics that read it), or everything; returns how many
        tables were forgotten."""
        with self._connect(write=True) as con:
            if path is None:
                count = con.execute("SELECT count(*) FROM table_stats").fetchone()[0]
                for table in ("table_stats", "column_stats", "stage_stats"):
                    con.execute(f"DELETE FROM {table}")
                return count
            count = con.execute("DELETE FROM table_stats WHERE path = ?", (path,)).rowcount
            con.execute("DELETE FROM column_stats WHERE path = ?", (path,))
            stale = [key for key, inputs in con.execute("SELECT plan_key, inputs FROM stage_stats")
                     if path in json.loads(inputs)]
            con.executemany("DELETE FROM stage_stats WHERE plan_key = ?", [(k,) for k in stale])
            return count

    # stage outputs -----------------------------------------------------------------------------------------

    def save_stage(self, stats: StageStats) -> None:
        with self._connect(write=True) as con:
            con.execute("INSERT OR REPLACE INTO stage_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (stats.plan_key, stats.description, json.dumps(stats.inputs), stats.rows, stats.bytes,
                         json.dumps(stats.columns), stats.collected_at, stats.collected_by))

    def stage(self, plan_key: str, current: Callable[[str], str]) -> StageStats | None:
        """A stage output's statistics if every table under it still has the fingerprint it had then;
        ``current`` gives a table path's fingerprint now."""
        with self._connect() as con:
            row = con.execute("SELECT * FROM stage_stats WHERE plan_key = ?", (plan_key,)).fetchone()
        if row is None:
            return None
        stats = StageStats(row[0], row[1], json.loads(row[2]), row[3], row[4], json.loads(row[5]), row[6], row[7])
        if any(current(path) != fingerprint for path, fingerprint in stats.inputs.items()):
            return None
        return stats

    def stages(self) -> list[StageStats]:
        with self._connect() as con:
            rows = con.execute("SELECT * FROM stage_stats ORDER BY collected_at").fetchall()
        return [StageStats(r[0], r[1], json.loads(r[2]), r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows]
