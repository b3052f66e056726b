"""Every file operation aipq does on tables, the warehouse, stage outputs, summaries and results.

A plain path or a ``file:`` URI is handled here with Python's file functions (planning and ``tpch gen`` need no
JVM); any other URI (``hdfs://``, ``s3a://``, ``abfs://``, ``gs://``, a scheme set up with
``spark.hadoop.fs.<scheme>.impl``) goes through Hadoop's FileSystem in the driver's JVM
(``jvm.HadoopFiles``), the same code Spark's readers and writers use. No other module opens, lists, renames or
deletes a data path (``tests/test_storage.py`` checks the source).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import stat as stat_module
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from aipq.catalog import SPARK_CATALOG_PREFIX
from aipq.errors import AipqError, BadInputError, ExecutionError
from aipq.files import FileInfo, NoFiles, is_hidden

# Stores whose rename is a copy (no atomic directory rename): table commits there switch the catalog's pointer
# to a new version folder instead (engine/tables.py).
OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "gs", "wasb", "wasbs", "oss", "cos", "cosn", "obs", "r2")


def scheme_of(uri: str) -> str:
    """``hdfs`` of ``hdfs://nn/x``; ``file`` for a plain path."""
    head, sep, _ = uri.partition(":")
    return head.lower() if sep and "/" not in head and len(head) > 1 else "file"


def is_local(uri: str) -> bool:
    return scheme_of(uri) == "file"


def local_path(uri: str) -> str:
    """The file-system path of a plain path or ``file:`` URI."""
    if uri.startswith("file://"):
        return uri[len("file://"):] or "/"
    return uri.removeprefix("file:")


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])


def parent(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0]


def name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Status:
    is_dir: bool
    length: int
    modified_ms: int


