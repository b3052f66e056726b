"""Runtime SQL settings swapped in one py4j call (``aipq.spark.Confs``)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from aipq.engine.jvm.gateway import (
    _FIELD,
    _RECORD,
    _aipq_class,
)


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

