"""The Spark session aipq runs on, and the SQL settings every aipq stage runs under."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aipq.catalog import TableEntry
from aipq.config import Settings
from aipq.engine import class_archive
from aipq.engine.footers import footer_rows
from aipq.errors import BadInputError, EnvironmentProblem, ExecutionError
from aipq.files import FileSource, total_bytes

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# Spark's cache of compiled whole-stage classes: 100 by default, fewer than a benchmark or a long workflow
# compiles, so it recompiled them (docs/decisions.md).
CODEGEN_CACHE_ENTRIES = 1000
JAVA_HINT = ("install Java 17 or newer (e.g. `apt-get install openjdk-17-jre-headless` or `brew install openjdk@17`)"
             " and put `java` on PATH or set JAVA_HOME")


def check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    raise EnvironmentProblem("aipq runs on Spark, which needs Java, and no `java` was found", hint=JAVA_HINT)


LONG_DECIMALS_SETTING = "spark.aipq.longDecimalAggregates"  # read by aipq.spark.LongDecimalAggregates


def stage_sql_conf(settings: Settings) -> dict[str, str]:
    """Settings for aipq's stages: the planner, not Spark, decides each join's physical form, and Spark's own
    runtime filters are off so that information passing measurements are aipq's."""
    return {
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
        "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
        # Hive semantics for Hive SQL: a bad cast or a division by zero gives NULL instead of failing.
        "spark.sql.ansi.enabled": "false" if settings.dialect == "hive" else "true",
        LONG_DECIMALS_SETTING: "true" if settings.long_decimals == "auto" else "false",
    }


def _quiet_python_error_logs() -> None:
    """PySpark logs every analysis error as a JSON record with the Java stack on stderr; aipq reports the
    error itself, once, as a clear message."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 10)
    # py4j logs a Ctrl-C that lands in a call to the JVM, and the closed connections after it, with tracebacks;
    # aipq says "interrupted" itself
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 10)
    logging.getLogger().addFilter(lambda record: "py4j" not in record.pathname)  # py4j logs on the root logger too


def check_classic(settings: Settings) -> None:
    """aipq drives Spark's JVM directly (its Bloom filters, sketches and storage calls), which a Spark Connect
    client has no access to: say so before PySpark fails deep in py4j."""
    remote = (settings.spark_conf.get("spark.remote") or os.environ.get("SPARK_REMOTE")
              or (settings.master if (settings.master or "").startswith("sc://") else None))
    if remote:
        raise BadInputError(f"aipq needs the classic Spark driver, not a Spark Connect session ({remote})",
                            hint="give a cluster master with --master (spark://, yarn, k8s://) and unset "
                                 "SPARK_REMOTE / spark.remote")


def check_classic_session(spark) -> None:
    """A session handed to aipq must be a classic one (see ``check_classic``)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        raise BadInputError("aipq needs the classic Spark driver, not a Spark Connect session",
                            hint="give aipq a classic SparkSession (SparkSession.builder without .remote())")


def get_session(settings: Settings, home: Path):
    """The process's SparkSession (created on first use; later calls reuse it)."""
    check_classic(settings)
    check_java()
    import pyspark
    from pyspark.sql import SparkSession

    from aipq.engine.jvm import COLLECTOR_JAR, disable_nagle

    active = running_session()
    if active is not None:
        check_aipq_classes(active, "this process's SparkSession")
        disable_nagle(active)  # this thread's connection may be new
        _check_fixed_settings(active, settings)
        return active
    _quiet_python_error_logs()
    if launched_by_spark_submit():
        return _start_in_launched_jvm(settings, home)
    check_spark_version(pyspark.__version__, "this Python's PySpark")  # before its JVM starts with aipq's jar
    driver_memory = settings.spark_conf.get("spark.driver.memory", class_archive.driver_memory())
    archive = class_archive.plan_archive(driver_memory, settings.spark_conf)
    builder = (
        SparkSession.builder.master(settings.master or spark_defaults().get("spark.master") or "local[2]")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions",
                f"-Dderby.system.home={Path(home) / 'derby'} -Dlog4j2.configurationFile={LOG_CONFIG} "
                f"{archive.java_options}".strip())
    )
    if (settings.master or "").startswith("local-cluster"):  # executors on this machine: quiet them the same way
        builder = builder.config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG}")
    builder = _configured(builder, settings, home)
    jars = [j for j in settings.spark_conf.get("spark.jars", "").split(",") if j]
    spark = builder.config("spark.jars", ",".join([*jars, str(COLLECTOR_JAR)])).getOrCreate()
    _ready(spark)
    class_archive.build_when_missing(archive, driver_memory)
    return spark


