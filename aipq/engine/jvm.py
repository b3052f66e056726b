"""The one place aipq reaches into Spark's JVM through py4j.

Spark 4.3 has no SQL or Python API for its Bloom filter expressions (``bloom_filter_agg`` and ``might_contain``
are internal), and PySpark's status tracker has no shuffle byte counts. aipq's own JVM classes (the statistics
collector of ``java/src``, shipped as ``jars/aipq-spark.jar``) are reached from here too. Everything here is a
small function over Spark internals that ``tests/test_jvm.py`` exercises directly, so a Spark upgrade that moves
them fails loudly there rather than silently elsewhere.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from py4j.java_gateway import JavaMember
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

_CATALYST = "org.apache.spark.sql.catalyst.expressions"
COLLECTOR_JAR = Path(__file__).with_name("jars") / "aipq-spark.jar"  # put on the session's classpath at start
SKETCH_BATCHES_EXTENSION = "aipq.spark.SketchBatches"  # spark.sql.extensions: sketches columnar scans per batch
# spark.sql.extensions: decimal sums on longs where the files prove it exact (while session.LONG_DECIMALS_SETTING)
LONG_DECIMALS_EXTENSION = "aipq.spark.LongDecimalAggregates"
AIPQ_EXTENSIONS = (SKETCH_BATCHES_EXTENSION, LONG_DECIMALS_EXTENSION)
_RECORD, _FIELD = "\u0000", "\u0001"  # separators of the strings aipq's JVM classes take and return


def _jvm(spark: SparkSession):
    return spark.sparkContext._jvm


def _aipq_class(spark: SparkSession, name: str) -> _JavaStatics:
    """One of aipq's JVM classes (``aipq.spark.<name>``), looked up once per SparkContext."""
    return _spark_class(spark, f"aipq.spark.{name}")


def _spark_class(spark: SparkSession, name: str) -> _JavaStatics:
    """A JVM class by its full name, looked up once per SparkContext (one round trip: py4j resolves each level of
    ``jvm.org.apache…`` with a round trip of its own, a dotted name in one)."""
    classes = spark.sparkContext.__dict__.setdefault("_aipq_classes", {})
    if name not in classes:
        classes[name] = _JavaStatics(getattr(_jvm(spark), name))
    return classes[name]


class _JavaStatics:
    """A JVM class whose static methods are looked up once: py4j asks the JVM for a class's member on every
    attribute access, a round trip of its own before the call's."""

    __slots__ = ("_class", "_methods")

    def __init__(self, java_class):
        self._class = java_class
        self._methods: dict[str, JavaMember] = {}

    def __call__(self, *args):
        return self._class(*args)

    def __getattr__(self, name: str):
        method = self._methods.get(name)
        if method is None:
            method = getattr(self._class, name)
            if not isinstance(method, JavaMember):
                return method  # a static field: read afresh
            self._methods[name] = method
        return method


def _frame(spark: SparkSession, jdf) -> DataFrame:
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    return ClassicDataFrame(jdf, spark)


def _sql_list(expressions: Sequence[str]) -> str:
    """The expressions as ``aipq.spark.Frames`` takes them, NUL-separated (the front end refuses SQL text that
    holds a NUL)."""
    if any(_RECORD in e for e in expressions):
        raise ValueError("a SQL expression holds a NUL character")
    return _RECORD.join(expressions)


def select_sql(df: DataFrame, expressions: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*expressions)`` in one py4j call instead of about three per column."""
    spark = df.sparkSession
    return _frame(spark, _aipq_class(spark, "Frames").select(df._jdf, _sql_list(expressions)))


def aggregate_sets_sql(df: DataFrame, groups: Sequence[str], sets: Sequence[Sequence[int]],
                       aggregates: Sequence[str]) -> DataFrame:
    """``df`` grouped by each grouping set (indexes into the group columns ``groups``) with ``aggregates``."""
    spark = df.sparkSession
    text = ";".join(",".join(map(str, chosen)) for chosen in sets)
    return _frame(spark, _aipq_class(spark, "Frames").aggregateSets(df._jdf, _sql_list(groups), text,
                                                                     _sql_list(aggregates)))


def observe(df: DataFrame, name: str, aggregates: Sequence[str],
            more: Sequence[Column] = ()) -> tuple[DataFrame, Observation]:
    """``df.observe(Observation(name), …)`` over the SQL ``aggregates`` (``expr AS name`` each), then ``more``, in
    one py4j call for the observation and one for the observing (PySpark's takes one per Column and per list
    element); the Observation reads as PySpark's own."""
    spark = df.sparkSession
    observation = Observation(name)
    observation._jvm = _jvm(spark)  # as ``Observation._on`` leaves it: ``get`` and ``observed_metrics`` read these
    observation._jo = _spark_class(spark, "org.apache.spark.sql.Observation")(name)
    observed = _aipq_class(spark, "Frames").observe(df._jdf, observation._jo, _sql_list(aggregates),
                                                    [c._jc for c in more] if more else None)
    return _frame(spark, observed), observation


