"""How large a Bloom filter is: bits for a number of keys at a false-positive rate, the keys a size holds, the
most bits that stay within α, and the limits on both (Spark's serialized form, its choice of hash functions)."""

from __future__ import annotations

import math

MAX_HASH_FUNCTIONS = 16



MIN_BLOOM_BITS = 1 << 16



# Auto-sized filters stop here unless --bloom-size says otherwise: the distinct-key bounds available before a
# stage runs (input row counts) are loose, and Spark's runtime filters use the same 1 MB default.
AUTO_BLOOM_CAP_BYTES = 1024 * 1024



# A predicate transfer pass's filter holds room for this many times the keys it is estimated to hold: its
# estimate is an upper bound where the statistics hold, and an underestimate costs precision, never rows.
TRANSFER_KEY_MARGIN = 2



# Spark's serialized Bloom filter: its bits plus at most this header (version, hash functions, word count)
BLOOM_HEADER_BYTES = 16



def loadable_bits(alpha: int) -> int:
    """The most bits a Bloom filter may have for its serialized form, header included, to stay within α (whole
    64-bit words, as Spark stores them)."""
    return max((alpha - BLOOM_HEADER_BYTES) * 8 // 64 * 64, 64)



def bloom_bits(expected_items: int, fpp: float, cap_bytes: int) -> int:
    """Bits for ``expected_items`` keys at false-positive rate ``fpp`` (m = -n ln p / (ln 2)^2), a multiple of
    64 between 64 Kbit and the cap."""
    wanted = -max(expected_items, 1) * math.log(fpp) / (math.log(2) ** 2)
    bits = max(MIN_BLOOM_BITS, min(int(wanted), cap_bytes * 8))
    return (bits + 63) // 64 * 64



def least_items(bits: int) -> int:
    """The fewest items to tell Spark a filter of ``bits`` holds: with k = round(bits/n · ln 2), one expected key
    in 64 Kbit means 45,000 hash functions per probe (docs/decisions.md), while beyond
    MAX_HASH_FUNCTIONS the false-positive rate is already below 2^-16."""
    return max(math.ceil(bits * math.log(2) / MAX_HASH_FUNCTIONS), 1)



def bloom_items(bits: int, fpp: float) -> int:
    """The number of keys a filter of ``bits`` holds at false-positive rate ``fpp`` (``bloom_bits`` inverted).

    Spark picks a filter's number of hash functions from the item count it is given, k = round(bits/n · ln 2):
    given a loose upper bound (all 6 M lineitem rows for 0.5 M distinct keys) it picks k = 1 and the filter
    passes ~10 % of absent keys instead of 1 %."""
    return max(int(bits * (math.log(2) ** 2) / -math.log(fpp)), 1)



def transfer_filter_bits(keys: float, fpp: float, alpha: int) -> int:
    """A predicate-transfer pass's filter for the ``keys`` it is estimated to hold, with room for
    ``TRANSFER_KEY_MARGIN`` times as many, at most α and the auto-sizing cap."""
    return bloom_bits(math.ceil(keys * TRANSFER_KEY_MARGIN), fpp, min(alpha, AUTO_BLOOM_CAP_BYTES))
