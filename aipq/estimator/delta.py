"""Δ: how much of a probed input a summary prunes, from distinct-value statistics and the filter's size."""

from __future__ import annotations

import math


def bloom_false_positive_rate(bits: float, items: float) -> float:
    """A Bloom filter's false-positive rate with the optimal number of hash functions, k = (bits/items) ln 2:
    (1 − e^{−k n / bits})^k, which is 0.6185^(bits/items)."""
    if items <= 0:
        return 0.0
    if bits <= 0:
        return 1.0
    return min(1.0, 0.6185 ** (bits / items))


def surviving_share(probed_distinct: float, common_distinct: float, false_positive_rate: float) -> float:
    """Share of the probed rows whose key passes the summary: rows whose key the producer has (keys in common;
    rows assumed spread evenly over keys), plus false positives among the rest."""
    if probed_distinct <= 0:
        return 1.0
    matching = min(max(common_distinct / probed_distinct, 0.0), 1.0)
    return matching + (1.0 - matching) * false_positive_rate


def pruned_pages(pages_per_map: float, survive: float) -> float:
    """Δ = M × (1 − surviving share): pages per map task the summary removes."""
    return max(pages_per_map * (1.0 - survive), 0.0)


def candidate_filter_bytes(items: float, alpha: int, smallest: int = 1024) -> list[int]:
    """Filter sizes worth comparing for ``items`` keys: powers of two from 1 KB up to α, plus the size the
    paper's 1 % rule would give."""
    sizes = set()
    size = smallest
    while size <= alpha:
        sizes.add(size)
        size *= 2
    if items > 0:
        one_percent = int(math.ceil(-items * math.log(0.01) / (math.log(2) ** 2) / 8))
        if smallest <= one_percent <= alpha:
            sizes.add(one_percent)
    return sorted(sizes) or [min(smallest, alpha)]