class LazyPlan:
    """A logical plan built step by step from SQL text and analysed once, when its DataFrame is asked for
    (``aipq.spark.Plans``). Each DataFrame step analyses the whole plan it makes; a stage built here is analysed
    once however many reads and joins it has."""

    __slots__ = ("spark", "plan")

    def __init__(self, spark: SparkSession, plan):
        self.spark = spark
        self.plan = plan

    @classmethod
    def of(cls, df: DataFrame) -> LazyPlan:
        return cls(df.sparkSession, _aipq_class(df.sparkSession, "Plans").of(df._jdf))

    def _plans(self):
        return _aipq_class(self.spark, "Plans")

    @property
    def _session(self):
        return self.spark._jsparkSession

    def _step(self, plan) -> LazyPlan:
        return LazyPlan(self.spark, plan)

    def frame(self) -> DataFrame:
        """The plan as a DataFrame, analysed now."""
        return _frame(self.spark, self._plans().frame(self._session, self.plan))

    def select(self, expressions: Sequence[str]) -> LazyPlan:
        return self._step(self._plans().select(self._session, self.plan, _sql_list(expressions)))

    def filter(self, condition: str) -> LazyPlan:
        return self._step(self._plans().filter(self._session, self.plan, condition))

    def join(self, right: LazyPlan, condition: str | None, how: str, broadcast: str | None) -> LazyPlan:
        """Joined with ``right`` on a SQL condition (None: a cross join), ``broadcast`` the side hinted to be
        broadcast ('left', 'right' or None)."""
        plan = self._plans().join(self._session, self.plan, right.plan, condition or "", how, broadcast or "")
        return self._step(plan)

    def aggregate(self, groups: Sequence[str], aggregates: Sequence[str]) -> LazyPlan:
        """Grouped by the SQL expressions ``groups`` with ``aggregates`` (``expr AS name`` each): the distinct
        groups when there is no aggregate, one row when there is no group."""
        return self._step(self._plans().aggregate(self._session, self.plan, _sql_list(groups), _sql_list(aggregates)))

    def sort(self, keys: Sequence[tuple[str, bool, bool]], in_one_task: bool = False) -> LazyPlan:
        """Ordered by (SQL expression, descending, nulls first) keys; ``in_one_task``: gathered into one partition
        and sorted there, without Spark's range partitioning (its sampling job and shuffle)."""
        if any(_FIELD in key for key, _, _ in keys):
            raise ValueError("a sort key holds a \\u0001 character")
        text = _sql_list([_FIELD.join((key, "desc" if descending else "asc", "first" if nulls_first else "last"))
                          for key, descending, nulls_first in keys])
        return self._step(self._plans().sort(self._session, self.plan, text, in_one_task))

    def limit(self, count: int) -> LazyPlan:
        return self._step(self._plans().limit(self.plan, count))


def _to_expression(spark: SparkSession, column: Column):
    return _spark_class(spark, "org.apache.spark.sql.classic.ExpressionUtils").expression(column._jc)


def disable_nagle(spark: SparkSession) -> bool:
    """Turn off Nagle's algorithm on both ends of this Python thread's py4j connection; True when done.

    py4j leaves it on, and a command or answer of 16 KB to ~1 MB (a Bloom filter, the sketches of a few columns,
    an observation's row) then waits for a delayed ACK: 43 ms for 16 KB, 0.8 ms with it off (docs/spark-notes.md).
    The JVM's end of the socket is reachable only through the connection thread's Runnable (``Thread.target`` up
    to Java 18, ``Thread.holder.task`` after), which Spark's default ``--add-opens java.base/java.lang`` allows.
    """
    import socket

    from py4j.protocol import Py4JError

    connection = spark.sparkContext._gateway._gateway_client.get_thread_connection()
    if connection is None or connection.socket is None:
        return False
    connection.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    jvm = _jvm(spark)
    thread_class = jvm.java.lang.Class.forName("java.lang.Thread")
    thread = jvm.java.lang.Thread.currentThread()
    try:
        try:
            field = thread_class.getDeclaredField("target")
            field.setAccessible(True)
            runnable = field.get(thread)
        except Py4JError:
            holder_field = thread_class.getDeclaredField("holder")
            holder_field.setAccessible(True)
            holder = holder_field.get(thread)
            task = holder.getClass().getDeclaredField("task")
            task.setAccessible(True)
            runnable = task.get(holder)
        runnable.getSocket().setTcpNoDelay(True)
        return bool(runnable.getSocket().getTcpNoDelay())
    except Py4JError:
        return False  # only slower


