"""The stage-output cache (shared state, after SteMs and ADP): a written stage output kept under a key of its
canonical subplan (``stats/plan_key``), the fingerprints of the table files under it and the settings that change
what it computes, so that the same subplan run again reads it instead of computing it.

Only an output that is exactly its subplan's rows is kept: none pruned by another stage's summary (sibling or
transitive passing drops rows only a later join drops) and none computed with a non-deterministic function. An
entry is a folder ``<runs>/stage-cache/<key>-<command>`` holding the parquet files and ``_aipq_entry.json``
(Spark skips files whose names start with ``_``), moved into place whole. A command reads the entries it made (a
workflow's later statements, a subquery its query repeats, the other files of a batch); entries of earlier
commands only with ``--reuse`` or ``--resume``. A command that completes without ``--reuse`` removes the entries
it made or read; a failed or killed one leaves them for ``--resume``. The total is bounded by ``--cache-size``,
the least recently used entry out first, never one the running command made or read. Changed table files change
the key: entries built on the old files are never read again and go first once a new entry of the same subplan
is kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import asdict, dataclass

from aipq.config import Settings
from aipq.engine.storage import Storage, join
from aipq.errors import AipqError
from aipq.planner.stages import StageDag
from aipq.stats.fingerprint import data_files
from aipq.stats.plan_key import stage_plan_text, tables_under

FOLDER = "stage-cache"
ENTRY_FILE = "_aipq_entry.json"
USED_FILE = "_aipq_used"

# Functions whose value differs from run to run: a subplan calling one is never kept.
_NON_DETERMINISTIC = re.compile(
    r"\b(RAND|RANDN|RANDOM|UUID|SHUFFLE|CURRENT_DATE|CURRENT_TIMESTAMP|CURRENT_TIMEZONE|NOW|LOCALTIMESTAMP|"
    r"MONOTONICALLY_INCREASING_ID|SPARK_PARTITION_ID|INPUT_FILE_NAME|UNIX_TIMESTAMP\(\))\b", re.IGNORECASE)


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


class StageCache:
    """The cache as one command sees it."""

    def __init__(self, storage: Storage, root: str, limit_bytes: int, command: str | None = None):
        self.storage = storage
        self.root = root
        self.limit = limit_bytes
        self.command = command or uuid.uuid4().hex[:12]
        self.resuming = False  # ``--resume``: the entries an interrupted command left are read too
        self.keeping = False  # ``--keep-work``: the entries stay when the command completes, as with ``--reuse``
        self._entries: dict[str, CacheEntry] | None = None
        self._pinned: set[str] = set()  # made or read by this command: never evicted while it runs
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
        table whose files cannot be fingerprinted."""
        text = stage_plan_text(dag, stage_id)
        if _NON_DETERMINISTIC.search(text):
            return None
        fingerprints = []
        tables = tables_under(dag, stage_id)
        for table in tables:
            fingerprint = data_files(self.storage, table.path).fingerprint
            if not fingerprint:
                return None
            fingerprints.append(f"{table.path}={fingerprint}")
        plan_key = hashlib.sha256(text.encode()).hexdigest()[:32]
        semantics = json.dumps([settings.dialect, sorted(settings.spark_conf.items())])
        whole = "\n".join([plan_key, *sorted(fingerprints), semantics])
        return CacheKey(hashlib.sha256(whole.encode()).hexdigest()[:32], plan_key, tuple(t.path for t in tables))

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

    def lookup(self, key: str, reuse: bool) -> CacheEntry | None:
        """An entry under ``key`` this command may read (see the module's description; its own first), marked
        used."""
        readable = [e for e in self.entries().values()
                    if e.key == key and (e.command == self.command or reuse or self.resuming)]
        for entry in sorted(readable, key=lambda e: e.command != self.command):
            if not self.storage.exists(join(entry.path, ENTRY_FILE)):
                del self.entries()[_folder(entry)]  # removed by another command meanwhile
                continue
            entry.used = time.time()
            self.storage.write_text(join(entry.path, USED_FILE), f"{entry.used} {self.command}\n")
            self._pinned.add(_folder(entry))
            self.hits.append(entry)
            return entry
        return None

    # ---- keeping -----------------------------------------------------------------------------------------------
    def keep(self, key: CacheKey, source: str, rows: int, size: int, description: str) -> CacheEntry | None:
        """Move a stage output written at ``source`` into the cache; the entry, or None when it does not fit (the
        output stays where it is)."""
        folder = f"{key.key}-{self.command}"
        if folder in self.entries() or size > self.limit:
            return None
        now = time.time()
        entry = CacheEntry(key.key, key.plan_key, join(self.root, folder), rows, size, description,
                           list(key.tables), now, self.command, now)
        self._make_room(size, key)
        self.storage.write_text(join(source, ENTRY_FILE), json.dumps(asdict(entry)))
        self.storage.mkdirs(self.root)
        try:
            self.storage.rename(source, entry.path)
        except AipqError:
            self.storage.delete(join(source, ENTRY_FILE))
            return None  # the folder is gone or taken: the output stays in the run's work directory
        self.entries()[folder] = entry
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
            if _folder(entry) in self._pinned:
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
        inspection, they stay)."""
        if reuse or self.keeping:
            return
        for folder in sorted(self._pinned):
            entry = self.entries().get(folder)
            if entry is not None:
                self.remove(entry)
        self._pinned.clear()
        if self.kept and not self.storage.children(self.root):
            self.storage.delete(self.root)  # nothing left: no empty folder beside the runs'
        self.kept.clear()

    def clear(self) -> int:
        """Remove every entry; how many there were."""
        count = len(self.entries())
        self.storage.delete(self.root)
        self._entries = {}
        return count


def _folder(entry: CacheEntry) -> str:
    return entry.path.rstrip("/").rsplit("/", 1)[-1]
