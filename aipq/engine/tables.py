"""Put a finished stage output in place as a table's data, so a failed statement never damages a table.

The query has already been written completely (under the run's work directory) before anything here runs;
what remains are renames:
- create: the output directory is renamed to the table's location;
- overwrite: the old data is renamed aside, the new data renamed into place, then the old data deleted; if the
  second rename fails, the old data is renamed back;
- append: the new files are renamed into the table's directory under names no other write uses.
Renames are atomic within one file system; across file systems the data is first copied next to the target.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from aipq.errors import BadInputError, ExecutionError
from aipq.files import data_file_paths


def managed_location(home: Path, database: str, name: str) -> Path:
    """Where CREATE TABLE … AS SELECT puts a table's data (Hive's warehouse layout)."""
    return Path(home) / "warehouse" / f"{database}.db" / name


def _next_to(target: Path, source: Path, tag: str) -> Path:
    """``source`` on the target's file system, so the final rename is atomic."""
    sibling = target.parent / f".{target.name}.aipq-{tag}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(source, sibling)
    except OSError:  # another file system: copy, then the rename into place is still atomic
        shutil.copytree(source, sibling)
        shutil.rmtree(source, ignore_errors=True)
    return sibling


def publish(result: Path, location: Path, mode: str) -> None:
    location = Path(location)
    location.parent.mkdir(parents=True, exist_ok=True)
    if mode == "create":
        if location.exists():
            raise BadInputError(f"{location} already holds data that no registered table owns",
                                hint="move or delete it, or register it with aipq table add")
        staged = _next_to(location, result, "new")
        os.rename(staged, location)
    elif mode == "overwrite":
        staged = _next_to(location, result, "new")
        old = location.parent / f".{location.name}.aipq-old-{uuid.uuid4().hex[:8]}"
        had_old = location.exists()
        if had_old:
            os.rename(location, old)
        try:
            os.rename(staged, location)
        except OSError as error:
            if had_old:
                os.rename(old, location)
            shutil.rmtree(staged, ignore_errors=True)
            raise ExecutionError(f"could not move the new data of {location} into place: {error}") from error
        if had_old:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    elif mode == "append":
        if location.exists() and not location.is_dir():
            raise BadInputError(f"cannot append to {location}: the table is a single file",
                                hint="INSERT OVERWRITE it once (it becomes a directory), or write a new table")
        location.mkdir(parents=True, exist_ok=True)
        staged = _next_to(location, result, "new")
        tag = uuid.uuid4().hex[:8]
        for path in data_file_paths(staged):
            os.rename(path, location / f"part-aipq-{tag}-{path.name.removeprefix('part-')}")
        shutil.rmtree(staged, ignore_errors=True)
    else:
        raise ValueError(f"unknown write mode {mode!r}")


def remove_data(location: Path) -> None:
    location = Path(location)
    if location.is_dir():
        shutil.rmtree(location)
    elif location.exists():
        location.unlink()