# DataSketches' memory library (inside Spark's catalyst JAR) prints "Warning: Java versions > Java 11 can only
# operate in restricted mode where no off-heap operations are allowed!" on the JVM's stderr as this class loads:
# in the middle of the first query that sketches a column. aipq's sketches are on-heap; the line tells its users
# nothing.
SKETCH_MEMORY_CLASS = "org.apache.datasketches.memory.internal.ResourceImpl"


def load_sketch_memory_quietly(spark: SparkSession) -> bool:
    """Load DataSketches' memory class with the JVM's stderr muted for that moment; True when the class was
    found (False: a Spark without it, nothing to quiet)."""
    from py4j.protocol import Py4JError

    jvm = _jvm(spark)
    system = jvm.java.lang.System
    stderr = system.err
    system.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
    try:
        jvm.java.lang.Class.forName(SKETCH_MEMORY_CLASS)
        return True
    except Py4JError:
        return False
    finally:
        system.setErr(stderr)


def _to_column(spark: SparkSession, expression) -> Column:
    from pyspark.sql.classic.column import Column as ClassicColumn

    return ClassicColumn(_spark_class(spark, "org.apache.spark.sql.classic.ExpressionUtils").column(expression))


def bloom_filter_agg(spark: SparkSession, hashed: Column, expected_items: int, num_bits: int) -> Column:
    """An aggregate building Spark's Bloom filter (serialized ``org.apache.spark.util.sketch.BloomFilter``)
    over ``hashed`` (a BIGINT column, e.g. ``xxhash64(key)``); usable inside ``DataFrame.observe``."""
    # The size arguments must be foldable BIGINTs (an INT literal fails with BLOOM_FILTER_WRONG_TYPE).
    aggregate = _spark_class(spark, f"{_CATALYST}.aggregate.BloomFilterAggregate")(
        _to_expression(spark, hashed),
        _to_expression(spark, F.lit(int(expected_items)).cast("bigint")),
        _to_expression(spark, F.lit(int(num_bits)).cast("bigint")),
    )
    return _to_column(spark, aggregate.toAggregateExpression())


def bloom_broadcast(spark: SparkSession, filter_bytes: bytes):
    """A serialized Bloom filter as a broadcast variable (``aipq.spark.BroadcastMightContain.broadcast``), for
    ``might_contain``."""
    return _aipq_class(spark, "BroadcastMightContain").broadcast(spark._jsparkSession, bytearray(filter_bytes))


def destroy_broadcast(broadcast) -> None:
    """Free a broadcast variable's blocks on the driver and the executors now, without waiting for them."""
    broadcast.destroy()


def might_contain(spark: SparkSession, broadcast, hashed: Column) -> Column:
    """TRUE when ``hashed`` may be in the broadcast Bloom filter (``bloom_broadcast``), FALSE only when it certainly
    is not, NULL for a NULL hash. The plan holds the broadcast's handle, not the filter: a filter as a literal is
    hashed, compared and copied by every planning pass (docs/decisions.md)."""
    expression = _aipq_class(spark, "BroadcastMightContain")(_to_expression(spark, hashed), broadcast)
    return _to_column(spark, expression)


def might_contain_column(spark: SparkSession, bloom_filter: Column, hashed: Column) -> Column:
    """As ``might_contain`` with the filter given as a column: a summary pass's, read by a scalar subquery while
    the pass's job runs."""
    expression = _spark_class(spark, f"{_CATALYST}.BloomFilterMightContain")(
        _to_expression(spark, bloom_filter), _to_expression(spark, hashed))
    return _to_column(spark, expression)


@dataclass(frozen=True)
class SketchedColumn:
    """What ``ColumnSketcher`` gathered for one column."""

    rows: int  # rows seen
    present: int  # of which non-null
    width_sum: int  # sum of the widths passed with the values
    sketch: bytes | None  # as ``hll_sketch_agg`` serializes it; None when every value was null
    sample: tuple[str, ...] = ()  # text columns: a uniform sample of the distinct values (bottom-k by hash)


