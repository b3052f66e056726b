"""The stage-output cache (shared state, after SteMs and ADP): a written stage output kept under a key of
everything that decides its rows, so that the same subplan run again reads it instead of computing it. The key:
the canonical subplan (``stats/plan_key``); how each table under it is read (format, options, schema) and the
fingerprint of the files at every location it reads, each partition's too; the Spark settings that can change
results, the session's and the command's (its time zone among them); the versions of Spark and of aipq's code.

Only an output that is exactly its subplan's rows is kept: none pruned by another stage's summary (sibling or
transitive passing drops rows only a later join drops) and none computed with a non-deterministic function. An
entry is a folder ``<runs>/stage-cache/<key>-<command>`` holding the parquet files and ``_aipq_entry.json``
(with the files' names and sizes; Spark skips files whose names start with ``_``), moved into place whole. A hit
is checked (its files, then its row count) and a damaged entry computed again. A command reads the entries it
made (a workflow's later statements, a subquery its query repeats, the other files of a batch); entries of
earlier commands only with ``--reuse`` or ``--resume``. A command that completes without ``--reuse`` removes
the entries it made or read; a failed or killed one leaves them for ``--resume``. While it runs, a command marks
the entries it uses with its process (``_aipq_used``), and neither eviction nor ``clear`` removes those. The
total is bounded by ``--cache-size``, the least recently used entry out first. Changed inputs change the key:
entries built on the old ones are never read again and go first once a new entry of the same subplan is kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from aipq.catalog import TableEntry
from aipq.config import Settings
from aipq.engine.processes import process_alive, process_start
from aipq.engine.session import stage_sql_conf
from aipq.engine.storage import Storage, join
from aipq.errors import AipqError, warn
from aipq.planner.stages import StageDag
from aipq.stats.fingerprint import DataFiles, data_files
from aipq.stats.plan_key import stage_plan_text, tables_under
from aipq.version import code_version

FOLDER = "stage-cache"
ENTRY_FILE = "_aipq_entry.json"
USED_FILE = "_aipq_used"

# Runtime settings that change how fast a query runs, never its rows: left out of the key (aipq sets some per stage).
_PERFORMANCE_ONLY = (
    "spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.",
    "spark.sql.optimizer.runtime.", "spark.sql.optimizer.dynamicPartitionPruning.", "spark.sql.files.",
    "spark.sql.codegen.", "spark.sql.execution.arrow.", "spark.sql.warehouse.dir", "spark.sql.ui.",
    "spark.sql.broadcastTimeout", "spark.sql.cbo.", "spark.sql.join.preferSortMergeJoin", "spark.sql.statistics.",
)


def changes_results(key: str) -> bool:
    """Whether a Spark setting may change a query's rows (when in doubt, it may)."""
    return key.startswith("spark.sql.") and not key.startswith(_PERFORMANCE_ONLY)


def session_result_settings(spark) -> dict[str, str]:
    """The settings of a running session that may change a query's rows: those set (by Spark's defaults file, the
    user or aipq), its time zone (by default the JVM's) and Spark's version."""
    values = {k: v for k, v in spark.conf.getAll.items() if changes_results(k)}
    values["spark.sql.session.timeZone"] = spark.conf.get("spark.sql.session.timeZone")
    values["spark.version"] = spark.version
    return values


def session_user_functions(spark) -> frozenset[str]:
    """The names (lower case, unqualified) of the functions a session has beyond Spark's own: its temporary
    functions (Python UDFs, ``spark.udf.register``) and the catalog's. The cache sees a function's name, never its
    code, which a UDF registered again under that name changes: a subplan calling one is never kept."""
    return frozenset(str(row[0]).rsplit(".", 1)[-1].strip("`").lower()
                     for row in spark.sql("SHOW USER FUNCTIONS").collect())


