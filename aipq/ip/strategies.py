"""The information passing strategies (``--ip``): each chooses among the admissible edges (``ip/candidates.py``,
``ip/transfer.py``) which summaries a stage builds and which it uses, for ``IpPlanner`` (``ip/planner.py``,
read through ``PlannerView``):

- ``off``: Hive — nothing.
- ``hip``: the HIP baseline — every stage whose output a later JOIN stage reads builds a list of the distinct
  hash values of the key it is joined on; the consuming stage loads it (child-to-parent only) when its size is
  at most α. No estimation.
- ``always``: "IP without benefit estimation" — every admissible summary is a Bloom filter, built and used
  (child-to-parent, sibling-to-sibling, transitive) when it is at most α.
- ``oracle``: the same edges as ``always`` with exact key sets, so the false-positive cost can be measured.
- ``adaptive``: the paper's IP with its benefit check — a summary is built when the edges it serves may pay
  together (Algorithm 1: the sum of their B with its building cost counted once > β, with the best case for the
  key overlap, since the producer has not run), and used when
  the estimate from what is known once it is built (its actual keys and their sketch, the sizes of the stages
  that ran, the repository's statistics) still clears β and it is at most α (Algorithm 2). The estimate
  itself comes from an ``EdgeEstimator`` (``estimator/edge_inputs.py`` over ``estimator/``).
- ``transfer``, ``transfer-oracle``: predicate transfer over the whole join graph, with Bloom filters or exact
  key sets.
"""

from __future__ import annotations

from typing import Protocol

from aipq.config import Settings
from aipq.ip.bloom_sizing import MIN_BLOOM_BITS, transfer_filter_bits
from aipq.ip.candidates import Candidate
from aipq.ip.decisions import BuiltInfo, Estimate, SummaryKind
from aipq.planner.stages import Stage, StageDag


class PlannerView(Protocol):
    """What a strategy reads of the IP planner that asks it (``ip/planner.IpPlanner``): the DAG, the settings, the
    admissible edges and the planner's estimates."""

    dag: StageDag
    settings: Settings
    candidates: list[Candidate]

    def estimate(self, candidate: Candidate, built: BuiltInfo | None,
                 anticipated: tuple[tuple[tuple, float], ...] = ()) -> Estimate | None: ...

    def creation_benefit(self, producer: int, column: str) -> float | None: ...

    def best_edge(self, producer: int, column: str) -> Estimate | None: ...

    def probed_when_planned(self, producer: int, column: str) -> bool: ...

    def materialization_cost(self, stage: Stage) -> float: ...


class Strategy:
    name = "off"
    kind: SummaryKind = "bloom"

    def filter_bits(self, planner: PlannerView, stage: Stage, column: str) -> int | None:
        """The Bloom filter size this strategy chose for a summary (None: the planner's sizing rule)."""
        return None

    def creation(self, planner: PlannerView, stage: Stage) -> list[tuple[str, str]]:
        """(column, reason) for each summary ``stage`` should build."""
        return []

    def usage(self, planner: PlannerView, candidate: Candidate, built: BuiltInfo) -> str | None:
        """The reason to use ``candidate`` now that its summary exists, or None to skip it (see rejection)."""
        return None

    def rejection(self, planner: PlannerView, candidate: Candidate, built: BuiltInfo | None) -> str:
        return "strategy off"



class Hip(Strategy):
    name = "hip"
    kind: SummaryKind = "hash-list"

    def creation(self, planner, stage):
        consumers = planner.dag.dataflow.get(stage.id, [])
        if stage.consumer_keys and any(planner.dag.stage(c).operator == "JOIN" for c in consumers):
            return [(column, "HIP: a later JOIN stage reads this output on this key")
                    for column in stage.consumer_keys]
        return []

    def usage(self, planner, candidate, built):
        if candidate.relation != "child-to-parent" or built.kind != "hash-list":
            return None
        if built.size_bytes is None:
            return "HIP: child-to-parent, if the hash list is ≤ α once built"
        if built.size_bytes > planner.settings.alpha:
            return None
        return f"HIP: child-to-parent, hash list of {built.items or 0:,} keys ≤ α"

    def rejection(self, planner, candidate, built):
        if candidate.relation != "child-to-parent":
            return f"HIP passes child-to-parent only ({candidate.relation})"
        if built is None or built.kind != "hash-list":
            return "HIP: no hash list on this key"
        return f"HIP: hash list {built.size_bytes:,} B > α"