class ColumnSketcher:
    """HLL sketches, row and null counts and width sums of a few columns, gathered inside generated code by the
    JVM accumulator ``aipq.spark.ColumnSketches`` (java/src; its comment says how and why).

    ``columns``: per column (the SQL of the value to sketch, BIGINT or STRING; the SQL of an INT width for a
    BIGINT value or None; whether the value is STRING, whose width is its byte count; the table column the value
    is computed from, or None). ``observe`` puts the always-true predicate feeding them on a raw table read;
    over a columnar scan the session extension ``aipq.spark.SketchBatches`` feeds them batch by batch instead,
    from the named table columns. ``results`` reads the figures once the job ran."""

    def __init__(self, spark: SparkSession, lg_k: int, columns: Sequence[tuple[str, str | None, bool, str | None]]):
        self._spark = spark
        self._count = len(columns)
        self._accumulator = _aipq_class(spark, "ColumnSketches").register(spark._jsparkSession, self._count, lg_k)
        self._spec = _RECORD.join(f"{'text' if text else 'long'}{_RECORD}{value}{_RECORD}{width or ''}"
                                  f"{_RECORD}{source or ''}" for value, width, text, source in columns)

    def observe(self, df: DataFrame) -> DataFrame:
        return _frame(self._spark, self._accumulator.observe(df._jdf, self._spec))

    def results(self) -> list[SketchedColumn]:
        data, offset, found = bytes(self._accumulator.results()), 0, []
        for _ in range(self._count):
            seen, present, widths, length = struct.unpack_from(">qqqi", data, offset)
            offset += 28
            sketch = data[offset:offset + length] if length >= 0 else None
            offset += max(length, 0)
            sample, offset = _sample_values(data, offset)
            found.append(SketchedColumn(seen, present, widths, sketch, sample))
        return found


def _sample_values(data: bytes, offset: int) -> tuple[tuple[str, ...], int]:
    """A column's sampled values as ``ColumnSketches.results`` lays them out: a count, then length and UTF-8."""
    (count,), offset = struct.unpack_from(">i", data, offset), offset + 4
    values = []
    for _ in range(count):
        (length,), offset = struct.unpack_from(">i", data, offset), offset + 4
        values.append(data[offset:offset + length].decode("utf-8"))
        offset += length
    return tuple(values), offset


def observed_metrics(observation, keep_in_jvm: Collection[str] = ()) -> dict:
    """An observation's metrics as a dict, like ``Observation.get`` but fast for large binary values.

    ``Observation.get`` pickles the row in the JVM and py4j decodes the pickle's byte array one Python
    operation per byte (~0.2 s per MB: a 1 MB Bloom filter read three times cost a stage half a second). Here the
    row crosses as JSON text, binaries base64-encoded by Spark's ``Row.json``. Metrics named in ``keep_in_jvm``
    (HIP's hash lists) are left out (None) and read with ``observed_value`` instead."""
    row = observation._jo.getRow()
    schema = row.schema()
    if keep_in_jvm:
        jvm = observation._jvm
        names = list(schema.fieldNames())
        values = jvm.java.util.ArrayList(jvm.scala.jdk.javaapi.CollectionConverters.asJava(row.toSeq()))
        for name in keep_in_jvm:
            values.set(names.index(name), None)
        row = jvm.org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema(values.toArray(), schema)
    data = json.loads(row.json(), parse_float=str)  # decimals keep their digits; doubles are converted below
    metrics = {}
    for spec in json.loads(schema.json())["fields"]:
        name, kind = spec["name"], spec["type"]
        value = data.get(name)
        if value is not None and isinstance(kind, str):
            if kind == "binary":
                value = base64.b64decode(value)
            elif kind in ("double", "float"):
                value = float(value)
            elif kind.startswith("decimal"):
                value = Decimal(str(value))
        metrics[name] = value
    return metrics


def observed_value(observation, name: str):
    """An observed metric left in the JVM (a large key list need not cross into Python)."""
    row = observation._jo.getRow()
    return row.get(row.fieldIndex(name))


def seq_size(seq) -> int:
    return int(seq.size())


def in_hash_set(spark: SparkSession, values, hashed: Column) -> Column:
    """TRUE when ``hashed`` is one of ``values`` (a JVM Seq from ``observed_value``): Spark's InSet, a hash set
    probe per row in the JVM."""
    expression = _spark_class(spark, f"{_CATALYST}.InSet")(_to_expression(spark, hashed), values.toSet())
    return _to_column(spark, expression)


