"""Put a finished stage output in place as a table's data, so a failed statement never damages a table and a
reader sees the old data or the new, never a mix.

The query has already been written completely (under the run's work directory) before anything here runs.
Two ways to commit, by store (``Settings.commit``):
- rename (local file systems, HDFS: a folder rename is one atomic step): create renames the output folder to
  the table's location; overwrite renames the old data aside, the new data into place, then deletes the old (if
  the second rename fails, the old data is renamed back); append renames the new files into the table's folder
  under names no other write uses.
- versioned (object stores, where a rename copies file by file): the output goes to a new version folder
  ``<location>/v-<id>`` and the catalog entry, switched to it in one SQLite transaction, is the commit; the old
  version is deleted after the switch. Append adds its files to the current version one by one (each file
  appears whole, a reader may see some of them before the statement ends).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from aipq import faults
from aipq.catalog import Catalog, Partition, TableEntry, split_name, unescape_partition_value
from aipq.engine.session import read_schema, table_rows
from aipq.engine.storage import Storage, join, name, parent
from aipq.errors import AipqError, BadInputError, ExecutionError

_VERSION = re.compile(r"v-\d{8}-\d{6}-[0-9a-f]{8}")
# Written into new data before it is moved into place, holding the write's tag: a resumed workflow tells from the
# table's current data whether an interrupted create or overwrite was committed (Spark skips ``_`` files).
COMMIT_FILE = "_aipq_commit"


@dataclass(frozen=True)
class Commit:
    """Where the table's data is after a write, and what to remove once the catalog points there."""

    path: str
    cleanup: Callable[[], None] = lambda: None


def uses_versions(storage: Storage, location: str, commit: str) -> bool:
    return commit == "versioned" or (commit == "auto" and not storage.renames_atomically(location))


def table_base(path: str) -> str:
    """The table's location: its data path, or the folder holding it when that is a version folder."""
    return parent(path) if _VERSION.fullmatch(name(path)) else path


def _new_version(base: str) -> str:
    return join(base, f"v-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}")


def _sibling(storage: Storage, target: str, source: str, tag: str) -> str:
    """``source`` moved next to ``target`` (same file system), so that the final rename is atomic."""
    sibling = join(parent(target), f".{name(target)}.aipq-{tag}-{uuid.uuid4().hex[:8]}")
    storage.rename(source, sibling)
    return sibling


def publish(storage: Storage, result: str, location: str, mode: str, commit: str = "auto",
            tag: str | None = None) -> Commit:
    """Commit the finished output ``result`` as the data of the table at ``location`` (its current data path,
    or the managed location of a new table); appended files are named with ``tag`` (a new one by default), so
    that a resumed workflow can tell whether its interrupted append was committed."""
    if mode not in ("create", "overwrite", "append"):
        raise ValueError(f"unknown write mode {mode!r}")
    tag = tag or uuid.uuid4().hex[:8]
    if mode != "append":
        storage.write_text(join(result, COMMIT_FILE), tag)
    done = _publish(storage, result, location, mode, commit, tag)
    faults.reached("table-commit")
    return done


def _publish(storage: Storage, result: str, location: str, mode: str, commit: str, tag: str) -> Commit:
    if uses_versions(storage, location, commit):
        return _publish_version(storage, result, location, mode, tag)
    storage.mkdirs(parent(location))
    if mode == "create":
        if storage.exists(location):
            raise BadInputError(f"{location} already holds data that no registered table owns",
                                hint="move or delete it, or register it with aipq table add")
        storage.rename(_sibling(storage, location, result, "new"), location)
    elif mode == "overwrite":
        staged = _sibling(storage, location, result, "new")
        old = join(parent(location), f".{name(location)}.aipq-old-{uuid.uuid4().hex[:8]}")
        had_old = storage.exists(location)
        if had_old:
            storage.rename(location, old)
        try:
            storage.rename(staged, location)
        except ExecutionError as error:
            if had_old:
                storage.rename(old, location)
            storage.delete(staged)
            raise ExecutionError(f"could not move the new data of {location} into place: {error.message}") from error
        if had_old:
            storage.delete(old)
    else:
        _append_files(storage, result, location, tag)
    return Commit(location)


