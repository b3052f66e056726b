"""The driver JVM's class-data-sharing archive: planned from the cache, built in the background after the first
command, and used by the next (engine/class_archive.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aipq.engine import class_archive, class_archive_builder


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("AIPQ_CACHE_DIR", str(directory))
    monkeypatch.setenv(class_archive.ENABLED_VARIABLE, "on")
    monkeypatch.delenv(class_archive.RECORD_VARIABLE, raising=False)
    return directory


def test_a_missing_archive_is_noted_and_an_existing_one_used(cache):
    plan = class_archive.plan_archive("4g", {})
    assert plan.java_options == "" and plan.missing is not None and plan.missing.parent == cache
    cache.mkdir()
    plan.missing.write_bytes(b"archive")
    used = class_archive.plan_archive("4g", {})
    assert used.missing is None
    assert f"-XX:SharedArchiveFile={plan.missing}" in used.java_options
    assert class_archive.QUIET in used.java_options


def test_off_and_a_users_own_jvm_options_or_jars_mean_no_archive(cache, monkeypatch):
    assert class_archive.plan_archive("4g", {"spark.driver.extraJavaOptions": "-Dx=1"}) == class_archive.ArchivePlan()
    assert class_archive.plan_archive("4g", {"spark.jars": "/opt/x.jar"}) == class_archive.ArchivePlan()
    monkeypatch.setenv(class_archive.ENABLED_VARIABLE, "off")
    assert class_archive.plan_archive("4g", {}) == class_archive.ArchivePlan()


def test_the_builders_session_records(cache, monkeypatch):
    monkeypatch.setenv(class_archive.RECORD_VARIABLE, "/somewhere/x.part")
    assert class_archive.plan_archive("4g", {}).java_options.startswith("-XX:ArchiveClassesAtExit=/somewhere/x.part")


def test_the_archive_is_keyed_to_the_driver_memory(cache):
    assert class_archive.archive_path("4g") != class_archive.archive_path("8g")
    assert class_archive.archive_path("4g") == class_archive.archive_path("4g")


def test_a_second_builder_waits_for_the_first_but_not_for_a_dead_one(cache):
    final = class_archive.archive_path("4g")
    cache.mkdir()
    lock = final.with_suffix(".lock")
    lock.touch()
    assert class_archive_builder.build(final) is False, "a fresh lock: another builder is at work"
    assert lock.exists(), "the other builder's lock is left alone"
    old = time.time() - class_archive.STALE_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    assert not class_archive.being_built(final), "a lock this old is a builder that died"


def test_a_builder_that_makes_no_archive_stops_later_ones_for_that_key(cache, monkeypatch):
    final = class_archive.archive_path("4g")
    cache.mkdir()
    monkeypatch.setattr(class_archive_builder, "build", lambda path: False)
    assert class_archive_builder.main(final) == 1
    assert final.with_suffix(".failed").exists()
    started = []
    monkeypatch.setattr(class_archive.subprocess, "Popen", lambda *args, **kwargs: started.append(args))
    class_archive.start_builder(final, "4g")
    assert started == [], "no builder for a key that failed"
    class_archive.start_builder(class_archive.archive_path("8g"), "8g")
    assert len(started) == 1, "another key still gets one"


@pytest.mark.slow
def test_first_command_builds_the_archive_and_the_next_loads_spark_from_it(home, tpch, cache, tmp_path):
    """The real flow: `aipq run` with no archive starts the builder as it exits; the next run maps Spark's
    classes from the archive (the JVM's class+load log says "shared objects file (top)" for the dynamic
    archive), and neither prints the JVM's CDS warnings."""
    env = {**os.environ, "AIPQ_HOME": str(home)}
    command = [sys.executable, "-m", "aipq.cli.main", "run", "--quiet", "--format", "csv", "--sql",
               "select n_name from nation where n_nationkey = 7"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    # the key is the command's own (its aipq JAR may be another copy than this process imported, as when CI
    # installs the package and `python -m` runs the checkout)
    started = time.time()
    while time.time() - started < 600:
        if time.time() - started > 10 and not list(cache.glob("*.lock")):
            break  # the builder has ended (it moves the archive into place, then lets go of the lock)
        time.sleep(2)
    left = sorted(p.name for p in cache.iterdir()) if cache.exists() else []
    assert len(left) == 1 and left[0].endswith(".jsa"), f"one archive, no lock or part file left: {left}"

    logs = tmp_path / "class-load"
    logs.mkdir()
    env["JDK_JAVA_OPTIONS"] = f"-Xlog:class+load=info:file={logs}/%p.log"
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == first.stdout.splitlines() == ["n_name", "GERMANY"]
    for output in (first, second):
        assert "[cds]" not in output.stdout + output.stderr
        assert "restricted mode" not in output.stderr, "DataSketches' Java-version warning is quieted"
    loaded = "\n".join(path.read_text() for path in logs.iterdir())
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loaded