def probe_gate(spark: SparkSession, condition: Column, window: int, min_rejection: float):
    """``condition`` (a summary's probe) as ``aipq.spark.ProbeGate``: each task stops probing over a window of
    ``window`` rows in which it removed less than ``min_rejection`` of the rows it probed, probing one row in 16
    until a window shows it would remove more. Returns the column and the gate's tally (``gate_unprobed_rows``)."""
    tally = spark.sparkContext._jsc.sc().longAccumulator("aipq-probe-gate")
    expression = _aipq_class(spark, "ProbeGate")(_to_expression(spark, condition), int(window),
                                                 float(min_rejection), tally)
    return _to_column(spark, expression), tally


def gate_unprobed_rows(tally) -> int:
    """The rows a probe gate let through without probing, summed over its tasks (counted every 4096 rows)."""
    return int(tally.sum())


def counted_filter(condition: Column, mark: int) -> Column:
    """``condition`` as a filter that Spark keeps as a plan node of its own and that ``filter_row_counts`` finds
    by ``mark`` (a negative number below -2**40) in the executed plan. Being nondeterministic (the CASE on
    ``monotonically_increasing_id``, which is always above the mark), it is never merged with neighbouring
    filters, so its rows in and out are Spark's own SQL metrics of that node. Counting with an observation
    instead would cut whole-stage code generation in two: +0.23 s on 6 M rows here."""
    return F.when(F.monotonically_increasing_id() > F.lit(int(mark)), condition)


def filter_row_counts(spark: SparkSession, job_group: str,
                      marks: Collection[int]) -> dict[int, tuple[int | None, int | None]]:
    """Rows into and out of each ``counted_filter`` of ``marks`` in the SQL executions that ran the jobs of
    ``job_group``, from Spark's SQL status store (the plan graph and its metrics), read in one JVM call by
    ``aipq.spark.FilterRowCounts``. A filter Spark removed or never ran is left out."""
    if not marks:
        return {}
    # the status store is fed asynchronously: the JVM waits for Spark's listener bus first
    found = _aipq_class(spark, "FilterRowCounts").countForGroup(
        spark._jsparkSession, job_group, ",".join(map(str, marks)), _RECENT_EXECUTIONS, 10_000)
    counts: dict[int, tuple[int | None, int | None]] = {}
    for record in filter(None, found.split(";")):
        mark, rows_in, rows_out = record.split(",")
        counts[int(mark)] = (int(rows_in) if rows_in else None, int(rows_out) if rows_out else None)
    return counts


_RECENT_EXECUTIONS = 16  # a stage's write and its subqueries are among the last few SQL executions


@dataclass(frozen=True)
class FooterColumn:
    """A column's statistics over every row group of some parquet files, from their footers."""

    nulls: int
    min: str | None  # as parquet's stringifier renders it (dates ISO, decimals with their scale); None: all null
    max: str | None


@dataclass(frozen=True)
class ParquetFooters:
    """What the footers of some parquet files hold: their rows, and statistics of the columns every row group
    has them for."""

    rows: int | None  # None: a file cannot be read as parquet
    columns: dict[str, FooterColumn]


def parquet_footers(spark: SparkSession, files: Sequence[str], columns: Sequence[str]) -> ParquetFooters:
    """Rows of the parquet ``files``, and nulls, min and max of ``columns`` (top-level, any case) over all their
    row groups, read from the footers with Spark's parquet-mr (no data page is read) by
    ``aipq.spark.FooterStatistics`` in one call. A column is left out when any row group lacks its statistics;
    nothing is known when the files cannot be read as parquet."""
    found_text = _aipq_class(spark, "FooterStatistics").read(
        spark.sparkContext._jsc.hadoopConfiguration(), _RECORD.join(files), _RECORD.join(columns))
    if found_text is None:
        return ParquetFooters(None, {})
    rows, *records = found_text.split(_RECORD)
    found = {}
    for record in records:
        name, nulls, has_values, low, high = record.split(_FIELD)
        values = has_values == "1"
        found[name] = FooterColumn(int(nulls), low if values else None, high if values else None)
    return ParquetFooters(int(rows), found)


def parquet_footer_statistics(spark: SparkSession, files: Sequence[str],
                              columns: Sequence[str]) -> dict[str, FooterColumn]:
    """Nulls, min and max of ``columns`` from the footers of the parquet ``files`` (``parquet_footers``)."""
    return parquet_footers(spark, files, columns).columns