def committed_here(storage: Storage, path: str, tag: str) -> bool:
    """Whether the data at ``path`` (a table's or a partition's current data) is what the write tagged ``tag``
    created or overwrote it with."""
    try:
        return storage.read_text(join(path, COMMIT_FILE)).strip() == tag
    except (OSError, UnicodeDecodeError, AipqError):
        return False


def appended_files(storage: Storage, location: str, tag: str) -> list[str]:
    """The data files an append tagged ``tag`` put in the folder at ``location``."""
    return [f.path for f in storage.data_files(location) or [] if name(f.path).startswith(f"part-aipq-{tag}-")]


def _append_files(storage: Storage, result: str, location: str, tag: str) -> None:
    found = storage.status(location)
    if found is not None and not found.is_dir:
        raise BadInputError(f"cannot append to {location}: the table is a single file",
                            hint="INSERT OVERWRITE it once (it becomes a directory), or write a new table")
    storage.mkdirs(location)
    staged = _sibling(storage, location, result, "new")
    for file in storage.data_files(staged) or []:
        storage.rename(file.path, join(location, f"part-aipq-{tag}-{name(file.path).removeprefix('part-')}"))
    storage.delete(staged)


def _publish_version(storage: Storage, result: str, current: str, mode: str, tag: str) -> Commit:
    if mode == "append" and storage.exists(current):
        _append_files(storage, result, current, tag)
        return Commit(current)
    base = table_base(current)
    if mode == "create" and storage.exists(base):
        raise BadInputError(f"{base} already holds data that no registered table owns",
                            hint="move or delete it, or register it with aipq table add")
    storage.mkdirs(base)
    version = _new_version(base)
    storage.rename(result, version)
    if mode == "create" or not storage.exists(current):
        return Commit(version)
    return Commit(version, lambda: _remove_old(storage, current, base, version))


def _remove_old(storage: Storage, old: str, base: str, kept: str) -> None:
    """The replaced data: the old version folder, or the data files a table kept directly in its folder."""
    if old != base:
        storage.delete(old)
        return
    for path, _, _ in storage.children(base):
        if name(path) != name(kept) and not name(path).startswith((".", "_")):
            storage.delete(path)


def remove_data(storage: Storage, path: str) -> None:
    """A dropped managed table's data (its version folders too)."""
    storage.delete(table_base(path))


def partition_folders(storage: Storage, root: str,
                      columns: tuple[str, ...]) -> list[tuple[tuple[str | None, ...], str]]:
    """(values, folder) of each ``col=value/…`` folder ``columns`` deep below ``root``, as Spark's partitioned
    write and Hive lay them out; folders named otherwise (``_temporary``, hidden ones) are not partitions."""
    found: list[tuple[tuple[str | None, ...], str]] = [((), root)]
    for column in columns:
        deeper = []
        for values, folder in found:
            for path, is_dir, _ in storage.children(folder):
                key, equals, text = name(path).partition("=")
                if is_dir and equals and key.lower() == column:
                    deeper.append(((*values, unescape_partition_value(text)), path))
        found = deeper
    return found


def publish_partitions(storage: Storage, result: str, table: TableEntry,
                       spec: tuple[tuple[str, str | None], ...], mode: str,
                       commit: str, tag: str | None = None) -> list[tuple[Partition, Commit]]:
    """Commit a partitioned write: the rows of each partition the output holds (a static spec: all of it)
    replace (``overwrite``) or join (``append``) that partition's data; other partitions are untouched, as in
    Hive. Returns the partitions written, with where their data now is, and each commit (to clean up after
    the catalog points at the new data)."""
    static = tuple(value for _, value in spec if value is not None)
    dynamic = tuple(column for column, value in spec if value is None)
    current = {p.values: p.path for p in table.partitions}
    written: list[tuple[Partition, Commit]] = []
    for values, folder in partition_folders(storage, result, dynamic):
        values = (*static, *values)
        done = publish(storage, folder, current.get(values) or table.partition_folder(values), mode, commit, tag)
        written.append((Partition(values, done.path), done))
    return written