# Functions whose value differs from run to run: a subplan calling one is never kept.
_NON_DETERMINISTIC = re.compile(
    r"\b(RAND|RANDN|RANDOM|RANDSTR|UNIFORM|UUID|SHUFFLE|CURRENT_DATE|CURRENT_TIMESTAMP|CURRENT_TIME|"
    r"CURRENT_TIMEZONE|NOW|LOCALTIMESTAMP|MONOTONICALLY_INCREASING_ID|SPARK_PARTITION_ID|INPUT_FILE_NAME|"
    r"INPUT_FILE_BLOCK_START|INPUT_FILE_BLOCK_LENGTH|CURRENT_USER|REFLECT|JAVA_METHOD|TRY_REFLECT)\b"
    r"|\b(USER|SESSION_USER)\s*\(|\bUNIX_TIMESTAMP\s*\(\s*\)", re.IGNORECASE)


@dataclass(frozen=True)
class CacheKey:
    key: str
    plan_key: str
    tables: tuple[str, ...]  # the paths of the tables under the subplan


@dataclass
class CacheEntry:
    key: str
    plan_key: str  # the subplan alone: entries of one subplan over older files are replaced first
    path: str
    rows: int
    bytes: int
    description: str  # the stage as the run that kept it named it ("S2 JOIN")
    tables: list[str]
    created: float
    command: str  # the command that kept it
    used: float = 0.0
    files: list[list] = field(default_factory=list)  # [name, bytes] of each data file, checked on a hit


