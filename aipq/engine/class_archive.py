"""A class-data-sharing archive for the driver JVM, so that ``aipq`` commands start Spark faster.

Each ``aipq run`` starts a new JVM, which loads about 20,000 classes before the query's first task. A dynamic CDS
archive (JDK 13+) holds them parsed and verified, mapped into memory at the next start, which starts a command
about 5 s sooner here (docs/decisions.md).

Java 17 cannot make the archive by itself (``-XX:+AutoCreateSharedArchive`` came in 19), and a JVM that records
one runs slower and then takes about 12 s to write it at exit, so no user command records it:

- A command that finds no archive runs as before and, as it exits, starts a builder in the background at low
  priority (``python -m aipq.engine.class_archive_builder``). The builder generates TPC-H at SF 0.01 in a scratch home,
  runs a few queries under ``-XX:ArchiveClassesAtExit`` (repartition and broadcast joins, summaries built and
  probed, piggybacked statistics: the classes a run loads), lets the JVM write the archive as it exits, and moves
  the file into place. A lock file keeps a second builder from starting meanwhile.
- A command that finds the archive runs with ``-XX:SharedArchiveFile``. A JVM that finds it does not match
  (another Java, other JARs) starts without it, as before, silently.

The archive is keyed to the Java binary, the PySpark installation, aipq's JAR and the driver memory, so that an
upgrade makes a new archive instead of silently not using the old one; the builder removes archives of other keys.
It lives in ``$AIPQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/aipq``, else ``~/.cache/aipq`` (160–190 MB).
``AIPQ_CLASS_ARCHIVE=off`` turns it off. A user's own ``spark.driver.extraJavaOptions`` or ``spark.jars`` turn it
off too: the first replaces aipq's JVM options, the second changes what the JVM loads.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The JVM writes its CDS warnings (a signed JAR's classes, reflection accessors it skips) on stdout, which is the
# user's output.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
ENABLED_VARIABLE = "AIPQ_CLASS_ARCHIVE"
RECORD_VARIABLE = "AIPQ_CLASS_ARCHIVE_RECORD"  # set by the builder for its own session: where the JVM writes
MEMORY_VARIABLE = "AIPQ_DRIVER_MEMORY"
DEFAULT_DRIVER_MEMORY = "4g"
PREFIX = "driver-classes-"
DUMP_TIMEOUT_SECONDS = 300  # the JVM writes the archive in about 12 s on this machine
STALE_LOCK_SECONDS = 1800  # a builder runs for about a minute; a lock this old is a builder that died
# (query, strategy, broadcast joins): a repartition-join plan with summaries, a broadcast-join plan with
# summaries, and a semi-join, outer join and HAVING, so that the classes every kind of stage loads are recorded.


def cache_dir() -> Path:
    explicit = os.environ.get("AIPQ_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "aipq"


def enabled() -> bool:
    return os.environ.get(ENABLED_VARIABLE, "on").strip().lower() not in ("off", "0", "false", "no")


def driver_memory() -> str:
    return os.environ.get(MEMORY_VARIABLE, DEFAULT_DRIVER_MEMORY)


def _java_binary() -> Path | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return (Path(java_home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def archive_path(memory: str, directory: Path | None = None) -> Path | None:
    """Where the archive for this Java, PySpark, aipq JAR and driver memory is (None without a Java)."""
    import pyspark

    from aipq.engine.jvm import COLLECTOR_JAR

    java = _java_binary()
    if java is None:
        return None
    parts = [_fingerprint(java), pyspark.__version__, _fingerprint(Path(pyspark.__file__).parent / "jars"),
             _fingerprint(Path(COLLECTOR_JAR)), memory]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return (directory or cache_dir()) / f"{PREFIX}{key}.jsa"


@dataclass(frozen=True)
class ArchivePlan:
    """The JVM options for one session start, and the archive to build when there is none yet."""

    java_options: str = ""
    missing: Path | None = None


def plan_archive(memory: str, user_conf: dict[str, str]) -> ArchivePlan:
    """Use the archive when it exists; otherwise note it as missing (nothing at all when turned off)."""
    recording = os.environ.get(RECORD_VARIABLE)
    if recording:
        return ArchivePlan(f"-XX:ArchiveClassesAtExit={recording} {QUIET}")
    if not enabled() or "spark.driver.extraJavaOptions" in user_conf or "spark.jars" in user_conf:
        return ArchivePlan()
    final = archive_path(memory)
    if final is None:
        return ArchivePlan()
    if final.is_file():
        return ArchivePlan(f"-XX:SharedArchiveFile={final} {QUIET}")
    return ArchivePlan(missing=final)


def build_when_missing(plan: ArchivePlan, memory: str) -> None:
    """As this process exits, start the builder in the background if the archive is missing."""
    if plan.missing is not None:
        atexit.register(start_builder, plan.missing, memory)


def lock_path(final: Path) -> Path:
    return final.with_suffix(".lock")


def being_built(final: Path) -> bool:
    try:
        return time.time() - lock_path(final).stat().st_mtime < STALE_LOCK_SECONDS
    except OSError:
        return False


def failed_marker(final: Path) -> Path:
    """Left by a builder that made no archive (e.g. a JDK without a base archive to extend): no builder runs
    again for this key, so that a machine where it cannot work does not pay for trying after every command."""
    return final.with_suffix(".failed")


def start_builder(final: Path, memory: str) -> None:
    if final.exists() or being_built(final) or failed_marker(final).exists():
        return
    with contextlib.suppress(OSError):  # a cache: the next command tries again
        subprocess.Popen([sys.executable, "-m", "aipq.engine.class_archive_builder", str(final)],
                         env={**os.environ, MEMORY_VARIABLE: memory}, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