def rewrite_columns(spark, source: str, target: str, columns: tuple[tuple[str, str], ...]) -> None:
    """``source``'s parquet rows written as parquet to ``target`` with ``columns`` (name, Spark SQL of its new
    value) recomputed in order, each seeing those before it."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(source)
    for column, value in columns:
        frame = frame.withColumn(column, F.expr(value))
    frame.write.parquet(target)


@dataclass(frozen=True)
class TableWrite:
    """A finished query output to commit as a table's data: a new table's (``create``), or an existing one's in
    place of its data (``overwrite``) or beside it (``append``), whole or partition by partition."""

    result: str  # the finished output
    target: str  # the table's qualified name
    mode: str  # create | overwrite | append
    format: str
    existing: TableEntry | None  # the table as the catalog has it now (None: a new table)
    location: str  # its current data path, or a new table's managed location
    tag: str  # names the write's files and its commit mark
    commit: str  # Settings.commit: rename, versioned or auto
    options: tuple[tuple[str, str], ...] = ()  # a new table's (who created it)
    columns: tuple[tuple[str, str], ...] = ()  # a new partitioned table's (its partition columns last)
    partitioned_by: tuple[str, ...] = ()  # a new table's partition columns
    partition: tuple[tuple[str, str | None], ...] | None = None  # PARTITION (…): values, or None for dynamic

    @property
    def partitioned(self) -> bool:
        return bool(self.partitioned_by) or (self.existing is not None and self.existing.partitioned)

    @property
    def spec(self) -> tuple[tuple[str, str | None], ...]:
        """Every partition column with its static value, or None where the rows give it."""
        columns = self.existing.partition_columns if self.existing is not None else self.partitioned_by
        return self.partition or tuple((c, None) for c in columns)


def partitions_written(storage: Storage, write: TableWrite) -> int:
    """How many partitions a write commits (0 for an unpartitioned table): what a resumed run checks."""
    if not write.partitioned:
        return 0
    return len(partition_folders(storage, write.result, tuple(c for c, value in write.spec if value is None)))


def commit_table_write(spark, storage: Storage, catalog: Catalog, write: TableWrite) -> None:
    """Put a finished write in place and tell the catalog: the data moved or switched in first, so that a reader
    sees the old data or the new; then the table's row count and size, for a catalog that keeps them."""
    if write.partitioned:
        _commit_partitions(storage, catalog, write)
    else:
        _commit_table(spark, storage, catalog, write)
    if catalog.records_statistics():
        record_statistics(spark, storage, catalog, write.target)


def record_statistics(spark, storage: Storage, catalog: Catalog, target: str) -> None:
    """The rows (a parquet table's from its footers), bytes and files of table ``target`` as it is now."""
    entry = catalog.lookup(target)
    if entry is None or entry.source == "spark":
        return
    found = [f for path in entry.data_paths() for f in storage.data_files(path) or []]
    catalog.record_statistics(target, table_rows(spark, storage, entry), sum(f.length for f in found), len(found))


def _commit_table(spark, storage: Storage, catalog: Catalog, write: TableWrite) -> None:
    done = publish(storage, write.result, write.location, write.mode, write.commit, write.tag)
    if write.mode == "create":
        database, name = split_name(write.target)
        catalog.register(TableEntry(database, name, done.path, write.format,
                                    read_schema(spark, storage, done.path, write.format), write.options))
    elif done.path != write.location:
        assert write.existing is not None
        catalog.register(replace(write.existing, path=done.path))
    done.cleanup()


def _commit_partitions(storage: Storage, catalog: Catalog, write: TableWrite) -> None:
    """A write to a partitioned table, partition by partition (those it does not touch stay as they were), and
    the partitions written registered."""
    table = write.existing
    if table is None:  # CREATE TABLE … PARTITIONED BY (…) AS SELECT
        if storage.data_files(write.location):
            raise BadInputError(f"{write.location} already holds data that no registered table owns",
                                hint="move or delete it, or register it with aipq table add")
        database, name = split_name(write.target)
        table = TableEntry(database, name, write.location, write.format, write.columns, write.options,
                           partition_columns=write.partitioned_by)
        storage.mkdirs(write.location)
    mode = "append" if write.mode == "append" else "overwrite"
    written = publish_partitions(storage, write.result, table, write.spec, mode, write.commit, write.tag)
    if write.existing is None:
        catalog.register(replace(table, partitions=tuple(p for p, _ in written)))
    else:
        catalog.set_partitions(write.target, added=tuple(p for p, _ in written))
    for _, done in written:
        done.cleanup()
