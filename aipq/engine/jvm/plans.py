"""DataFrames and logical plans built from SQL text in few py4j calls (``aipq.spark.Plans``), and reading what an
observation measured."""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Sequence
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Observation, SparkSession

from aipq.engine.jvm.gateway import (
    _FIELD,
    _aipq_class,
    _frame,
    _jvm,
    _spark_class,
    _sql_list,
)


def select_sql(df: DataFrame, expressions: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*expressions)`` in one py4j call instead of about three per column."""
    spark = df.sparkSession
    return _frame(spark, _aipq_class(spark, "Plans").frameSelect(df._jdf, _sql_list(expressions)))


def aggregate_sets_sql(df: DataFrame, groups: Sequence[str], sets: Sequence[Sequence[int]],
                       aggregates: Sequence[str]) -> DataFrame:
    """``df`` grouped by each grouping set (indexes into the group columns ``groups``) with ``aggregates``."""
    spark = df.sparkSession
    text = ";".join(",".join(map(str, chosen)) for chosen in sets)
    return _frame(spark, _aipq_class(spark, "Plans").frameAggregateSets(df._jdf, _sql_list(groups), text,
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
    observed = _aipq_class(spark, "Plans").frameObserve(df._jdf, observation._jo, _sql_list(aggregates),
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

