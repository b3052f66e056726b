"""HyperLogLog sketches as Spark's ``hll_sketch_agg`` writes them (Apache DataSketches HLL): estimates, unions
of partial sketches (other runs, other partitions, other tables) and the error to expect.

Only whole sketches pass through here, never rows: these are per-column bytes (a few KB), not a hot path.
"""

from __future__ import annotations

import math

DEFAULT_LG_K = 12  # Spark's default for hll_sketch_agg: 4,096 buckets, RSE ≈ 1.6 %


INTEGRAL_TYPES = ("tinyint", "smallint", "int", "bigint")


def sketch_input_sql(column: str, data_type: str) -> str:
    """The SQL expression to sketch for a column, the same everywhere (table statistics, stage outputs,
    summaries) so that sketches of two sides of a join can be intersected: integral keys as BIGINT (INT and
    BIGINT keys then hash alike), strings as they are, everything else by its 64-bit hash (formatting a date as
    a string per row cost a third of a TPC-H scan; hashing costs a tenth of that). NULL stays NULL: sketches
    count only values."""
    quoted = "`" + column.replace("`", "``") + "`"
    if data_type in INTEGRAL_TYPES:
        return f"CAST({quoted} AS BIGINT)"
    if data_type == "string":
        return quoted
    return f"IF({quoted} IS NULL, NULL, xxhash64({quoted}))"  # xxhash64 of NULL is its seed, not NULL


def relative_standard_error(lg_k: int) -> float:
    """The sketch's RSE, the paper's precision knob: 1.04 / √(2^lg_k) for HLL."""
    return 1.04 / math.sqrt(2 ** lg_k)


def estimate(sketch: bytes) -> float:
    from datasketches import hll_sketch

    return hll_sketch.deserialize(sketch).get_estimate()


def empty(lg_k: int = DEFAULT_LG_K) -> bytes:
    """A sketch that saw no value, as ``hll_sketch_agg`` gives over no rows."""
    from datasketches import hll_sketch, tgt_hll_type

    return hll_sketch(lg_k, tgt_hll_type.HLL_8).serialize_compact()


def union(sketches: list[bytes], lg_k: int = DEFAULT_LG_K) -> bytes:
    """One sketch of the union of the values the given sketches saw (partial sketches merge losslessly)."""
    from datasketches import hll_sketch, hll_union

    merged = hll_union(lg_k)
    for sketch in sketches:
        merged.update(hll_sketch.deserialize(sketch))
    return merged.get_result().serialize_compact()


def union_estimate(sketches: list[bytes], lg_k: int = DEFAULT_LG_K) -> float:
    return estimate(union(sketches, lg_k))


def intersection_estimate(a: bytes, b: bytes, lg_k: int = DEFAULT_LG_K) -> float:
    """|A ∩ B| by inclusion–exclusion over the sketches: |A| + |B| − |A ∪ B| (never below 0 nor above the
    smaller set); what the benefit estimator needs for Δ."""
    size_a, size_b = estimate(a), estimate(b)
    both = size_a + size_b - union_estimate([a, b], lg_k)
    return max(0.0, min(both, size_a, size_b))
