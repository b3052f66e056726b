"""The storage module: every file operation on data paths goes through it (a source check), its operations on
local paths and through Hadoop's FileSystem (viewfs:// mounted on a local folder), and both table commits."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb
import pytest
from conftest import Aipq

from aipq.catalog import SPARK_CATALOG_PREFIX, Catalog
from aipq.engine.storage import Storage, join, local_storage, name
from aipq.engine.tables import publish, table_base
from aipq.errors import BadInputError, ExecutionError
from aipq.files import Sizes

PACKAGE = Path(__file__).parent.parent / "aipq"

# Modules that handle only driver-local files that are not data (the home's catalog, statistics and calibration,
# SQL files, the class archive cache, generated TPC-H before registration, benchmark reports), each for that
# reason alone; every other module reaches data paths through engine/storage.py.
DRIVER_FILES = {
    "storage.py": "the storage module itself",
    "version.py": "aipq's own source files",
    "catalog.py": "the home's catalog database and table locks",
    "config.py": "the home folder",
    "repository.py": "the home's statistics database",
    "journal.py": "the home's workflow journals",
    "parameters.py": "the home's calibration file",
    "class_archive.py": "the JVM class archive cache",
    "class_archive_builder.py": "the JVM class archive cache",
    "session.py": "JAVA_HOME, the log configuration, $SPARK_CONF_DIR's spark-defaults.conf and hive-site.xml",
    "faults.py": "a test's pause marker file",
    "generate.py": "tpchgen-cli's local output before it is registered",
    "source.py": "reading a SQL file",
    "data.py": "generated TPC-H's local folders while its skewed tables are rewritten",
    "model.py": "a workflow file's own path (its tables count as its own)",
    "resume.py": "a workflow file's own path (its journal)",
    "processes.py": "/proc, to tell whether a run's process lives",
    "steal.py": "/proc/stat, for the CPU time the hypervisor took",
    "context.py": "the system temporary folder's name for a read-only home's runs",
    "options.py": "creating the home folder",
    "bench.py": "benchmark report files",
    "batch.py": "a batch's SQL files and its local output folder; bench batch's scratch folder",
    "runner.py": "a benchmark run's own statistics repository, in a temporary folder",
    "report.py": "benchmark report files",
    "suite.py": "benchmark report files and docs/benchmarks.md",
    "api_calls.py": "bench api's child program: its spec, log and results files in a temporary folder",
    "user_session.py": "bench api's child program: its spec and results files",
}
FILE_MODULES = {"shutil", "tempfile", "glob"}
OS_FUNCTIONS = {"rename", "replace", "remove", "unlink", "rmdir", "makedirs", "mkdir", "listdir", "scandir", "walk",
                "stat", "lstat", "exists", "isdir", "isfile", "getsize", "getmtime"}
FILE_METHODS = {"exists", "is_dir", "is_file", "mkdir", "unlink", "rename", "rmdir", "iterdir", "glob", "rglob",
                "stat", "touch", "read_text", "write_text", "read_bytes", "write_bytes", "open"}


def _file_operations(path: Path) -> list[str]:
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in FILE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in FILE_MODULES:
            found.append(f"from {node.module} import …")
        elif isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name) and function.id == "open":
                found.append(f"open() at line {node.lineno}")
            elif isinstance(function, ast.Attribute):
                receiver = ast.unparse(function.value)
                if receiver in ("os", "os.path"):
                    if function.attr in OS_FUNCTIONS:
                        found.append(f"{receiver}.{function.attr}() at line {node.lineno}")
                elif function.attr in FILE_METHODS and "storage" not in receiver \
                        and not receiver.startswith(("self", "resources.")):
                    found.append(f"{receiver}.{function.attr}() at line {node.lineno}")
    return found


def test_no_module_but_storage_touches_a_data_path_with_python_file_functions():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in DRIVER_FILES:
            continue
        found = _file_operations(path)
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert not offenders, f"file operations outside engine/storage.py: {offenders}"


def test_the_check_finds_a_python_file_operation(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nimport shutil\nfrom pathlib import Path\n\n"
                      "def f(p):\n    Path(p).unlink()\n    os.rename(p, p)\n    storage.rename(p, p)\n")
    assert len(_file_operations(sample)) == 3


@pytest.fixture(scope="module")
def mounted(spark, tmp_path_factory) -> tuple[Storage, str, Path]:
    """viewfs://aipqtest/x mounted on a local folder, set on the test session's Hadoop configuration."""
    folder = tmp_path_factory.mktemp("viewfs")
    spark.sparkContext._jsc.hadoopConfiguration().set("fs.viewfs.mounttable.aipqtest.link./x", f"file://{folder}")
    return Storage(lambda: spark), "viewfs://aipqtest/x", folder


