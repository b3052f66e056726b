"""Hostile inputs to ``--reuse`` (issue 80): a table's file replaced by a different one of the same size and
modification time, the way ``cp -p``, ``rsync -t`` and object stores' copies leave it, never serves the stage
outputs computed over the old file: the stage-output cache keys on what identifies a file's content (the store's
checksum, a parquet footer's digest, the bytes' digest), not on its size and time alone."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from conftest import Aipq

import aipq
from aipq.engine import jvm
from aipq.engine.storage import local_storage

REUSE = ("--staging", "hive", "--broadcast-threshold", "0", "--reuse", "--analyze", "--quiet")
REUSED = "reused from the stage-output cache"
QUERY = "select k, sum(v) as s from {table} group by k order by k"

# Two files each of the same size, with other rows: k in 0..2 and v = row number (+1000 in the second).
PARQUET = "COPY (SELECT CAST(range % 3 AS INTEGER) AS k, CAST(range + {add} AS INTEGER) AS v FROM range(10)) " \
          "TO '{path}' (COMPRESSION uncompressed)"
OLD_TEXT = "".join(f"{i % 3},{i + 1000}\n" for i in range(10))
NEW_TEXT = "".join(f"{i % 3},{i + 2000}\n" for i in range(10))


def _parquet(path: Path, add: int) -> Path:
    duckdb.connect().execute(PARQUET.format(add=add, path=path))
    return path


def _same_size_and_time(target: Path, replacement: Path) -> None:
    """The replacement has the target's size (the test's premise) and gets its modification time."""
    assert target.stat().st_size == replacement.stat().st_size
    stamp = target.stat()
    os.utime(replacement, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


def swap_in_folder(target: Path, replacement: Path) -> None:
    """Another file moved over the table's (a job writing beside it and renaming), its time set back."""
    _same_size_and_time(target, replacement)
    os.replace(replacement, target)


def copy_preserving_times(target: Path, replacement: Path) -> None:
    """``cp -p other target``: the target's bytes rewritten in place, the source's times copied."""
    _same_size_and_time(target, replacement)
    shutil.copy2(replacement, target)


def rsync_times(target: Path, replacement: Path) -> None:
    """``rsync -t``: a temporary file written beside the target, given the source's time, renamed over it."""
    staged = target.parent / f".{target.name}.rsync"
    shutil.copyfile(replacement, staged)
    _same_size_and_time(target, staged)
    os.replace(staged, target)


def edit_in_place(target: Path, replacement: Path) -> None:
    """The file opened for writing and overwritten byte for byte, then its time set back (``touch -r``)."""
    stamp = target.stat()
    assert stamp.st_size == replacement.stat().st_size
    with target.open("r+b") as data:
        data.write(replacement.read_bytes())
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


REPLACEMENTS = {"swap": swap_in_folder, "cp -p": copy_preserving_times, "rsync -t": rsync_times,
                "in place": edit_in_place}


class ReusedRuns:
    """One query through the CLI with ``--reuse`` in a work directory of its own, its rows as DuckDB reads them."""

    def __init__(self, aipq: Aipq, tmp_path: Path, sql: str):
        self.aipq, self.tmp_path, self.sql = aipq, tmp_path, sql
        self.runs = 0

    def run(self) -> tuple[list[tuple], bool]:
        self.runs += 1
        out = self.tmp_path / f"out-{self.runs}.parquet"
        result = self.aipq("run", "--sql", self.sql, "--output", str(out), "--work-dir", str(self.tmp_path / "work"),
                           *REUSE)
        assert result.exit_code == 0, result.output
        rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}') ORDER BY ALL").fetchall()
        return rows, REUSED in " ".join(result.output.split())


def _served_then_replaced(runs: ReusedRuns, replace: Callable[[], None], expected: list[tuple]) -> None:
    first, _ = runs.run()
    again, reused = runs.run()
    assert reused and again == first, "the unchanged rerun reads the cache"
    replace()
    after, reused = runs.run()
    assert not reused, "a file of the same size and time with other rows computes the stage again"
    assert after == expected


def _sums(add: int) -> list[tuple]:
    return [(k, sum(i + add for i in range(10) if i % 3 == k)) for k in range(3)]


@pytest.fixture
def aipq_cli(aipq):
    """The CLI fixture, named apart from the ``aipq`` package this module also calls."""
    return aipq


@pytest.mark.parametrize("how", list(REPLACEMENTS))
def test_a_parquet_file_replaced_with_its_size_and_time_is_computed_again(aipq, tmp_path, how):
    folder = tmp_path / "t"
    folder.mkdir()
    target = _parquet(folder / "part-0.parquet", 0)
    table = f"hostile.cache_pq_{how.replace(' ', '_').replace('-', '')}"
    assert aipq("table", "add", table, str(folder)).exit_code == 0
    runs = ReusedRuns(aipq, tmp_path, QUERY.format(table=table))
    replacement = _parquet(tmp_path / "new.parquet", 1000)
    _served_then_replaced(runs, lambda: REPLACEMENTS[how](target, replacement), _sums(1000))


