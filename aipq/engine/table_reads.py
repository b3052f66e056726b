"""Tables' DataFrames kept across the runs of one Spark session.

Reading a table makes Spark list its files and resolve the relation, each time a query reads it; a temporary view,
as ``spark.sql`` users have, does that once. A DataFrame holds the listing it was made with, so one is reused only
while the files at every path it reads are the same files (paths, sizes and modification times, as the statistics
repository and the stage-output cache fingerprint them); any change reads the table afresh. Tables found in Spark's
own catalog are read by name every time (their files are Spark's to track). A query handed to Spark reads each kept
DataFrame through a temporary view made once for it, as a ``spark.sql`` user's views are made once, not per query.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict

from aipq.catalog import TableEntry
from aipq.engine.session import read_table
from aipq.files import FileSource
from aipq.stats.fingerprint import data_files

KEPT_TABLES = 64  # DataFrames kept per session; the least recently read goes first
VIEW_PREFIX = "__aipq_table_"  # a kept read's temporary view: no user view has such a name
_VIEW_NUMBERS = itertools.count()


class TableReads:
    def __init__(self, limit: int = KEPT_TABLES):
        self.limit = limit
        self._frames: OrderedDict[tuple, object] = OrderedDict()
        self._views: dict[tuple, str] = {}

    def read(self, spark, files: FileSource, entry: TableEntry):
        """The table's rows as a DataFrame: the one made before while its files are unchanged, else a new one."""
        return self._kept(spark, files, entry)[1]

    def view(self, spark, files: FileSource, entry: TableEntry) -> tuple[str, bool]:
        """A temporary view of the table's read and whether it is kept: a kept read's view is made once, the
        view of a read that cannot be kept (its files not there yet) is the caller's to drop after its run."""
        key, frame = self._kept(spark, files, entry)
        name = self._views.get(key) if key is not None else None
        if name is None:
            name = f"{VIEW_PREFIX}{next(_VIEW_NUMBERS)}"
            frame.createOrReplaceTempView(name)
            if key is not None:
                self._views[key] = name
        return name, key is not None

    def _kept(self, spark, files: FileSource, entry: TableEntry) -> tuple[tuple | None, object]:
        if entry.spark_name is not None:  # read by name: Spark resolves it (a view's files are listed there)
            return None, read_table(spark, entry)
        fingerprints = tuple(data_files(files, path).fingerprint for path in entry.data_paths())
        if not all(fingerprints) and not entry.partitioned:  # nothing there (yet): read it as it is each time
            return None, read_table(spark, entry)
        key = (entry, fingerprints)
        frame = self._frames.get(key)
        if frame is None:
            frame = read_table(spark, entry)
            self._frames[key] = frame
            while len(self._frames) > self.limit:
                self._forget(spark, self._frames.popitem(last=False)[0])
        self._frames.move_to_end(key)
        return key, frame

    def _forget(self, spark, key: tuple) -> None:
        view = self._views.pop(key, None)
        if view is not None:
            spark.catalog.dropTempView(view)


_SESSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def session_table_reads(spark) -> TableReads:
    """The session's kept tables (a new session keeps its own)."""
    reads = _SESSIONS.get(spark)
    if reads is None:
        reads = _SESSIONS[spark] = TableReads()
    return reads
