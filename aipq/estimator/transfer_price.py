"""What predicate transfer's schedule (``ip/transfer.py``) is worth for one query, priced against the plan
without it by the same benefit model as a single summary (eq. 1 with aipq's terms, ``estimator/benefit.py``):
what each reading stage's probes save, less what the passes that build their filters cost (issue 83: the
estimator prices each step, and ``adaptive`` runs a transfer only where it pays more than its own summaries).

- A reading stage's probe is an edge from the last pass over a neighbouring table to the scan it prunes; its
  filter's keys are those the schedule estimated for that pass (``dag.transfer_keys``), priced as a summary
  already built with that many keys (the estimate Algorithm 2 makes, not Algorithm 1's best case). Several probes
  of one scan are priced in turn, each on the rows the ones before it let through (``Pruning.at``).
- A probe between passes saves nothing by itself: what it removes is in the smaller keys of the later pass,
  which its own probes of the reading stages are priced with.
- Each pass costs a pre-pass: a job's fixed cost, a read of its columns' pages, and building its filters from the
  rows it keeps (``benefit.prepass_cost`` and the build's per-row cost)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from aipq.estimator.benefit import prepass_cost_of
from aipq.estimator.edge_inputs import EdgeEstimator
from aipq.estimator.parameters import Calibration
from aipq.ip.bloom_sizing import transfer_filter_bits
from aipq.ip.decisions import BuiltInfo, Pruning, StageDecisions
from aipq.ip.transfer import transfer_candidate
from aipq.planner.stages import StageDag, Transfer


@dataclass(frozen=True)
class TransferPrice:
    """Seconds a query's transfer schedule saves in its reading stages, and what its passes cost."""

    saving: float
    passes: float
    probes: int  # the reading stages' probes priced

    @property
    def net(self) -> float:
        return self.saving - self.passes


def transfer_price(dag: StageDag, estimator: EdgeEstimator, calibration: Calibration, cores: int,
                   fpp: float, alpha: int) -> TransferPrice | None:
    """The schedule in ``dag`` priced, or None where a pass's keys are not estimated (no statistics: nothing to
    price it with)."""
    saving, shares, probes = 0.0, {}, 0
    for transfer in sorted(_reading_probes(dag), key=lambda t: (t.stage, t.node_id, t.producer)):
        keys = dag.transfer_keys.get((transfer.producer, transfer.column))
        if keys is None:
            return None
        place = (transfer.stage, transfer.node_id)
        built = BuiltInfo("bloom", transfer_filter_bits(keys, fpp, alpha) // 8, math.ceil(keys))
        earlier = shares.get(place, 1.0)
        pruning = Pruning(after=lambda stage_id: 1.0, at=lambda target, share=earlier: share)
        estimate = estimator(transfer_candidate(transfer), built, pruning)
        if estimate is None:
            continue
        probes += 1
        saving += estimate.total
        shares[place] = shares.get(place, 1.0) * estimate.survive
    passes = sum(_pass_cost(dag, stage_id, estimator, calibration, cores) for stage_id in dag.transfer_passes)
    return TransferPrice(saving, passes, probes)


def planned_benefit(decisions: list[StageDecisions]) -> float:
    """What ``adaptive``'s own summaries are estimated to save, as planned before the run (each use's B)."""
    return sum(float((use.estimate or {}).get("B", 0.0)) for d in decisions for use in d.uses)


def _reading_probes(dag: StageDag) -> list[Transfer]:
    return [t for t in dag.transfers if t.stage not in dag.transfer_passes]


def _pass_cost(dag: StageDag, stage_id: int, estimator: EdgeEstimator, calibration: Calibration,
               cores: int) -> float:
    """A pass: a pre-pass's read and fixed cost, and its filters built from the rows it keeps."""
    pages = estimator.prepass_pages(stage_id) or 0.0
    rows = dag.transfer_rows.get(stage_id, 0.0)
    columns = {column for (stage, column) in dag.transfer_keys if stage == stage_id}
    build = rows * max(len(columns), 1) * calibration.build_seconds_per_row / max(cores, 1)
    return prepass_cost_of(pages, cores, calibration) + build
