"""The handles every module of the package uses: aipq's and Spark's JVM classes (each looked up once per
SparkContext), DataFrames made from JVM plans, Columns from JVM expressions, and the separators of the strings
aipq's JVM classes take and return."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

from py4j.java_gateway import JavaMember
from pyspark.sql import Column, DataFrame, SparkSession

_CATALYST = "org.apache.spark.sql.catalyst.expressions"
COLLECTOR_JAR = Path(__file__).parent.parent / "jars" / "aipq-spark.jar"  # put on the session's classpath at start
SKETCH_BATCHES_EXTENSION = "aipq.spark.SketchBatches"  # spark.sql.extensions: sketches columnar scans per batch
# spark.sql.extensions: decimal sums on longs where the files prove it exact (while session.LONG_DECIMALS_SETTING)
LONG_DECIMALS_EXTENSION = "aipq.spark.LongDecimalAggregates"
AIPQ_EXTENSIONS = (SKETCH_BATCHES_EXTENSION, LONG_DECIMALS_EXTENSION)
SPARK_VERSION_ENTRY = "META-INF/aipq-spark-version"  # written by java/build.sh: the Spark the jar was built for
_RECORD, _FIELD = "\u0000", "\u0001"  # separators of the strings aipq's JVM classes take and return


def jar_spark_version() -> str:
    """The Spark version aipq's jar was built and tested against (``java/build.sh`` records it)."""
    with zipfile.ZipFile(COLLECTOR_JAR) as jar:
        return jar.read(SPARK_VERSION_ENTRY).decode().strip()


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


def _to_expression(spark: SparkSession, column: Column):
    return _spark_class(spark, "org.apache.spark.sql.classic.ExpressionUtils").expression(column._jc)


def _to_column(spark: SparkSession, expression) -> Column:
    from pyspark.sql.classic.column import Column as ClassicColumn

    return ClassicColumn(_spark_class(spark, "org.apache.spark.sql.classic.ExpressionUtils").column(expression))