class Always(Strategy):
    name = "always"

    def creation(self, planner, stage):
        columns = sorted({c.column for c in planner.candidates if c.producer == stage.id})
        return [(column, "every admissible summary is built (no benefit estimation)") for column in columns]

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        return f"{candidate.relation}, summary ≤ α (no benefit estimation)"

    def rejection(self, planner, candidate, built):
        if built is None:
            return "summary not built"
        return f"summary {built.size_bytes:,} B > α"



class Oracle(Always):
    name = "oracle"
    kind: SummaryKind = "exact"

    def usage(self, planner, candidate, built):
        return f"{candidate.relation}, exact key set (the edges 'always' uses)"



class Adaptive(Strategy):
    """Algorithms 1–2 with the benefit check B > β (eq. 1 and the terms aipq adds, ``estimator/benefit.py``)."""

    name = "adaptive"

    def creation(self, planner, stage):
        chosen, benefit = [], 0.0
        for column in sorted({c.column for c in planner.candidates if c.producer == stage.id}):
            together = planner.creation_benefit(stage.id, column)
            best = planner.best_edge(stage.id, column)
            if together is not None and best is not None and together > planner.settings.beta:
                if stage.operator == "SCAN" and not planner.probed_when_planned(stage.id, column):
                    continue
                benefit += together
                chosen.append((column, f"may pay: its edges together B = {together:.3f} s > β = "
                                       f"{planner.settings.beta:g} s (best case; best edge with a "
                                       f"{best.filter_bytes:,} B filter)"))
        if not chosen:  # nothing to price the stage's write against (the estimate of its output is not cheap)
            return chosen
        cost = planner.materialization_cost(stage)
        if cost > 0:  # adaptive staging fuses this stage unless its summaries pay for its write
            if benefit - cost <= planner.settings.beta:
                return []
            chosen = [(column, f"{reason}; with its stage's write ({cost:.3f} s) B = {benefit - cost:.3f} s")
                      for column, reason in chosen]
        return chosen

    def filter_bits(self, planner, stage, column):
        if planner.settings.bloom_size > 0:
            return None
        best = planner.best_edge(stage.id, column)
        # a pre-pass's keys are estimated before any stage ran, from filters and summaries on other tables: never
        # below bloom_bits' floor there, as a filter sized to a key estimate several times too low saturates and
        # keeps every row, while 64 Kbit cost next to nothing to build, send and probe (docs/decisions.md)
        least = MIN_BLOOM_BITS if stage.operator == "SCAN" else 64
        return None if best is None else max(best.filter_bytes * 8, least)

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        estimate = planner.estimate(candidate, built)
        if estimate is None or estimate.total <= planner.settings.beta:
            return None
        return f"{candidate.relation}, B = {estimate.total:.3f} s > β = {planner.settings.beta:g} s"

    def rejection(self, planner, candidate, built):
        if built is None:
            return "summary not built (no edge it serves was estimated to pay)"
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return f"summary {built.size_bytes:,} B > α"
        estimate = planner.estimate(candidate, built)
        if estimate is None:
            return "no estimate"
        return f"B = {estimate.total:.3f} s ≤ β = {planner.settings.beta:g} s"



class PredicateTransfer(Always):
    """Predicate transfer: every probe of the schedule ``ip/transfer.py`` laid out, each pass building the
    summaries of its join keys; no stage output builds one."""

    name = "transfer"

    def filter_bits(self, planner, stage, column):
        """Sized for the keys the pass is estimated to hold (``dag.transfer_keys``), with room for twice as many;
        the planner's sizing by the table's rows where the estimates are unknown or --bloom-size is set."""
        keys = planner.dag.transfer_keys.get((stage.id, column))
        if planner.settings.bloom_size > 0 or keys is None:
            return None
        return transfer_filter_bits(keys, planner.settings.bloom_fpp, planner.settings.alpha)

    def creation(self, planner, stage):
        columns = sorted({c.column for c in planner.candidates if c.producer == stage.id})
        return [(column, f"predicate transfer, {planner.dag.transfer_passes.get(stage.id, 'reading')} pass")
                for column in columns]

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        return "predicate transfer: " + ("a later pass over this table" if candidate.target.stage in
                                         planner.dag.transfer_passes else "the stage that reads this table")



class TransferOracle(PredicateTransfer):
    """The transfer schedule with exact key sets: the physical limit of its pruning."""

    name = "transfer-oracle"
    kind: SummaryKind = "exact"

    def usage(self, planner, candidate, built):
        return "predicate transfer with the exact key set"



STRATEGIES: dict[str, type[Strategy]] = {"off": Strategy, "hip": Hip, "always": Always, "oracle": Oracle,
                                          "adaptive": Adaptive, "transfer": PredicateTransfer,
                                          "transfer-oracle": TransferOracle}

