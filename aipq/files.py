"""Local data files: which files of a path are data, and how many bytes they hold. The one owner of these
figures, so that the planner (broadcast and Cartesian checks, reduce tasks), the executor (stage output sizes)
and the statistics (fingerprints) count the same files."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def local_path(path: str) -> Path | None:
    """The local file-system path of a table or stage location; None for another scheme (hdfs://, s3a://)."""
    if "://" in path and not path.startswith("file://"):
        return None
    return Path(path.removeprefix("file://").removeprefix("file:"))


def data_file_paths(root: Path) -> list[Path]:
    """The data files of a file or folder: hidden and _-prefixed files (_SUCCESS, .crc, a run's _owner) are not
    data, nor is anything under a hidden or _-prefixed folder (_temporary)."""
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file()
                  and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts))


def path_bytes(path: str) -> int | None:
    """Total size of the data files at a local path; None when it is not local or does not exist. Cached per the
    path's inode and modification time, so that a table a workflow statement replaced is measured again."""
    local = local_path(path)
    if local is None:
        return None
    try:
        status = os.stat(local)
    except OSError:
        return None
    return _measured_bytes(str(local), status.st_ino, status.st_mtime_ns)


@lru_cache(maxsize=256)
def _measured_bytes(local: str, _inode: int, _modified: int) -> int:
    return sum(p.stat().st_size for p in data_file_paths(Path(local)))