@pytest.mark.parametrize("how", list(REPLACEMENTS))
def test_a_text_file_replaced_with_its_size_and_time_is_computed_again(aipq, tmp_path, how):
    folder = tmp_path / "t"
    folder.mkdir()
    target = folder / "part-0"
    target.write_text(OLD_TEXT)
    table = f"hostile.cache_text_{how.replace(' ', '_').replace('-', '')}"
    create = (f"create external table {table} (k int, v int) row format delimited fields terminated by ',' "
              f"stored as textfile location '{folder}'")
    assert aipq("run", "--sql", create).exit_code == 0
    runs = ReusedRuns(aipq, tmp_path, QUERY.format(table=table))
    replacement = tmp_path / "new.txt"
    replacement.write_text(NEW_TEXT)
    _served_then_replaced(runs, lambda: REPLACEMENTS[how](target, replacement), _sums(2000))


@pytest.mark.parametrize("change", ["added", "removed"])
def test_a_file_added_to_or_removed_from_a_partition_folder_is_computed_again(aipq, tmp_path, change):
    folder = tmp_path / "t"
    (folder / "d=1").mkdir(parents=True)
    _parquet(folder / "d=1" / "part-0.parquet", 0)
    second = folder / "d=1" / "part-1.parquet"
    if change == "removed":
        _parquet(second, 1000)
    table = f"hostile.cache_partition_{change}"
    assert aipq("table", "add", table, str(folder), "--partitioned-by", "d").exit_code == 0
    runs = ReusedRuns(aipq, tmp_path, QUERY.format(table=table))
    expected = _sums(0) if change == "removed" else [
        (k, a + b) for (k, a), (_, b) in zip(_sums(0), _sums(1000), strict=True)]
    _served_then_replaced(runs, second.unlink if change == "removed" else lambda: _parquet(second, 1000), expected)


def _content(identity: str) -> str:
    """The digest of a local file's identity, without its inode and status-change time."""
    return identity.split()[0]


def test_the_content_digest_tells_files_of_the_same_size_and_time_apart(spark, tmp_path):
    """Without the inode and status-change time a local file's identity also names, the digest alone differs
    for other content of the same size, on the local path and through Hadoop's FileSystem (other stores)."""
    old, new = _parquet(tmp_path / "old.parquet", 0), _parquet(tmp_path / "new.parquet", 1000)
    old_text, new_text = tmp_path / "old.txt", tmp_path / "new.txt"
    old_text.write_text(OLD_TEXT)
    new_text.write_text(NEW_TEXT)
    same = tmp_path / "same.parquet"
    shutil.copyfile(old, same)
    paths = [str(p) for p in (old, new, old_text, new_text, same)]
    local = [_content(identity) for identity in local_storage().content_digests(paths)]
    hadoop = jvm.HadoopFiles(spark).content_digests([f"file://{p}" for p in paths])
    for digests in (local, hadoop):
        assert digests[0].startswith("parquet-footer:") and digests[2].startswith("sha256:")
        assert digests[0] != digests[1] and digests[2] != digests[3], "other content, same size: other digests"
        assert digests[0] == digests[4], "the same content: the same digest"
    assert local == hadoop, "one digest on every store without a checksum of its own"


def test_a_udf_registered_again_with_other_code_is_never_served_from_the_cache(aipq_cli, spark, home, tmp_path):
    """The cache cannot see a UDF's code, only its name: a subplan calling a function of the session's own (a
    Python UDF, a function of the catalog) is never kept, so the same name with other code gives its own rows."""
    folder = tmp_path / "t"
    folder.mkdir()
    _parquet(folder / "part-0.parquet", 0)
    assert aipq_cli("table", "add", "hostile.cache_udf", str(folder)).exit_code == 0
    aipq_options = {"home": home, "staging": "hive", "broadcast_threshold": "0", "reuse": "on"}
    sums = []
    for step in (1, 1, 100):
        spark.udf.register("hostile_step", lambda x, step=step: x + step, "int")
        result = aipq.sql("select k, sum(hostile_step(v)) as s from hostile.cache_udf group by k order by k",
                          spark=spark, **aipq_options)
        sums.append(result.rows)
    assert sums[0] == sums[1] == [(k, s + 1 * n) for (k, s), n in zip(_sums(0), (4, 3, 3), strict=True)]
    assert sums[2] == [(k, s + 100 * n) for (k, s), n in zip(_sums(0), (4, 3, 3), strict=True)]
