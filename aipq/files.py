"""What the layers before the engine know of data files: a file's path, size and modification time, and the
one question they ask of storage (``FileSource``). The file operations themselves live in ``engine/storage.py``;
planner, statistics and estimator get a ``FileSource`` injected, so that they run without Spark in tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FileInfo:
    path: str  # as the store names it (a local path, or a URI such as hdfs://nn/warehouse/t/part-0.parquet)
    relative: str  # below the table's path ("part-0.parquet", "year=2024/part-0.parquet")
    length: int
    modified_ms: int


class FileSource(Protocol):
    """Lists the data files at a path: a file, or a folder's files except hidden and _-prefixed ones (_SUCCESS,
    .crc, _temporary); None when nothing is there."""

    def data_files(self, uri: str) -> list[FileInfo] | None: ...


def total_bytes(files: FileSource, uri: str) -> int | None:
    """Bytes of the data files at ``uri``; None when nothing is there."""
    found = files.data_files(uri)
    return None if found is None else sum(f.length for f in found)


def table_bytes(sizes: Callable[[str], int | None], table) -> int | None:
    """Bytes of a catalog table's data by ``sizes`` of a path: a partitioned table's partitions that pruning left
    (0 when none is)."""
    if not table.partitioned:
        return sizes(table.path)
    return sum(sizes(path) or 0 for path in table.data_paths())


class NoFiles:
    """A FileSource that knows no file (planning with sizes unknown: every table may be large)."""

    def data_files(self, uri: str) -> list[FileInfo] | None:
        return None


def is_hidden(relative: str) -> bool:
    """Hidden and _-prefixed files, and anything under such a folder, are not data (Spark's rule)."""
    return any(part.startswith((".", "_")) for part in relative.split("/"))


class Sizes:
    """Bytes of the data at a path, each path listed once per instance (one planning, one run): the planner's
    broadcast and Cartesian checks and the executor's reduce-task rule ask for the same tables again."""

    def __init__(self, files: FileSource):
        self.files = files
        self._known: dict[str, int | None] = {}

    def __call__(self, uri: str) -> int | None:
        if uri not in self._known:
            self._known[uri] = total_bytes(self.files, uri)
        return self._known[uri]


def format_size(n: float) -> str:
    """A byte count as a person reads it (``1.5 MB``)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
