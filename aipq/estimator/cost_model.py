"""The paper's benefit estimation model (Hong, Ravindra & Anyanwu, section 3.2), one function per equation.

Symbols, as in the paper:
    m    map tasks of the parent job (here: the input splits of the stage input being probed)
    r    reduce tasks of the parent job (the stage's shuffle partitions)
    M    pages each map task emits on average
    B    sort buffer, in pages
    Δ    pages per map task the summary prunes
    C_R, C_W, C_T   unit cost to read, write, transfer a page
    U_R, U_W, U_T   unit cost to read, write, transfer a byte
    C_S  unit cost to sort a page in memory (Spark only; see ``spark_benefit``)
    |F|  summary size in bytes;  r'  partial summaries merged;  N  nodes the summary is copied to

``aipq/estimator/parameters.py`` maps these onto Spark; this module is only arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per page (C_*) and per byte (U_*)."""

    c_read: float
    c_write: float
    c_transfer: float
    u_read: float
    u_write: float
    u_transfer: float
    c_sort: float = 0.0  # sorting a page in memory (Spark's sort-merge join input), not a term of the paper


@dataclass(frozen=True)
class JobShape:
    """The parent job as the model sees it."""

    m: float  # map tasks
    r: float  # reduce tasks
    pages_per_map: float  # M
    sort_buffer_pages: float  # B


def sort_passes(pages: float, buffer_pages: float) -> float:
    """⌈log_{B−1}(pages / B)⌉ + 1 of eqs (5)–(6): one pass when the data fits the buffer (the logarithm is then
    ≤ 0), and no cost at all when nothing is left to sort."""
    if pages <= 0:
        return 0.0
    fan_in = max(buffer_pages - 1, 2.0)
    ratio = pages / max(buffer_pages, 1.0)
    return max(0, math.ceil(math.log(ratio, fan_in))) + 1 if ratio > 1 else 1.0


def merge_passes(m: float, buffer_pages: float) -> float:
    """⌈log_{B−1} m⌉ of eqs (9)–(12): merge passes over m map outputs (0 for a single map task)."""
    if m <= 1:
        return 0.0
    return float(math.ceil(math.log(m, max(buffer_pages - 1, 2.0))))


def sort_cost_original(job: JobShape, costs: UnitCosts) -> float:
    """Eq. (5): C_sort-orig = M (C_R + C_W)(⌈log_{B−1} M/B⌉ + 1)."""
    m_pages = job.pages_per_map
    return m_pages * (costs.c_read + costs.c_write) * sort_passes(m_pages, job.sort_buffer_pages)