class _LocalFiles:
    """The primitives on the local file system (``file:`` URIs and plain paths)."""

    def status(self, uri: str) -> Status | None:
        try:
            found = os.stat(local_path(uri))
        except OSError:
            return None
        return Status(stat_module.S_ISDIR(found.st_mode), found.st_size, found.st_mtime_ns // 1_000_000)

    def data_files(self, uri: str) -> list[FileInfo] | None:
        root = local_path(uri)
        if os.path.isfile(root):
            found = os.stat(root)
            return [FileInfo(root, os.path.basename(root), found.st_size, found.st_mtime_ns // 1_000_000)]
        if not os.path.isdir(root):
            return None
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            for file_name in names:
                path = os.path.join(folder, file_name)
                relative = os.path.relpath(path, root)
                if is_hidden(relative):
                    continue
                try:
                    found = os.stat(path)
                except OSError:  # removed while listing
                    continue
                files.append(FileInfo(path, relative, found.st_size, found.st_mtime_ns // 1_000_000))
        return sorted(files, key=lambda f: f.relative)

    def children(self, uri: str) -> list[tuple[str, bool, int]]:
        root = local_path(uri)
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            return []
        found = []
        for entry in entries:
            try:
                found.append((entry.path, entry.is_dir(), entry.stat().st_mtime_ns // 1_000_000))
            except OSError:
                continue
        return found

    def mkdirs(self, uri: str) -> bool:
        os.makedirs(local_path(uri), exist_ok=True)
        return True

    def rename(self, source: str, target: str) -> bool:
        target_path = local_path(target)
        if os.path.lexists(target_path):
            return False
        try:
            os.rename(local_path(source), target_path)
        except OSError as error:
            if error.errno != 18:  # EXDEV: another file system
                return False
            shutil.move(local_path(source), target_path)
        return True

    def delete(self, uri: str, recursive: bool = True) -> bool:
        path = local_path(uri)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            return not os.path.exists(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def write_bytes(self, uri: str, data: bytes) -> None:
        path = local_path(uri)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)

    def read_bytes(self, uri: str) -> bytes:
        with open(local_path(uri), "rb") as data:
            return data.read()

    def copy_to(self, uris: Sequence[str], out: BinaryIO) -> int:
        copied = 0
        for uri in uris:
            with open(local_path(uri), "rb") as data:
                shutil.copyfileobj(data, out)
                copied += data.tell()
        return copied

    def append_to_local(self, uris: Sequence[str], local_file: str) -> int:
        with open(local_file, "ab") as out:
            return self.copy_to(uris, out)

    def content_digests(self, uris: Sequence[str]) -> list[str]:
        return [_local_content_identity(local_path(uri)) for uri in uris]


class _HadoopFiles:
    """The primitives through Hadoop's FileSystem in the JVM (started on first use)."""

    def __init__(self, session: Callable[[], object] | None):
        self._session = session
        self._files = None

    def _jvm_files(self):
        if self._files is None:
            if self._session is None:
                raise ExecutionError("a path on a distributed store needs the Spark session, and none was given")
            from aipq.engine.jvm import HadoopFiles

            self._files = HadoopFiles(self._session())
        return self._files

    def status(self, uri: str) -> Status | None:
        found = self._jvm_files().status(uri)
        return None if found is None else Status(*found)

    def data_files(self, uri: str) -> list[FileInfo] | None:
        found = self._jvm_files().data_files(uri)
        return None if found is None else [FileInfo(*f) for f in found]

    def __getattr__(self, attribute: str):  # children, mkdirs, rename, delete, read/write bytes, append_to_local
        return getattr(self._jvm_files(), attribute)


class _NoFileSystem(NoFiles):
    """The place of a table that has no data path of aipq's (``catalog.SPARK_CATALOG_PREFIX``): nothing is
    there."""

    def status(self, uri: str) -> Status | None:
        return None

    def children(self, uri: str) -> list[tuple[str, bool, int]]:
        return []


_NO_FILES = _NoFileSystem()


class Storage:
    """File operations on any URI, local ones in Python and the rest through Hadoop's FileSystem. A failure is
    an aipq error naming the path: exit 2 for a scheme Hadoop does not know, else exit 1."""

    def __init__(self, session: Callable[[], object] | None = None):
        self._local = _LocalFiles()
        self._hadoop = _HadoopFiles(session)

    def _on(self, uri: str):
        if uri.startswith(SPARK_CATALOG_PREFIX):
            return _NO_FILES  # a table Spark's catalog reads by name: nothing here to list or size
        return self._local if is_local(uri) else self._hadoop

    @staticmethod
    def _guarded(what: str, operation: Callable[[], object]):
        """``operation()``, its failure an aipq error saying ``what`` failed (``_failure``)."""
        try:
            return operation()
        except AipqError:
            raise
        except Exception as error:
            raise _failure(what, error) from error

    def status(self, uri: str) -> Status | None:
        return self._guarded(f"cannot read {uri}", lambda: self._on(uri).status(uri))

    def exists(self, uri: str) -> bool:
        return self.status(uri) is not None

    def is_dir(self, uri: str) -> bool:
        found = self.status(uri)
        return found is not None and found.is_dir

    def data_files(self, uri: str) -> list[FileInfo] | None:
        return self._guarded(f"cannot list {uri}", lambda: self._on(uri).data_files(uri))

    def children(self, uri: str) -> list[tuple[str, bool, int]]:
        """(path, is a directory, modified ms) of each entry directly under ``uri``; none when it is missing."""
        return self._guarded(f"cannot list {uri}", lambda: self._on(uri).children(uri))

    def mkdirs(self, uri: str) -> None:
        made = self._guarded(f"cannot create the folder {uri}", lambda: self._on(uri).mkdirs(uri))
        if not made and not self.is_dir(uri):
            raise ExecutionError(f"cannot create the folder {uri}")

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target``, which must not exist (atomic on local file systems and HDFS; a copy on
        object stores)."""
        moved = self._guarded(f"cannot move {source} to {target}", lambda: self._on(source).rename(source, target))
        if not moved:
            raise ExecutionError(f"cannot move {source} to {target}"
                                 + (": the target exists" if self.exists(target) else ""))

    def delete(self, uri: str) -> None:
        """Remove a file or a folder with everything in it; nothing when it is missing. Never raises: what it
        removes is left over from a run or replaced data."""
        with contextlib.suppress(Exception):  # cleanup: a leftover is reported by whoever needs the path
            self._on(uri).delete(uri, True)

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._guarded(f"cannot write {uri}", lambda: self._on(uri).write_bytes(uri, data))

    def read_bytes(self, uri: str) -> bytes:
        return self._on(uri).read_bytes(uri)

    def write_text(self, uri: str, text: str) -> None:
        self.write_bytes(uri, text.encode())

    def read_text(self, uri: str) -> str:
        return self.read_bytes(uri).decode()

    def append_to_local(self, uris: Sequence[str], local_file: str) -> int:
        """Append the files ``uris`` in order to the driver-local file ``local_file`` (a result brought home)."""
        if not uris:
            return 0
        return self._on(uris[0]).append_to_local(list(uris), local_file)

    def content_digests(self, uris: Sequence[str]) -> list[str]:
        """What identifies the content of each file ``uris`` (all on one store), beyond its size and modification
        time, which copies keep (``cp -p``, ``rsync -t``, object stores' copies): the store's own checksum where
        it keeps one (HDFS), else the SHA-256 of a parquet file's footer (its schema, row groups' rows, column
        chunks' offsets, sizes and statistics: two reads at its end) or of any other file's bytes. A local file's
        also names its inode and status-change time, which the kernel sets on every write or replacement and no
        copy or ``utime`` sets back: that covers a rewrite a footer does not show."""
        if not uris:
            return []
        return self._guarded(f"cannot read {uris[0]}", lambda: self._on(uris[0]).content_digests(list(uris)))

    def copy_to(self, uris: Sequence[str], out: BinaryIO) -> None:
        """Write the files ``uris`` in order to the stream ``out`` (a result on stdout): local files straight,
        others brought to a local file first."""
        if not uris or is_local(uris[0]):
            self._local.copy_to(uris, out)
            return
        with tempfile.TemporaryDirectory(prefix="aipq-output-") as folder:
            assembled = os.path.join(folder, "assembled")
            open(assembled, "wb").close()
            self.append_to_local(uris, assembled)
            with open(assembled, "rb") as data:
                shutil.copyfileobj(data, out)

    @staticmethod
    def write_local_atomically(target: str, text: str) -> None:
        """``text`` in the driver-local file ``target``, written beside it and moved into place when complete."""
        with _staged_beside(target) as (handle, _), os.fdopen(handle, "w") as out:
            out.write(text)

    def assemble_local(self, uris: Sequence[str], target: str, header: bytes = b"") -> None:
        """``header`` then the files ``uris`` in the driver-local file ``target``, assembled beside it and
        moved into place only when complete (an interrupted run never leaves half a file)."""
        with _staged_beside(target) as (handle, assembled):
            with os.fdopen(handle, "wb") as out:
                out.write(header)
            self.append_to_local(uris, assembled)

    @staticmethod
    def check_local_target(target: str, force: bool, flag: str = "--output") -> str:
        """A driver-local output file can be written: its folder exists and is writable, and an existing file
        is replaced only with ``force``. Its absolute path. ``flag`` names the option that gave it."""
        if not is_local(target):
            raise BadInputError(f"{flag} {target}: the result file is written on this machine",
                                hint="give a local path; to keep the rows on a cluster's storage, write a table "
                                     "(CREATE TABLE … AS SELECT) with --warehouse there")
        target = os.path.abspath(os.path.expanduser(local_path(target)))
        folder = os.path.dirname(target)
        if os.path.isdir(target):
            raise BadInputError(f"{flag} {target} is a directory", hint="give a file path")
        if not os.path.isdir(folder):
            raise BadInputError(f"the folder of {flag} ({folder}) does not exist")
        if os.path.lexists(target):
            if not force:
                raise BadInputError(f"{flag} {target} exists", hint="add --force to replace it, or give a new name")
            if not os.access(target, os.W_OK):
                raise BadInputError(f"{flag} {target} is read-only", hint="make it writable, or give a new name")
        try:
            with tempfile.NamedTemporaryFile(prefix=f".{os.path.basename(target)}.", dir=folder):
                pass
        except OSError as error:
            raise BadInputError(f"cannot write {flag} into {folder}: {error.strerror or error}",
                                hint="choose a writable folder") from error
        return target

    @staticmethod
    def same_local_file(first: str, second: str) -> bool:
        """Whether two driver-local paths name one file: written relative and absolute, through a symbolic link,
        or a hard link to it (a path that does not exist yet names no file but its own)."""
        first, second = os.path.expanduser(local_path(first)), os.path.expanduser(local_path(second))
        if os.path.realpath(first) == os.path.realpath(second):
            return True
        try:
            return os.path.samefile(first, second)
        except OSError:
            return False

    @staticmethod
    def renames_atomically(uri: str) -> bool:
        """Whether a folder rename on this store is one atomic step (local file systems, HDFS) or a copy of
        each file (object stores)."""
        return scheme_of(uri) not in OBJECT_STORE_SCHEMES


def _failure(what: str, error: Exception) -> AipqError:
    """A storage failure as an aipq error: a scheme Hadoop has no FileSystem for is the user's URI (exit 2),
    anything else a runtime fault (exit 1)."""
    reason = _reason(error)
    if "No FileSystem for scheme" in reason:
        scheme = reason.split("No FileSystem for scheme", 1)[1].strip(' :"')
        return BadInputError(f"{what}: Hadoop has no file system for the scheme {scheme!r}",
                             hint=f"add its connector jar (--conf spark.jars.packages=…) or set "
                                  f"spark.hadoop.fs.{scheme}.impl; local paths need no scheme")
    return ExecutionError(f"{what}: {reason}")


def _reason(error: Exception) -> str:
    """What went wrong, in one line: the Java exception's message for a Hadoop failure."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):  # the JVM side is gone
            return str(java.getMessage() or java.toString()).splitlines()[0]
    text = getattr(error, "strerror", None) or str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


_PARQUET_MAGIC = b"PAR1"


def _local_content_identity(path: str) -> str:
    """``Storage.content_digests`` of a local file: its content digest, inode and status-change time."""
    with open(path, "rb") as data:
        found = os.fstat(data.fileno())
        footer = _parquet_footer(data, found.st_size)
        if footer is not None:
            digest = f"parquet-footer:{hashlib.sha256(footer).hexdigest()}"
        else:
            data.seek(0)
            digest = f"sha256:{hashlib.file_digest(data, 'sha256').hexdigest()}"
    return f"{digest} inode:{found.st_dev}:{found.st_ino} ctime:{found.st_ctime_ns}"


def _parquet_footer(data: BinaryIO, length: int) -> bytes | None:
    """The footer of a parquet file of ``length`` bytes (``<footer><length: 4 bytes LE>PAR1`` at its end), or
    None when the file does not end as parquet."""
    if length < 12:
        return None
    data.seek(length - 8)
    end = data.read(8)
    footer_length = int.from_bytes(end[:4], "little")
    if end[4:] != _PARQUET_MAGIC or not 0 < footer_length <= length - 12:
        return None
    data.seek(length - 8 - footer_length)
    return data.read(footer_length)


def local_storage() -> Storage:
    """A Storage for local paths only (planning, tests without Spark)."""
    return Storage(None)


@contextlib.contextmanager
def _staged_beside(target: str):
    """A new file beside ``target`` (its descriptor and path) with the mode any file the user writes gets, not
    mkstemp's 0600, renamed over ``target`` when the block completes (atomic within one file system) and
    removed when it fails."""
    target = os.path.abspath(target)
    handle, staged = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", dir=os.path.dirname(target))
    os.fchmod(handle, 0o666 & ~_umask())
    try:
        yield handle, staged
        os.replace(staged, target)
    finally:
        if os.path.exists(staged):
            os.unlink(staged)


@functools.cache
def _umask() -> int:
    """The process's umask (read by setting it, so once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