@dataclass(frozen=True)
class BloomFilterShape:
    bits: int
    expected_fpp: float  # from the share of bits set: the chance a key not put in passes the probe


def bloom_filter_shape(filter_bytes: bytes) -> BloomFilterShape:
    """Bits and expected false-positive rate of a serialized Spark Bloom filter, as Spark's ``bitSize`` and
    ``expectedFpp`` give them: (bits set / bits) ^ hash functions. Parsed here, since sending a 350 KB filter
    back through py4j to ask Spark cost 0.02–0.04 s per summary. Spark's format (``BloomFilterImpl.writeTo``,
    big-endian): version, hash functions, a seed from version 2 on, then the bit array's word count and words;
    tests/test_jvm.py checks this against Spark's own reader."""
    version, hashes = struct.unpack_from(">ii", filter_bytes, 0)
    offset = _BLOOM_WORDS_AT.get(version)
    if offset is None:
        raise ValueError(f"Spark Bloom filter format version {version} is not one aipq reads (1 or 2)")
    (words,) = struct.unpack_from(">i", filter_bytes, offset)
    bits = 64 * words
    ones = int.from_bytes(filter_bytes[offset + 4:offset + 4 + 8 * words], "big").bit_count()
    return BloomFilterShape(bits, (ones / bits) ** hashes if bits else 1.0)


_BLOOM_WORDS_AT = {1: 8, 2: 12}  # by format version: where the bit array's word count is


def swap_sql_conf(spark: SparkSession, values: dict[str, str | None]) -> dict[str, str | None]:
    """Set runtime SQL settings (None: unset) and return the values they replace (None: unset), to give back to
    restore them: in one py4j call (``aipq.spark.Confs``), or one by one where a key or value holds one of its
    separators."""
    if not values:
        return {}
    if any(_RECORD in text or _FIELD in text for pair in values.items() for text in pair if text is not None):
        previous = {key: spark.conf.get(key, None) for key in values}
        for key, value in values.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        return previous
    text = _RECORD.join(key if value is None else key + _FIELD + value for key, value in values.items())
    previous = {}
    for record in _aipq_class(spark, "Confs").swap(spark.conf._jconf, text).split(_RECORD):
        key, found, value = record.partition(_FIELD)
        previous[key] = value if found else None
    return previous


@dataclass(frozen=True)
class ShuffleFigures:
    shuffle_read_bytes: int = 0
    shuffle_read_records: int = 0
    shuffle_write_bytes: int = 0
    shuffle_write_records: int = 0
    input_bytes: int = 0
    input_records: int = 0
    output_bytes: int = 0
    output_records: int = 0


def job_group_figures(spark: SparkSession, job_group: str) -> ShuffleFigures:
    """Spark's own I/O metrics summed over the completed stages of a job group."""
    return job_groups_figures(spark, [job_group])[0]


def job_groups_figures(spark: SparkSession, job_groups: Sequence[str]) -> list[ShuffleFigures]:
    """Spark's own I/O metrics summed over the completed stages of each job group (from its status store, in one
    call to ``aipq.spark.JobGroupFigures``, after the listener bus has fed the store)."""
    if not job_groups:
        return []
    if any(_RECORD in group for group in job_groups):
        raise ValueError("a job group's name holds a NUL character")
    text = _aipq_class(spark, "JobGroupFigures").sums(spark.sparkContext._jsc.sc(), _RECORD.join(job_groups), 10_000)
    return [ShuffleFigures(*(int(value) for value in record.split(","))) for record in text.split(_RECORD)]