def sort_cost_ip(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (6): C_sort-ip = (M − Δ)(C_R + C_W)(⌈log_{B−1} (M − Δ)/B⌉ + 1)."""
    left = max(job.pages_per_map - delta, 0.0)
    return left * (costs.c_read + costs.c_write) * sort_passes(left, job.sort_buffer_pages)


def shuffle_cost_original(job: JobShape, costs: UnitCosts) -> float:
    """Eq. (7): C_shuffle-orig = (M × m / r) C_T."""
    return job.pages_per_map * job.m / job.r * costs.c_transfer


def shuffle_cost_ip(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (8): C_shuffle-ip = ((M − Δ) m / r) C_T."""
    return max(job.pages_per_map - delta, 0.0) * job.m / job.r * costs.c_transfer


def merge_cost_per_reducer(reducer_pages: float, job: JobShape, costs: UnitCosts) -> float:
    """Eqs. (9)–(10): R (C_R + C_W) ⌈log_{B−1} m⌉ for R pages per reducer (R − Δ·m/r with information
    passing)."""
    return max(reducer_pages, 0.0) * (costs.c_read + costs.c_write) * merge_passes(job.m, job.sort_buffer_pages)


def merge_cost_original(job: JobShape, costs: UnitCosts) -> float:
    """Eq. (11): C_merge-orig = M (m / r)(C_R + C_W)⌈log_{B−1} m⌉ (eq. 9 with R = M m / r)."""
    return merge_cost_per_reducer(job.pages_per_map * job.m / job.r, job, costs)


def merge_cost_ip(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (12): C_merge-ip = (m / r)(M − Δ)(C_R + C_W)⌈log_{B−1} m⌉ (eq. 10 with R = M m / r)."""
    return merge_cost_per_reducer(max(job.pages_per_map - delta, 0.0) * job.m / job.r, job, costs)


def sort_benefit(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (2): B_sort = C_sort-orig − C_sort-ip."""
    return sort_cost_original(job, costs) - sort_cost_ip(job, delta, costs)


def shuffle_benefit(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (3): B_shuffle = C_shuffle-orig − C_shuffle-ip."""
    return shuffle_cost_original(job, costs) - shuffle_cost_ip(job, delta, costs)


def merge_benefit(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (4): B_merge = C_merge-orig − C_merge-ip."""
    return merge_cost_original(job, costs) - merge_cost_ip(job, delta, costs)


def summary_store_cost(size: float, costs: UnitCosts) -> float:
    """Eq. (14): C_ip-store = (U_T + U_W)|F| for one partial summary."""
    return (costs.u_transfer + costs.u_write) * size


def summary_merge_cost(size: float, partials: float, costs: UnitCosts) -> float:
    """Eq. (15): C_ip-merge = (U_T + U_R)|F| r' + (U_T + U_W)|F|."""
    return (costs.u_transfer + costs.u_read) * size * partials + (costs.u_transfer + costs.u_write) * size


def summary_copy_cost(size: float, nodes: float, costs: UnitCosts) -> float:
    """Eq. (16): C_ip-copy = N (U_R + U_W + U_T)|F|."""
    return nodes * (costs.u_read + costs.u_write + costs.u_transfer) * size


def summary_load_cost(size: float, costs: UnitCosts) -> float:
    """Eq. (17): C_ip-load = U_R |F|."""
    return costs.u_read * size


def summary_cost(size: float, partials: float, nodes: float, costs: UnitCosts) -> float:
    """Eq. (13): C_summary = C_ip-store + C_ip-merge + C_ip-copy + C_ip-load."""
    return (summary_store_cost(size, costs) + summary_merge_cost(size, partials, costs)
            + summary_copy_cost(size, nodes, costs) + summary_load_cost(size, costs))


def spark_sort_cost(pages: float, job: JobShape, costs: UnitCosts) -> float:
    """Eqs. (5)–(6) as Spark runs them: the first of eq. (5)'s passes is the map output's one write, which
    Spark's shuffle write is and C_T already prices; only further passes (a sort that spills, pages > B) read
    and write pages again. Sorting in memory costs C_S per page instead.
    C_sort-spark(P) = P (C_R + C_W)(⌈log_{B−1} P/B⌉ + 1 − 1) + P C_S."""
    if pages <= 0:
        return 0.0
    spills = sort_passes(pages, job.sort_buffer_pages) - 1
    return pages * (costs.c_read + costs.c_write) * spills + pages * costs.c_sort


def spark_merge_cost(reducer_pages: float, job: JobShape, costs: UnitCosts) -> float:
    """Eqs. (9)–(12) as Spark runs them: a reducer fetches its blocks into memory and merges on disk only when
    they do not fit (R > B); then eq. (9)'s ⌈log_{B−1} m⌉ passes apply, else nothing."""
    if reducer_pages <= job.sort_buffer_pages:
        return 0.0
    return merge_cost_per_reducer(reducer_pages, job, costs)


def spark_sort_benefit(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (2) with ``spark_sort_cost`` for eqs. (5)–(6)."""
    return (spark_sort_cost(job.pages_per_map, job, costs)
            - spark_sort_cost(max(job.pages_per_map - delta, 0.0), job, costs))


def spark_merge_benefit(job: JobShape, delta: float, costs: UnitCosts) -> float:
    """Eq. (4) with ``spark_merge_cost`` for eqs. (11)–(12)."""
    return (spark_merge_cost(job.pages_per_map * job.m / job.r, job, costs)
            - spark_merge_cost(max(job.pages_per_map - delta, 0.0) * job.m / job.r, job, costs))


@dataclass(frozen=True)
class Benefit:
    """Eq. (1) and its parts, in seconds; ``extra`` is what the paper's model leaves out (sibling pruning's
    saved write and load, the probe's own cost)."""

    sort: float
    shuffle: float
    merge: float
    summary: float
    extra: float = 0.0

    @property
    def total(self) -> float:
        return self.sort + self.shuffle + self.merge + self.extra - self.summary


def benefit(job: JobShape, delta: float, costs: UnitCosts, size: float, partials: float, nodes: float) -> Benefit:
    """Eq. (1): B = B_sort + B_shuffle + B_merge − C_summary."""
    return Benefit(sort_benefit(job, delta, costs), shuffle_benefit(job, delta, costs),
                   merge_benefit(job, delta, costs), summary_cost(size, partials, nodes, costs))


def spark_benefit(job: JobShape, delta: float, costs: UnitCosts, size: float, partials: float,
                  nodes: float) -> Benefit:
    """Eq. (1) on Spark: B = B_sort + B_shuffle + B_merge − C_summary with the sort and merge terms Spark pays
    (``spark_sort_benefit``, ``spark_merge_benefit``); eqs. (3), (7)–(8) and (13)–(17) unchanged."""
    return Benefit(spark_sort_benefit(job, delta, costs), shuffle_benefit(job, delta, costs),
                   spark_merge_benefit(job, delta, costs), summary_cost(size, partials, nodes, costs))