def running_session():
    """The process's SparkSession if one runs (not one whose SparkContext was stopped): the session is per thread
    in PySpark, and commands run on a thread of their own, so the thread's or else the process's first one."""
    from pyspark.sql import SparkSession

    from aipq.engine.jvm import session_stopped

    for session in (SparkSession.getActiveSession(), SparkSession._instantiatedSession):
        if session is not None and not session_stopped(session):
            return session
    return None


def check_spark_version(version: str, described: str) -> None:
    """aipq's jar reaches into Spark's internals (plans, expressions, the parquet reader's vectors), which change
    between minor versions: it runs on the Spark minor version it was built and tested against, and refuses
    another with a clear error rather than failing in the middle of a query."""
    from aipq.engine.jvm import jar_spark_version

    built = jar_spark_version()
    if _minor_version(version) != _minor_version(built):
        minor = ".".join(map(str, _minor_version(built)))
        raise EnvironmentProblem(f"{described} runs Spark {version}, but aipq's JVM classes are built and tested for "
                                 f"Spark {built} (its internals change between minor versions)",
                                 hint=f"use Spark {minor}: pip install 'pyspark=={minor}.*', or a Spark {minor} "
                                      "installation for spark-submit")


def _minor_version(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


# The Java SparkContexts found with aipq's classes and the Spark they were built for, by id (each kept, so its id
# is not reused): a context's jars and version are fixed when it starts, so its next session needs no new check.
_CHECKED_CONTEXTS: dict[int, object] = {}


def check_aipq_classes(spark, described: str) -> None:
    """A session aipq runs on needs aipq's JVM classes on its driver, which only its start can put there, and
    the Spark they were built for (checked once per SparkContext: ``_CHECKED_CONTEXTS``)."""
    from aipq.engine.jvm import aipq_classes_loaded, java_spark_context

    context = java_spark_context(spark)
    if context is not None and _CHECKED_CONTEXTS.get(id(context)) is context:
        return
    check_spark_version(spark.version, described)
    if not aipq_classes_loaded(spark):
        raise EnvironmentProblem(f"{described} was started without aipq's jar, so aipq cannot run on it",
                                 hint="start it with aipq's settings: SparkSession.builder.config("
                                      "map=aipq.spark_conf()).getOrCreate() (stop the running one first)")
    if context is not None:
        _CHECKED_CONTEXTS[id(context)] = context


def launched_by_spark_submit() -> bool:
    """Whether this Python process is a driver spark-submit started (its JVM is up, with the launcher's
    master, settings and jars)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ and "PYSPARK_GATEWAY_SECRET" in os.environ


def _start_in_launched_jvm(settings: Settings, home: Path):
    """The session in the JVM spark-submit started: its master and settings stand unless --master or --conf say
    otherwise; JVM options and jars were fixed at launch (``aipq submit-args`` gives aipq's)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from aipq.engine.jvm import aipq_classes_loaded

    SparkContext._ensure_initialized()  # connected to the launcher's JVM: SparkConf() now holds its settings
    builder = SparkSession.builder
    if settings.master:
        builder = builder.master(settings.master)
    spark = _configured(builder, settings, home, launched=True).getOrCreate()
    check_spark_version(spark.version, "the Spark spark-submit started")
    if not aipq_classes_loaded(spark):
        raise EnvironmentProblem("spark-submit started this driver without aipq's jar",
                                 hint='launch it as: spark-submit [options] $(aipq submit-args) run …')
    _ready(spark)
    return spark


def _configured(builder, settings: Settings, home: Path, launched: bool = False):
    """The settings every aipq session gets: the user's, aipq's extension, quiet logs, the catalog asked for."""
    from pyspark import SparkConf

    from aipq.engine.jvm import AIPQ_EXTENSIONS

    builder = (builder.appName("aipq").config("spark.ui.showConsoleProgress", "false")
               .config("spark.log.level", "ERROR")
               .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
               # PySpark's call sites for Spark's error context would name aipq's own code, and recording them
               # costs each Column call ~10 more py4j round trips (a stage's plan builds dozens)
               .config("spark.python.sql.dataFrameDebugging.enabled", "false"))
    if not (launched and SparkConf().contains("spark.sql.warehouse.dir")):
        builder = builder.config("spark.sql.warehouse.dir", settings.warehouse or str(Path(home) / "spark-warehouse"))
    for key, value in settings.spark_conf.items():
        builder = builder.config(key, value)
    extensions = [e for e in settings.spark_conf.get("spark.sql.extensions", "").split(",") if e]
    builder = builder.config("spark.sql.extensions", ",".join([*extensions, *AIPQ_EXTENSIONS]))
    launcher = dict(SparkConf().getAll()) if launched else {}
    if hive_catalog(settings, launcher):
        builder = builder.enableHiveSupport()
        if METASTORE_TIMEOUT_SETTING not in {**launcher, **settings.spark_conf}:
            builder = builder.config(METASTORE_TIMEOUT_SETTING, f"{settings.metastore_timeout:g}s")
    return builder


# How long the session's Hive metastore client waits for each answer (Hive's own default is 600 s, and it retries)
METASTORE_TIMEOUT_SETTING = "spark.hadoop.hive.metastore.client.socket.timeout"


def _ready(spark) -> None:
    from aipq.engine.jvm import disable_nagle, load_sketch_memory_quietly

    spark.sparkContext.setLogLevel("FATAL")
    disable_nagle(spark)
    load_sketch_memory_quietly(spark)


def hive_catalog(settings: Settings, launcher: dict[str, str] | None = None) -> bool:
    """Whether the session's catalog is a Hive metastore: asked for by name, or by giving the metastore's URIs,
    in ``--conf``, the launcher's settings, or where Spark reads its defaults (``$SPARK_CONF_DIR``'s
    spark-defaults.conf and hive-site.xml)."""
    conf = {**spark_defaults(), **(launcher or {}), **settings.spark_conf}
    if "spark.sql.catalogImplementation" in conf:
        return conf["spark.sql.catalogImplementation"] == "hive"
    return bool(conf.get("spark.hadoop.hive.metastore.uris")) or _hive_site_names_uris()


def _spark_conf_dir() -> Path | None:
    folder = os.environ.get("SPARK_CONF_DIR") or (os.environ.get("SPARK_HOME") and f"{os.environ['SPARK_HOME']}/conf")
    return Path(folder) if folder else None


def spark_defaults() -> dict[str, str]:
    """``spark-defaults.conf`` of ``$SPARK_CONF_DIR`` (or ``$SPARK_HOME/conf``), which the session reads too."""
    folder = _spark_conf_dir()
    found: dict[str, str] = {}
    if folder is None or not (folder / "spark-defaults.conf").is_file():
        return found
    for line in (folder / "spark-defaults.conf").read_text(errors="replace").splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            found[parts[0]] = parts[1].strip()
    return found


def _hive_site_names_uris() -> bool:
    """Whether a hive-site.xml Spark puts on its classpath names a metastore's URIs."""
    folder = _spark_conf_dir()
    site = folder / "hive-site.xml" if folder else None
    return site is not None and site.is_file() and "hive.metastore.uris" in site.read_text(errors="replace")


# Settings aipq extends with its own values when the session starts: compared as given, they always differ.
_EXTENDED = ("spark.jars", "spark.sql.extensions", "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def _check_fixed_settings(spark, settings: Settings) -> None:
    """A setting fixed when the session started (the master, the driver's memory, …) that this command asks
    differently is an error, not silently ignored (one process runs one session: tests, benchmarks)."""
    context = spark.sparkContext
    if settings.master and settings.master != context.master:
        raise BadInputError(f"--master {settings.master}: this process's Spark session already runs on "
                            f"{context.master}", hint="run the command in a new process")
    fixed = {k: v for k, v in settings.spark_conf.items() if k not in _EXTENDED and not spark.conf.isModifiable(k)}
    if not fixed:
        return
    running = dict(context.getConf().getAll())
    for key, value in fixed.items():
        if running.get(key) != value:
            raise BadInputError(f"{key}={value}: Spark fixes this setting when its session starts, and this "
                                f"process's session started with {running.get(key, 'it unset')}; it cannot "
                                "change while it runs",
                                hint="give it with --conf when the command starts (a workflow's SET comes too late)")


@contextmanager
def sql_conf(spark, values: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings for a block and restore the previous values after it (one py4j call each way)."""
    from aipq.engine.jvm import swap_sql_conf

    previous = swap_sql_conf(spark, values)
    try:
        yield
    finally:
        swap_sql_conf(spark, previous)


def user_runtime_conf(spark, settings: Settings) -> dict[str, str]:
    """The user's --conf values that can change on a running session (the rest were applied at start)."""
    runtime = {}
    for key, value in settings.spark_conf.items():
        if spark.conf.isModifiable(key):
            runtime[key] = value
    return runtime


# Formats read with the catalog's schema: Spark then skips inferring it (parquet and ORC read a footer on the
# driver, 70 ms a table on this machine; CSV reads all its data). CSV applies it by position, as it was inferred.
_SCHEMA_ON_READ = ("parquet", "orc", "csv")


def _ddl(columns) -> str:
    return ", ".join(f"`{name.replace('`', '``')}` {data_type}" for name, data_type in columns)


def read_table(spark, entry: TableEntry):
    if entry.spark_name is not None:  # by the name Spark knows it by: db.name, or a temporary view's own
        return spark.table(entry.spark_name)
    if entry.partitioned:
        return _read_partitions(spark, entry)
    reader = spark.read.format(entry.format)
    options = dict(entry.options)
    if entry.format == "csv":
        options = {"header": "true", "inferSchema": "true", **options}
    if entry.columns and entry.format in _SCHEMA_ON_READ:
        reader = reader.schema(_ddl(entry.columns))
    return reader.options(**options).load(entry.path)


def _read_partitions(spark, entry: TableEntry):
    """The rows of the entry's partitions (those left after pruning): in Hive's layout, one read below the
    table's folder (Spark takes each partition's values from its folder name, typed by the schema); a
    partition kept elsewhere (ADD PARTITION … LOCATION) is read on its own, its values as literals."""
    from pyspark.sql import functions as F

    if not entry.partitions:
        return spark.createDataFrame([], _ddl(entry.columns))
    def reader():  # a new one per read: a DataFrameReader keeps the options set on it (basePath)
        return spark.read.format(entry.format).options(**dict(entry.options))

    types = entry.column_types()
    data_columns = [(c, t) for c, t in entry.columns if c not in entry.partition_columns]
    standard = [p.path for p in entry.partitions if p.path == entry.partition_folder(p.values)]
    frames = []
    if standard:
        frames.append(reader().schema(_ddl(entry.columns)).option("basePath", entry.path).load(standard))
    in_layout = set(standard)
    for partition in entry.partitions:
        if partition.path in in_layout:
            continue
        values = [F.lit(v).cast(types[c]).alias(c) for c, v in zip(entry.partition_columns, partition.values)]
        frames.append(reader().schema(_ddl(data_columns)).load(partition.path).select("*", *values))
    names = [c for c, _ in entry.columns]
    return union_frames([frame.select(*names) for frame in frames])


def union_frames(frames: list):
    """UNION ALL of frames with the same columns, pairwise, so that 500 inputs make a plan 9 levels deep, not
    500."""
    while len(frames) > 1:
        frames = [frames[i].union(frames[i + 1]) if i + 1 < len(frames) else frames[i]
                  for i in range(0, len(frames), 2)]
    return frames[0]


# (data paths, bytes stored) → rows, for this process
_TABLE_ROWS: dict[tuple[tuple[str, ...], int], int] = {}


def table_rows(spark, files: FileSource, entry: TableEntry) -> int:
    """A table's row count, cached per process by path and size: a parquet table's from its files' footers in
    one JVM call (no Spark job), others' (and parquet whose footers cannot be read) counted by Spark."""
    key = (entry.data_paths(), sum(total_bytes(files, path) or 0 for path in entry.data_paths()))
    if key not in _TABLE_ROWS:
        footers = footer_rows(spark, files, entry)
        if footers is not None:
            _TABLE_ROWS[key] = footers
            return footers
        try:
            _TABLE_ROWS[key] = read_table(spark, entry).count()
        except Exception as error:
            raise ExecutionError(f"could not count the rows of table {entry.qualified_name} at {entry.path}: "
                                 f"{java_message(error)}",
                                 hint="its files changed while this command read them (another command "
                                      "overwrote it?): run it again once that command has finished") from error
    return _TABLE_ROWS[key]


def read_schema(spark, files: FileSource, path: str, fmt: str,
                options: dict[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """Column names and Spark SQL types of data at ``path``. Parquet files of one folder may differ in their
    columns (a column added later): the schema is their union, and a file without a column reads it as NULL;
    files whose types for one column cannot be reconciled are refused, named."""
    read_options = {"mergeSchema": "true", **(options or {})} if fmt == "parquet" else dict(options or {})
    probe = TableEntry("default", "probe", path, fmt, (), tuple(read_options.items()))
    try:
        schema = read_table(spark, probe).schema
    except Exception as error:  # Spark raises AnalysisException subclasses and Py4J errors here
        text = java_message(error)
        if fmt == "parquet" and "merg" in text.lower():
            raise BadInputError(f"the parquet files at {path} disagree on a column's type: {text}",
                                hint=_disagreeing_files(spark, files, path)) from error
        raise BadInputError(f"cannot read {fmt} data at {path}: {text}",
                            hint="check the path and --format; a damaged file must be replaced") from error
    return tuple((f.name.lower(), f.dataType.simpleString()) for f in schema.fields)


def _disagreeing_files(spark, files: FileSource, path: str) -> str:
    """Two files of ``path`` whose schemas differ, to name in the error."""
    first = None
    for file in files.data_files(path) or []:
        try:
            schema = spark.read.parquet(file.path).schema.simpleString()
        except Exception:  # noqa: BLE001 — a file that cannot be read is named as it is
            return f"{file.path} cannot be read"
        if first is None:
            first = (file, schema)
        elif schema != first[1]:
            return f"{first[0].relative} has {first[1]}, {file.relative} has {schema}; rewrite one of them or " \
                   "register them as separate tables"
    return "rewrite the files with one schema, or register them as separate tables"


def java_message(error: Exception) -> str:
    """The most telling line of a Spark failure: Spark's error-class message from the Java cause chain when
    there is one (a Py4J error's own text is only "An error occurred while calling o123.parquet")."""
    messages = []
    java = getattr(error, "java_exception", None)
    seen = 0
    while java is not None and seen < 20:
        try:
            text = java.getMessage()
            java = java.getCause()
        except Exception:  # noqa: BLE001 — the JVM side is gone
            break
        if text:
            messages.append(str(text).strip().splitlines()[0])
        seen += 1
    classed = [m for m in messages if m.startswith("[")]
    if classed:
        return classed[-1]
    if messages:
        return messages[-1]
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
