"""What identifies a table's data: its files' paths, sizes and modification times (the repository's key part
that makes statistics of changed data unusable), and the split count Spark will read it in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from aipq.files import FileSource


@dataclass(frozen=True)
class DataFiles:
    path: str
    fingerprint: str  # sha256 over (relative path, size, mtime_ns) of every data file; "" if nothing there
    files: int
    bytes: int
    sizes: tuple[int, ...]
    paths: tuple[str, ...] = ()  # the data files themselves, in the order of ``sizes``
    modified_ms: tuple[int, ...] = ()  # their modification times, in the same order

    def splits(self, max_partition_bytes: int = 128 * 1024 * 1024, open_cost: int = 4 * 1024 * 1024,
               parallelism: int = 2) -> int:
        """Map tasks Spark plans for a scan (FilePartition.maxSplitBytes: splits are at most
        min(maxPartitionBytes, max(openCost, bytes per core)); small files are packed together)."""
        if not self.sizes:
            return 0
        per_core = (self.bytes + open_cost * len(self.sizes)) / max(1, parallelism)
        split = min(max_partition_bytes, max(open_cost, per_core))
        pieces = sorted((min(split, size - offset) for size in self.sizes
                         for offset in range(0, max(size, 1), int(split))), reverse=True)
        partitions, current = 0, 0.0
        for piece in pieces:  # Spark's next-fit packing of file pieces into partitions
            if current > 0 and current + piece > split:
                partitions, current = partitions + 1, 0.0
            current += piece + open_cost
        return partitions + (1 if current > 0 else 0)


def data_files(files: FileSource, path: str) -> DataFiles:
    """Fingerprint of the data at ``path`` (a file or a folder of files, on any store ``files`` reaches;
    hidden and _-prefixed files, such as _SUCCESS and .crc, are not data)."""
    found = files.data_files(path)
    if found is None:
        return DataFiles(path, "", 0, 0, ())
    digest = hashlib.sha256()
    for file in found:
        digest.update(f"{file.relative}\0{file.length}\0{file.modified_ms}\n".encode())
    return DataFiles(path, digest.hexdigest()[:32], len(found), sum(f.length for f in found),
                     tuple(f.length for f in found), tuple(f.path for f in found), tuple(f.modified_ms for f in found))
