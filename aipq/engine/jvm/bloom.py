"""Summaries as Spark expressions: Bloom filters built by an aggregate and probed from a broadcast
(``aipq.spark.BroadcastMightContain``), hash sets, and the probe gate (``aipq.spark.ProbeGate``)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from aipq.engine.jvm.gateway import (
    _CATALYST,
    _aipq_class,
    _spark_class,
    _to_column,
    _to_expression,
)


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