def codegen_compilations(spark: SparkSession) -> int:
    """Classes Spark's code generator has compiled in this JVM (a cache hit compiles nothing)."""
    return int(_jvm(spark).org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


class HadoopFiles:
    """Hadoop FileSystem operations on any URI Spark reads (``aipq.spark.Storage``), one py4j call each; the
    file primitives of ``engine/storage.py`` for every store that is not a plain local path."""

    def __init__(self, spark: SparkSession):
        self._storage = _aipq_class(spark, "Storage")
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def qualify(self, uri: str) -> str:
        return self._storage.qualify(self._conf, uri)

    def status(self, uri: str) -> tuple[bool, int, int] | None:
        """(is a directory, length, modified ms), or None when nothing is there."""
        text = self._storage.status(self._conf, uri)
        if not text:
            return None
        kind, length, modified = text.split(_FIELD)
        return kind == "d", int(length), int(modified)

    def data_files(self, uri: str) -> list[tuple[str, str, int, int]] | None:
        """(path, path relative to ``uri``, length, modified ms) of each data file; None when nothing is there."""
        text = self._storage.dataFiles(self._conf, uri)
        if text is None:
            return None
        files = []
        for record in text.split(_RECORD):
            if record:
                path, relative, length, modified = record.split(_FIELD)
                files.append((path, relative, int(length), int(modified)))
        return files

    def children(self, uri: str) -> list[tuple[str, bool, int]]:
        """(path, is a directory, modified ms) of each entry directly under ``uri``."""
        entries = []
        for record in self._storage.children(self._conf, uri).split(_RECORD):
            if record:
                path, kind, modified = record.split(_FIELD)
                entries.append((path, kind == "d", int(modified)))
        return entries

    def mkdirs(self, uri: str) -> bool:
        return self._storage.mkdirs(self._conf, uri)

    def rename(self, source: str, target: str) -> bool:
        return self._storage.rename(self._conf, source, target)

    def delete(self, uri: str, recursive: bool = True) -> bool:
        return self._storage.delete(self._conf, uri, recursive)

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._storage.writeBytes(self._conf, uri, bytearray(data))

    def read_bytes(self, uri: str) -> bytes:
        return bytes(self._storage.readBytes(self._conf, uri))

    def append_to_local(self, uris: Sequence[str], local_file: str) -> int:
        return self._storage.appendToLocal(self._conf, _RECORD.join(uris), local_file)

    def content_digests(self, uris: Sequence[str]) -> list[str]:
        """What identifies each file's content (the store's checksum, a parquet footer's digest or the bytes'),
        in one call (``Storage.contentDigests``)."""
        return self._storage.contentDigests(self._conf, _RECORD.join(uris)).split(_RECORD) if uris else []


@dataclass(frozen=True)
class ClusterShape:
    """What the benefit estimator reads of the cluster a session runs on."""

    executors: int  # JVMs that run tasks (1 in local mode: the driver's)
    task_slots: int  # tasks that run at once over all executors (Spark's default parallelism)
    executor_cores: int  # tasks that share one executor's memory
    executor_memory: str  # one executor's heap, as Spark writes it (the driver's in local mode)


def aipq_classes_loaded(spark: SparkSession) -> bool:
    """Whether the session's driver has aipq's JVM classes (``spark.jars`` held aipq's jar when it started)."""
    from py4j.java_gateway import JavaClass

    try:
        return isinstance(_jvm(spark).aipq.spark.Frames, JavaClass)
    except Exception:  # noqa: BLE001 — any py4j failure: not loaded
        return False


def session_stopped(spark: SparkSession) -> bool:
    """Whether the session's SparkContext was stopped (PySpark drops its Java context then)."""
    context = spark.sparkContext
    return context._jsc is None or context._jsc.sc().isStopped()


def clone_session(spark: SparkSession) -> SparkSession:
    """A session of its own over ``spark``'s SparkContext, starting as a copy of its SQL settings, temporary
    views and functions (the JVM's ``SparkSession.cloneSession``): settings changed on it are never seen by
    ``spark``'s other users, and views made on ``spark`` later are not seen by it."""
    return SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())


def _session_catalog(spark: SparkSession):
    return spark._jsparkSession.sessionState().catalog()


def is_temporary_view(spark: SparkSession, name: str) -> bool:
    """Whether the session has a (local) temporary view ``name``."""
    return bool(_session_catalog(spark).getTempView(name).isDefined())


def is_global_temporary_view(spark: SparkSession, name: str) -> bool:
    """Whether the application has a global temporary view ``name`` (read as ``global_temp.name``)."""
    return bool(_session_catalog(spark).getGlobalTempView(name).isDefined())


def temporary_view_names(spark: SparkSession) -> list[str]:
    """The names of the session's (local) temporary views."""
    return _scala_strings(_session_catalog(spark).getTempViewNames())


