"""How many of a probed column's distinct keys a summary will hold, before the summary is built.

Containment (the smaller key set lies within the larger) prices a summary at ``min(S, P) / P`` of the P probed
keys kept. It errs both ways where a filtered dimension meets a fact:
- a summary as large as the probed keys or larger is priced to keep all of them, though the dimension's filter
  removes keys of the fact as much as of its own;
- a fact that uses part of its dimension's keys is priced as if the summary's keys were all among them.
The cases that showed it are in docs/decisions.md.

Here the probed keys are taken to be spread over the dimension's keys within the probed column's range (its
span), and the summary's keys too, as far as the span holds them: each probed key is found with the share of
the span the summary holds. Where the fact's keys cover the span (a foreign key over its whole dimension) this
is containment again; where they lie inside a narrower range (a fact's dates within date_dim's two centuries)
the summary's keys are taken to fall inside it, as containment takes them to.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyRange:
    """A column's distinct values and their bounds (numbers; dates by their ordinal)."""

    distinct: float
    low: float
    high: float


def span_keys(domain: KeyRange, probed: KeyRange) -> float:
    """The domain's keys within the probed column's range, the domain's spread evenly over its own range (at
    least the probed column's own keys)."""
    width = domain.high - domain.low
    shared = min(domain.high, probed.high) - max(domain.low, probed.low)
    if width <= 0 or shared < 0:
        return probed.distinct
    return max(probed.distinct, domain.distinct * min(1.0, (shared + 1.0) / (width + 1.0)))


def common_keys(summary: float, probed: float, span: float | None) -> float:
    """The probed keys the summary holds: each found with the share of the span the summary holds (its keys
    falling within the span as far as it holds them); without a span, containment."""
    if span is None or span <= probed:
        return min(summary, probed)
    return probed * min(summary, span) / span
