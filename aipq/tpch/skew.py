"""Skewed TPC-H (``aipq tpch gen --skew Z``): the foreign keys that joins spread work by — orders' customer and
lineitem's part — redrawn from a Zipf distribution, so that a few keys carry most rows (ADP's skewed data). Each
line keeps a supplier of its new part (TPC-H's formula for the four suppliers of a part), so lineitem still
joins partsupp; the other tables are TPC-H's own. The remapping is Spark SQL over the generated files (no
per-row Python)."""

from __future__ import annotations

# The tables rewritten: their columns' new values in order, each seeing the ones before it ({zipf_customers},
# {zipf_parts} and {suppliers} filled in by ``skewed_columns``).
SKEWED: dict[str, tuple[tuple[str, str], ...]] = {
    "orders": (("o_custkey", "{zipf_customers}"),),
    "lineitem": (("l_partkey", "{zipf_parts}"),
                 ("l_suppkey", "(l_partkey + (l_linenumber % 4) * (DIV({suppliers}, 4) + DIV(l_partkey - 1, "
                               "{suppliers}))) % {suppliers} + 1")),
}


def zipf_sql(keys: int, exponent: float, seed: int) -> str:
    """A key from 1 to ``keys`` drawn with P(k) ∝ 1 / k^exponent, by inverting the continuous power law's
    distribution over [1, keys + 1) at a uniform draw; exponent 0 is uniform."""
    draw = f"rand({seed})"
    if abs(exponent - 1.0) < 1e-9:
        value = f"POW({keys + 1}D, {draw})"
    else:
        power = 1.0 - exponent
        value = f"POW((POW({keys + 1}D, {power!r}) - 1) * {draw} + 1, {1.0 / power!r})"
    return f"CAST(LEAST({keys}, GREATEST(1, FLOOR({value}))) AS BIGINT)"


def skewed_columns(table: str, exponent: float, customers: int, parts: int,
                   suppliers: int) -> tuple[tuple[str, str], ...]:
    """(column, SQL of its skewed value) in the order to compute them, for a table ``SKEWED`` rewrites."""
    seed = sorted(SKEWED).index(table) + 1
    fill = {"zipf_customers": zipf_sql(customers, exponent, seed), "zipf_parts": zipf_sql(parts, exponent, seed),
            "suppliers": suppliers}
    return tuple((column, text.format(**fill)) for column, text in SKEWED[table])


def skew_label(exponent: float) -> str:
    return f"skew{exponent:g}".replace(".", "_")