@pytest.fixture(params=["local", "viewfs"])
def store(request, tmp_path) -> tuple[Storage, str]:
    if request.param == "local":
        return local_storage(), str(tmp_path)
    storage, root, _ = request.getfixturevalue("mounted")
    folder = join(root, tmp_path.name)
    storage.mkdirs(folder)
    return storage, folder


def _write_output(spark, path: str, values: list[int]) -> None:
    spark.createDataFrame([(v,) for v in values], "v int").coalesce(1).write.parquet(path)


def test_listing_skips_hidden_files_and_folders(store, spark):
    storage, root = store
    _write_output(spark, join(root, "t"), [1, 2])
    storage.write_text(join(root, "t", "_owner"), "x")
    storage.mkdirs(join(root, "t", "_temporary", "0"))
    storage.write_text(join(root, "t", "_temporary", "0", "part-9.parquet"), "x")
    files = storage.data_files(join(root, "t"))
    assert files and all(f.relative.startswith("part-") for f in files)
    assert storage.data_files(join(root, "missing")) is None
    assert storage.is_dir(join(root, "t")) and not storage.exists(join(root, "missing"))


def test_rename_onto_an_existing_target_fails_with_both_paths(store):
    storage, root = store
    storage.write_text(join(root, "a"), "a")
    storage.write_text(join(root, "b"), "b")
    with pytest.raises(ExecutionError, match="cannot move"):
        storage.rename(join(root, "a"), join(root, "b"))
    assert storage.read_text(join(root, "b")) == "b"


def test_a_table_of_sparks_own_catalog_has_no_files_and_starts_no_session():
    """Spark reads a metastore table by name: storage answers "nothing here" for its catalog path instead of
    asking Hadoop for a file system of the scheme ``spark-catalog``."""
    storage = Storage(None)  # no session: any call through Hadoop would fail
    path = f"{SPARK_CATALOG_PREFIX}default.sales"
    assert storage.data_files(path) is None and not storage.exists(path) and storage.children(path) == []
    assert Sizes(storage)(path) is None


def test_an_unknown_scheme_is_an_input_error_naming_it(spark):
    with pytest.raises(BadInputError, match="no file system for the scheme 'nosuchfs'"):
        Storage(lambda: spark).mkdirs("nosuchfs://somewhere/runs")


@pytest.mark.parametrize("commit", ["rename", "versioned"])
def test_commits_replace_append_and_leave_no_old_data(store, spark, commit):
    storage, root = store
    location = join(root, "warehouse", "t")

    def output(values):
        path = join(root, f"out-{len(storage.children(root))}")
        _write_output(spark, path, values)
        return path

    def rows(path):
        return sorted(r.v for r in spark.read.parquet(path).collect())

    created = publish(storage, output([1, 2]), location, "create", commit)
    assert (created.path == location) == (commit == "rename")
    assert rows(created.path) == [1, 2]
    replaced = publish(storage, output([3]), created.path, "overwrite", commit)
    replaced.cleanup()
    assert rows(replaced.path) == [3]
    appended = publish(storage, output([4]), replaced.path, "append", commit)
    assert appended.path == replaced.path and rows(appended.path) == [3, 4]
    # nothing is left beside the table, and of its versions only the current one
    assert [name(p) for p, _, _ in storage.children(join(root, "warehouse"))] == ["t"]
    if commit == "versioned":
        assert table_base(appended.path) == location
        assert [name(p) for p, _, _ in storage.children(location)] == [name(appended.path)]
    with pytest.raises(BadInputError, match="already holds data"):
        publish(storage, output([5]), location, "create", commit)


def test_a_workflow_commits_versioned_tables_through_the_cli(tmp_path, home, tpch):
    aipq = Aipq(home)
    script = tmp_path / "versioned.sql"
    script.write_text("SET aipq.commit=versioned;\n"
                      "CREATE TABLE versioned_t AS SELECT n_nationkey AS k FROM nation WHERE n_nationkey < 5;\n"
                      "INSERT OVERWRITE TABLE versioned_t SELECT k FROM versioned_t WHERE k < 3;\n"
                      "INSERT INTO versioned_t SELECT n_nationkey + 10 FROM nation WHERE n_nationkey = 0;\n"
                      "SELECT k FROM versioned_t;\n")
    out = tmp_path / "out.parquet"
    try:
        ran = aipq("run", str(script), "--output", str(out), "--quiet")
        assert ran.exit_code == 0, ran.output
        assert sorted(duckdb.connect().execute(f"SELECT k FROM read_parquet('{out}')").fetchall()) == \
            [(0,), (1,), (2,), (10,)]
        path = Path(next(e for e in Catalog(home).entries() if e.name == "versioned_t").path)
        assert path.name.startswith("v-") and sorted(p.name for p in path.parent.iterdir()) == [path.name]
    finally:
        aipq("run", "--sql", "DROP TABLE IF EXISTS versioned_t", "--allow-overwrite", "--quiet")
