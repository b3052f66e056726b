"""The benefit of one information passing edge, from the model (``cost_model``) and Δ (``delta``).

The paper estimates child-to-parent passing only (eqs 1–17: the parent's sort, shuffle and merge, minus the
summary's cost). aipq also prices what the paper leaves out:

- pruning a sibling's output before it is written saves that write and the consumer's read of those pages, on
  top of the consumer's sort, shuffle and merge (the paper argued this qualitatively only);
- probing costs CPU per probed row (xxhash64 and bit tests); the paper's C_summary has no such term;
- building costs CPU per row the producer writes (the Bloom filter and key sketch aggregates in its write):
  charged while the summary is still to be built (Algorithm 1), sunk once it is;
- a summary of a filtered base table (a SCAN stage, no job of the paper's plan) costs its own pass: a job and a
  read of the table's pages, charged while it is still to be built;
- pruning an input also prunes what the stage makes of those rows further on the same path (its output, the
  reader's input): ``with_downstream`` adds the largest saving of the places the edge makes redundant (the
  largest, not the sum: a stage's output and its reader's input save partly the same work);
- a summary of a partition column prunes whole partitions before they are read (``SummaryStore.partitions_left``):
  it saves the read of their pages too, and costs no probe per row;
- rows that no shuffle follows (a stage input joined map-side, by broadcast) save no sort, shuffle or merge:
  there the probe is pure cost (docs/decisions.md); and where a map-side join or filter between
  the probed input and the shuffle drops rows anyway, M counts only the share that reaches the shuffle
  (``estimator/cardinality.py``), while the probe still costs every probed row.

Eqs. (2)–(12) are seconds per task, like the paper's: one map task's sort, one reducer's shuffle and merge. A
summary's costs are paid once, so adding them to one task's saving undervalues every edge whose stage runs more
tasks than there are cores (docs/decisions.md).
``stage_seconds`` turns the per-task terms into the stage's wall time, and every figure here is wall seconds.

The savings (B_sort, B_shuffle, B_merge, a sibling's saved write, the downstream saving) are predictions; the
costs (probe, build, pre-pass, C_summary) are paid for sure. ``savings_share`` = 1 / (1 + margin) (``--margin``)
lets a user count on only part of the savings, so that a summary must be expected to save (1 + margin)× what it
surely costs. The default margin is 0, the paper's B > β alone (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from aipq.estimator import cost_model as model
from aipq.estimator.delta import (
    bloom_false_positive_rate,
    candidate_filter_bytes,
    pruned_pages,
    surviving_share,
)
from aipq.estimator.parameters import DEFAULT_PREPASS_SECONDS, PAGE_BYTES, Calibration


@dataclass(frozen=True)
class EdgeInputs:
    """What the estimate needs to know about one edge, each figure with where it came from."""

    probed_bytes: float  # the probed rows' bytes (the columns the stage reads, after map-side filters)
    probed_rows: float
    probed_splits: float  # m
    probed_distinct: float  # distinct keys among the probed rows
    summary_distinct: float  # distinct keys in the summary (its items)
    common_distinct: float  # keys in both
    shuffle_partitions: int  # r
    sort_buffer_pages: float  # B
    nodes: int = 1  # N
    partials: int = 1  # r'
    feeds_shuffle: bool = True
    shuffle_share: float = 1.0  # of the probed rows, the share that reaches the shuffle (``cardinality.reach``)
    place: str = "input"  # "input": before the target stage's shuffle; "output": before a stage's write
    summary_is_bound: bool = False  # summary_distinct is an upper bound (rows of an input), not an estimate
    summary_rows: float = 0.0  # rows the producer writes, when its summary is still to be built (else 0: sunk)
    cores: int = 1  # tasks running at once: the build's per-row cost is spread over them
    prepass_pages: float | None = None  # a SCAN stage's summary still to be built: pages of the table it reads
    savings_share: float = 1.0  # of the estimated savings, the share the decision counts on (1 / (1 + margin))
    partition_pages: float = 0.0  # the key is a partition column: pages of the partitions the summary may skip
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EdgeEstimate:
    benefit: model.Benefit
    filter_bytes: int
    false_positive_rate: float
    survive: float
    delta_pages: float
    job: model.JobShape
    inputs: EdgeInputs
    written_saved: float = 0.0  # output places: the write and the consumer's read of the pruned pages;
    # a partition column's summary: the read of the partitions it skips
    one_time: float = 0.0  # included in ``benefit.extra`` as a cost: building the summary (once for all its edges)
    downstream: float = 0.0  # included in ``benefit.extra``: what pruning here saves further on (``with_downstream``)

    @property
    def total(self) -> float:
        return self.benefit.total

    @property
    def savings(self) -> float:
        """What pruning at this place saves, before the probe's and the summary's costs."""
        return self.benefit.sort + self.benefit.shuffle + self.benefit.merge + self.written_saved

    def with_downstream(self, saved: float) -> EdgeEstimate:
        """This edge also prunes places further on its path that it makes redundant, saving ``saved`` there."""
        if saved <= 0:
            return self
        return replace(self, benefit=replace(self.benefit, extra=self.benefit.extra + saved), downstream=saved)

    @property
    def expected_keys(self) -> float | None:
        """Distinct keys the summary is expected to hold (None when only an upper bound is known)."""
        return None if self.inputs.summary_is_bound else self.inputs.summary_distinct

    def as_dict(self) -> dict:
        return {
            "B": round(self.total, 6), "B_sort": round(self.benefit.sort, 6),
            "B_shuffle": round(self.benefit.shuffle, 6), "B_merge": round(self.benefit.merge, 6),
            "C_summary": round(self.benefit.summary, 6), "other": round(self.benefit.extra, 6),
            "downstream": round(self.downstream, 6), "one_time": round(self.one_time, 6),
            "savings": round(self.savings + self.downstream, 6), "savings_share": round(self.inputs.savings_share, 4),
            "filter_bytes": self.filter_bytes, "false_positive_rate": round(self.false_positive_rate, 6),
            "surviving_share": round(self.survive, 6), "delta_pages": round(self.delta_pages, 4),
            "m": round(self.job.m, 2), "r": self.job.r, "M_pages": round(self.job.pages_per_map, 4),
            "B_pages": round(self.job.sort_buffer_pages, 1),
            "inputs": {k: v for k, v in asdict(self.inputs).items() if k != "sources"},
            "sources": dict(self.inputs.sources),
        }


def task_waves(tasks: float, cores: int) -> float:
    """How many times over a stage's tasks occupy its cores: a per-task cost times this is the stage's wall time
    for it (at least one task's time: one task alone still takes its own)."""
    return max(tasks / max(cores, 1), 1.0)


def stage_seconds(per_task: model.Benefit, job: model.JobShape, cores: int) -> model.Benefit:
    """Eqs. (2)–(4) in the stage's wall time: B_sort is per map task (× the waves of m map tasks), B_shuffle and
    B_merge per reducer (× the waves of r reducers); C_summary (eqs 13–17) is paid once and stays as it is."""
    map_waves, reduce_waves = task_waves(job.m, cores), task_waves(job.r, cores)
    return model.Benefit(per_task.sort * map_waves, per_task.shuffle * reduce_waves, per_task.merge * reduce_waves,
                         per_task.summary, per_task.extra)


def job_shape(inputs: EdgeInputs) -> model.JobShape:
    m = max(inputs.probed_splits, 1.0)
    shuffled = inputs.probed_bytes * (inputs.shuffle_share if inputs.place == "input" else 1.0)
    return model.JobShape(m=m, r=max(inputs.shuffle_partitions, 1), pages_per_map=shuffled / m / PAGE_BYTES,
                          sort_buffer_pages=inputs.sort_buffer_pages)


def estimate(inputs: EdgeInputs, filter_bytes: int, calibration: Calibration) -> EdgeEstimate:
    """Eq. (1) for one edge and one filter size, with the terms the paper leaves out in ``extra``."""
    costs = calibration.costs
    job = job_shape(inputs)
    fpp = bloom_false_positive_rate(filter_bytes * 8, inputs.summary_distinct)
    survive = surviving_share(inputs.probed_distinct, inputs.common_distinct, fpp)
    delta = pruned_pages(job.pages_per_map, survive)
    map_waves = task_waves(job.m, inputs.cores)
    probe_cost = inputs.probed_rows / job.m * calibration.probe_seconds_per_row * map_waves
    if inputs.partition_pages:  # probed once per partition value, not per row; skipped partitions are not read
        probe_cost = 0.0
    if inputs.feeds_shuffle:
        base = stage_seconds(model.spark_benefit(job, delta, costs, filter_bytes, inputs.partials, inputs.nodes),
                             job, inputs.cores)
    else:  # joined map-side: nothing to sort, shuffle or merge
        base = model.Benefit(0.0, 0.0, 0.0, model.summary_cost(filter_bytes, inputs.partials, inputs.nodes, costs))
    build_cost = inputs.summary_rows / max(inputs.cores, 1) * calibration.build_seconds_per_row
    # an output place saves its write and the consumer's read of those pages, in each of its map tasks
    written_saved = delta * (costs.c_write + costs.c_read) * map_waves if inputs.place == "output" else 0.0
    written_saved += (1.0 - survive) * inputs.partition_pages * costs.c_read / max(inputs.cores, 1)
    # the costs are paid for sure, the savings are a prediction: count only the share the margin allows
    share = inputs.savings_share
    written_saved *= share
    one_time = build_cost + prepass_cost(inputs, calibration)
    extra = written_saved - probe_cost - one_time
    result = model.Benefit(base.sort * share, base.shuffle * share, base.merge * share, base.summary, extra)
    return EdgeEstimate(result, filter_bytes, fpp, survive, delta, job, inputs, written_saved, one_time=one_time)


def prepass_cost(inputs: EdgeInputs, calibration: Calibration) -> float:
    """A filtered table's summary pre-pass: a job's fixed cost and a read of the pages of the columns it reads
    (key and filter columns), spread over the cores."""
    if inputs.prepass_pages is None:
        return 0.0
    return prepass_cost_of(inputs.prepass_pages, inputs.cores, calibration)


def prepass_cost_of(pages: float, cores: int, calibration: Calibration) -> float:
    """A pre-pass over ``pages`` pages: a job's fixed cost and their read, spread over the cores."""
    return DEFAULT_PREPASS_SECONDS + pages * calibration.costs.c_read / max(cores, 1)


def materialization_cost(pages: float, cores: int, calibration: Calibration) -> float:
    """A stage boundary written and read back instead of fused into the consumer's job (not in the paper, whose
    jobs always write): a job's fixed cost, and the output's pages written and read, spread over the cores."""
    costs = calibration.costs
    return DEFAULT_PREPASS_SECONDS + pages * (costs.c_write + costs.c_read) / max(cores, 1)


def best_estimate(inputs: EdgeInputs, calibration: Calibration, alpha: int, fixed_bytes: int = 0) -> EdgeEstimate:
    """The filter size (within α) whose estimated benefit is largest, or the user's fixed size."""
    if fixed_bytes > 0:
        return estimate(inputs, fixed_bytes, calibration)
    sizes = candidate_filter_bytes(inputs.summary_distinct, alpha)
    return max((estimate(inputs, size, calibration) for size in sizes), key=lambda e: (e.total, -e.filter_bytes))