class StageCache:
    """The cache as one command sees it."""

    def __init__(self, storage: Storage, root: str, limit_bytes: int, command: str | None = None,
                 session_settings: Callable[[], dict[str, str]] | None = None,
                 user_functions: Callable[[], frozenset[str]] | None = None):
        self.storage = storage
        # the running session's settings that can change a query's rows, and its own functions (read once)
        self.session_settings = functools.cache(session_settings or dict)
        self.user_functions = functools.cache(user_functions or frozenset)
        self.root = root
        self.limit = limit_bytes
        self.command = command or uuid.uuid4().hex[:12]
        self.resuming = False  # ``--resume``: the entries an interrupted command left are read too
        self.keeping = False  # ``--keep-work``: the entries stay when the command completes, as with ``--reuse``
        self._entries: dict[str, CacheEntry] | None = None
        self._pinned: set[str] = set()  # made or read by this command: never evicted while it runs
        self._digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) of a table file: its digest
        self.hits: list[CacheEntry] = []
        self.kept: list[CacheEntry] = []

    # ---- keys --------------------------------------------------------------------------------------------------
    def stage_key(self, dag: StageDag, stage_id: int, settings: Settings) -> CacheKey | None:
        """Where the cache holds or would keep a stage's output: neither the result nor a summary pre-pass."""
        stage = dag.stage(stage_id)
        if stage is dag.final or stage.operator == "SCAN":
            return None
        return self.key(dag, stage_id, settings)

    def key(self, dag: StageDag, stage_id: int, settings: Settings) -> CacheKey | None:
        """The key of a stage's output, or None when it cannot be cached: a non-deterministic function, or a
        table whose files cannot be fingerprinted. It covers everything that decides the output's rows: the
        subplan, how each table under it is read (format, options, schema) and the files at every location it
        reads (each partition's too), the settings that change results, and the versions of aipq and Spark. A subplan
        calling a function of the session's own (a UDF: its code is not in the key) is not cached either."""
        text = stage_plan_text(dag, stage_id)
        if _NON_DETERMINISTIC.search(text) or self._calls_user_function(text):
            return None
        inputs = []
        tables = tables_under(dag, stage_id)
        for table in tables:
            read = self._table_input(table)
            if read is None:
                return None
            inputs.append(read)
        plan_key = hashlib.sha256(text.encode()).hexdigest()[:32]
        semantics = json.dumps([settings.dialect, sorted(self.result_settings(settings).items()), code_version()])
        whole = "\n".join([plan_key, *sorted(inputs), semantics])
        return CacheKey(hashlib.sha256(whole.encode()).hexdigest()[:32], plan_key, tuple(t.path for t in tables))

    def _calls_user_function(self, plan_text: str) -> bool:
        """Whether a subplan calls a function of the session's own (``session_user_functions``)."""
        return any(re.search(rf"(?<![\w.`]){re.escape(name)}`?\s*\(", plan_text, re.IGNORECASE)
                   for name in self.user_functions())

    def _table_input(self, table: TableEntry) -> str | None:
        """How a table is read and the fingerprint of the files at each location read, as text; None when an
        unpartitioned table's files cannot be fingerprinted (Spark's own catalog, nothing there)."""
        described = [table.path, table.format, sorted(table.options), list(table.columns),
                     list(table.partition_columns)]
        for path in table.data_paths():
            found = data_files(self.storage, path)
            if not found.fingerprint and not table.partitioned:
                return None
            # an empty partition has no files, and keys as such
            described.append([path, found.fingerprint, self._content_digests(found)])
        return json.dumps(described)

    def _content_digests(self, found: DataFiles) -> list[str]:
        """What identifies each file's content (``Storage.content_digests``), read once per command and file
        version: a file replaced by one of the same size and modification time changes the key."""
        versions = list(zip(found.paths, found.sizes, found.modified_ms, strict=True))
        missing = [v for v in versions if v not in self._digests]
        digests = self.storage.content_digests([path for path, _, _ in missing])
        self._digests.update(zip(missing, digests, strict=True))
        return [self._digests[v] for v in versions]

    def result_settings(self, settings: Settings) -> dict[str, str]:
        """The Spark settings the stage's rows depend on: the session's (its time zone among them, which may come
        from the JVM's default) with those this command sets over them."""
        values = dict(self.session_settings())
        values.update({k: v for k, v in {**stage_sql_conf(settings), **settings.spark_conf}.items()
                       if changes_results(k)})
        return values

    # ---- reading -----------------------------------------------------------------------------------------------
    def entries(self) -> dict[str, CacheEntry]:
        """Every entry, by its folder's name (``<key>-<command>``: commands that may not read each other's entries
        keep one each)."""
        if self._entries is None:
            self._entries = {}
            for path, is_dir, _ in self.storage.children(self.root):
                entry = self._read_entry(path) if is_dir else None
                if entry is not None:
                    self._entries[_folder(entry)] = entry
        return self._entries

    def _read_entry(self, path: str) -> CacheEntry | None:
        try:
            entry = CacheEntry(**json.loads(self.storage.read_text(join(path, ENTRY_FILE))))
        except (AipqError, OSError, ValueError, TypeError):
            return None  # not an entry (a folder being moved in, or damaged): never read
        entry.path = path  # the cache folder may have moved with its home
        try:
            entry.used = float(self.storage.read_text(join(path, USED_FILE)).split()[0])
        except (AipqError, OSError, ValueError, IndexError):
            entry.used = entry.created
        return entry

    def lookup(self, key: str, reuse: bool, count_rows: Callable[[str], int] | None = None) -> CacheEntry | None:
        """An entry under ``key`` this command may read (see the module's description; its own first), marked
        used. An entry whose files are not those it was kept with, or (with ``count_rows``) whose rows cannot be
        read or are not as many, is removed with a warning: the stage is computed again."""
        readable = [e for e in self.entries().values()
                    if e.key == key and (e.command == self.command or reuse or self.resuming)]
        for entry in sorted(readable, key=lambda e: e.command != self.command):
            if not self.storage.exists(join(entry.path, ENTRY_FILE)):
                del self.entries()[_folder(entry)]  # removed by another command meanwhile
                continue
            damage = self._damage(entry, count_rows)
            if damage is not None:
                warn(f"the stage-output cache's copy of {entry.description} at {entry.path} is damaged ({damage}); "
                     "it is removed and the stage computed again")
                self.remove(entry)
                continue
            entry.used = time.time()
            self._mark_used(entry, running=True)
            self._pinned.add(_folder(entry))
            self.hits.append(entry)
            return entry
        return None

    def _damage(self, entry: CacheEntry, count_rows: Callable[[str], int] | None) -> str | None:
        """What is wrong with an entry's files, or None when they are as kept."""
        found = sorted([f.relative, f.length] for f in self.storage.data_files(entry.path) or [])
        if found != sorted(list(f) for f in entry.files):
            return f"{len(found)} data file(s) where {len(entry.files)} were kept, or of other sizes"
        if count_rows is None:
            return None
        try:
            rows = count_rows(entry.path)
        except Exception as error:  # noqa: BLE001 — any failure to read it: recompute instead of failing the run
            return f"its files cannot be read: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        return None if rows == entry.rows else f"{rows:,} rows where {entry.rows:,} were kept"

    def _mark_used(self, entry: CacheEntry, running: bool) -> None:
        """Record when the entry was last used and, while a command runs with it, which process that is (``clear``
        leaves such an entry alone)."""
        owner = f" {socket.gethostname()} {os.getpid()} {process_start(os.getpid())}" if running else ""
        self.storage.write_text(join(entry.path, USED_FILE), f"{entry.used} {self.command}{owner}\n")

    def in_use_elsewhere(self, entry: CacheEntry) -> bool:
        """Whether another command that is still running reads or made the entry."""
        try:
            _, command, host, pid, *started = self.storage.read_text(join(entry.path, USED_FILE)).split()
        except (AipqError, OSError, ValueError):
            return False  # no running command marked it
        if command == self.command:
            return False
        if host != socket.gethostname():
            return time.time() - entry.used < 3600  # another machine's: in use while recently used
        return process_alive(int(pid), started[0] if started else "")

    # ---- keeping -----------------------------------------------------------------------------------------------
    def keep(self, key: CacheKey, source: str, rows: int, size: int, description: str) -> CacheEntry | None:
        """Move a stage output written at ``source`` into the cache; the entry, or None when it does not fit (the
        output stays where it is)."""
        folder = f"{key.key}-{self.command}"
        if folder in self.entries() or size > self.limit:
            return None
        now = time.time()
        files = sorted([f.relative, f.length] for f in self.storage.data_files(source) or [])
        entry = CacheEntry(key.key, key.plan_key, join(self.root, folder), rows, size, description,
                           list(key.tables), now, self.command, now, files)
        self._make_room(size, key)
        self.storage.write_text(join(source, ENTRY_FILE), json.dumps(asdict(entry)))
        self.storage.mkdirs(self.root)
        try:
            self.storage.rename(source, entry.path)
        except AipqError:
            self.storage.delete(join(source, ENTRY_FILE))
            return None  # the folder is gone or taken: the output stays in the run's work directory
        self.entries()[folder] = entry
        self._mark_used(entry, running=True)
        self._pinned.add(folder)
        self.kept.append(entry)
        return entry

    def _make_room(self, size: int, key: CacheKey) -> None:
        """Evict the entries of the same subplan over other files (or other settings), then the least recently
        used, until ``size`` more bytes fit; never one this command made or read."""
        entries = self.entries()
        outdated = [e for e in entries.values() if e.plan_key == key.plan_key and e.key != key.key]
        others = sorted((e for e in entries.values() if e not in outdated), key=lambda e: e.used)
        total = sum(e.bytes for e in entries.values())
        for entry in [*outdated, *others]:
            if _folder(entry) in self._pinned or self.in_use_elsewhere(entry):
                continue
            if entry not in outdated and total + size <= self.limit:
                break
            self.remove(entry)
            total -= entry.bytes

    def remove(self, entry: CacheEntry) -> None:
        self.storage.delete(entry.path)
        self.entries().pop(_folder(entry), None)

    def finish(self, reuse: bool) -> None:
        """A command that completed: without ``reuse`` the entries it made or read go (with it, or when kept for
        inspection, they stay, no longer marked as in use)."""
        if reuse or self.keeping:
            for folder in sorted(self._pinned):
                entry = self.entries().get(folder)
                if entry is not None and self.storage.exists(entry.path):
                    self._mark_used(entry, running=False)
            return
        for folder in sorted(self._pinned):
            entry = self.entries().get(folder)
            if entry is not None:
                self.remove(entry)
        self._pinned.clear()
        if self.kept and not self.storage.children(self.root):
            self.storage.delete(self.root)  # nothing left: no empty folder beside the runs'
        self.kept.clear()

    def clear(self) -> tuple[int, int]:
        """Remove every entry but those a running command uses; how many were removed, and how many kept."""
        in_use = [e for e in self.entries().values() if self.in_use_elsewhere(e)]
        if not in_use:
            count = len(self.entries())
            self.storage.delete(self.root)
            self._entries = {}
            return count, 0
        removed = 0
        for entry in list(self.entries().values()):
            if entry not in in_use:
                self.remove(entry)
                removed += 1
        return removed, len(in_use)


def _folder(entry: CacheEntry) -> str:
    return entry.path.rstrip("/").rsplit("/", 1)[-1]