def stop_and_wait(spark: SparkSession, timeout_seconds: float) -> None:
    """Stop the session and wait for the JVM PySpark started to exit (it exits when its stdin closes)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    spark.stop()
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout=timeout_seconds)


def java_version(spark: SparkSession) -> str:
    """The version of the Java that runs the driver."""
    return str(_jvm(spark).java.lang.System.getProperty("java.version"))


def cluster_shape(spark: SparkSession) -> ClusterShape:
    """The executors registered with the session now (the block managers other than the driver's), their cores
    and memory; local mode is one executor, the driver, with every task slot."""
    context = spark.sparkContext
    slots = context.defaultParallelism
    conf = spark.conf.get
    if context.master.startswith("local"):
        return ClusterShape(1, slots, slots, conf("spark.driver.memory", "1g"))
    executors = max(context._jsc.sc().getExecutorMemoryStatus().size() - 1, 1)
    cores = int(conf("spark.executor.cores", "0") or 0) or max(slots // executors, 1)
    return ClusterShape(executors, slots, cores, conf("spark.executor.memory", "1g"))


def join_strategies(spark: SparkSession, job_group: str) -> dict[str, int]:
    """The joins Spark ran in a job group, by physical operator (``SortMergeJoin``, ``BroadcastHashJoin``, …),
    from the SQL status store's plans: with AQE on, the final adaptive plan (``aipq.spark.PlanJoins``)."""
    text = _aipq_class(spark, "PlanJoins").count(spark._jsparkSession, job_group, 10_000)
    return {name: int(count) for name, count in (pair.split("=") for pair in text.split(",") if pair)}


@dataclass(frozen=True)
class MetastoreTable:
    """A table as Spark's external catalog (a Hive metastore) holds it, in plain values."""

    database: str
    name: str
    location: str
    provider: str  # a data source name (parquet, orc, csv), or "hive" for a Hive SerDe table
    input_format: str
    serde: str  # a Hive SerDe's class name ("" for a data source table)
    storage_properties: dict[str, str]
    schema_json: str  # the columns, partition columns last
    partition_columns: tuple[str, ...]
    table_type: str  # EXTERNAL, MANAGED or VIEW
    properties: dict[str, str]


def _external_catalog(spark: SparkSession):
    return spark._jsparkSession.sharedState().externalCatalog()


def _scala_map(jmap) -> dict[str, str]:
    found, entries = {}, jmap.iterator()
    while entries.hasNext():
        entry = entries.next()
        found[str(entry._1())] = str(entry._2())
    return found


def _scala_strings(seq) -> list[str]:
    found, items = [], seq.iterator()
    while items.hasNext():
        found.append(str(items.next()))
    return found


def _option(value, default: str = "") -> str:
    return str(value.get()) if value.isDefined() else default


def hadoop_setting(spark: SparkSession, key: str) -> str | None:
    """A setting of the session's Hadoop configuration (where hive-site.xml's land)."""
    value = spark.sparkContext._jsc.hadoopConfiguration().get(key)
    return None if value is None else str(value)


def metastore_databases(spark: SparkSession) -> list[str]:
    return _scala_strings(_external_catalog(spark).listDatabases())


def metastore_table_names(spark: SparkSession, database: str) -> list[str]:
    return _scala_strings(_external_catalog(spark).listTables(database))


def metastore_database_location(spark: SparkSession, database: str) -> str | None:
    catalog = _external_catalog(spark)
    if not catalog.databaseExists(database):
        return None
    return str(catalog.getDatabase(database).locationUri().toString())


def metastore_table(spark: SparkSession, database: str, name: str) -> MetastoreTable | None:
    """The table ``database.name`` in the session's external catalog, or None when there is none."""
    catalog = _external_catalog(spark)
    if not catalog.tableExists(database, name):
        return None
    table = catalog.getTable(database, name)
    storage = table.storage()
    location = str(storage.locationUri().get().toString()) if storage.locationUri().isDefined() else ""
    return MetastoreTable(database, name, location, _option(table.provider(), "hive").lower(),
                          _option(storage.inputFormat()), _option(storage.serde()), _scala_map(storage.properties()),
                          table.schema().json(),
                          tuple(_scala_strings(table.partitionColumnNames())), str(table.tableType().name()),
                          _scala_map(table.properties()))


def class_loadable(spark: SparkSession, name: str) -> bool:
    """Whether the driver can load the class ``name`` (a table's SerDe) the way Spark's Hive table scan does: from
    the session's class loader, which holds the jars of ``spark.jars``."""
    from py4j.protocol import Py4JError

    jvm = _jvm(spark)
    try:
        jvm.java.lang.Class.forName(name, False, jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
        return True
    except Py4JError:
        return False


def metastore_partitions(spark: SparkSession, database: str, name: str) -> list[tuple[dict[str, str], str]]:
    """(spec, location) of each partition of ``database.name`` the external catalog holds."""
    partitions = _external_catalog(spark).listPartitions(database, name, _jvm(spark).scala.Option.empty())
    found, items = [], partitions.iterator()
    while items.hasNext():
        partition = items.next()
        found.append((_scala_map(partition.spec()), str(partition.location().toString())))
    return found
