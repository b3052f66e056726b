"""``adaptive`` runs predicate transfer where it pays (issue 83): before a query runs, the benefit estimator prices
the query's transfer schedule (``estimator/transfer_price.py``) and, only where that saves more than adaptive's own
summaries are planned to by more than β, the query runs the schedule as ``--ip transfer`` would. Elsewhere
nothing changes: the schedule is not priced where a query has no table a pass could filter, or no statistics."""

from __future__ import annotations

from dataclasses import dataclass, replace

from aipq.config import master_cores
from aipq.engine.context import RunContext
from aipq.estimator.edge_inputs import EdgeEstimator, SessionFacts
from aipq.estimator.transfer_price import TransferPrice, planned_benefit, transfer_price
from aipq.pipeline import PlannedQuery, transfer_alternative
from aipq.planner.logical import Scan
from aipq.planner.stages import StageDag
from aipq.workflow.planning_estimates import PlanTimeDecisions


@dataclass(frozen=True)
class TransferChoice:
    """Whether ``adaptive`` runs the query's transfer schedule, and the figures it decided from."""

    chosen: bool
    why: str
    transfer: TransferPrice | None = None
    adaptive: float | None = None  # adaptive's own summaries' planned B
    dag: StageDag | None = None  # the schedule's stage DAG, when chosen

    def as_dict(self) -> dict:
        found: dict = {"chosen": self.chosen, "why": self.why}
        if self.transfer is not None:
            found |= {"saving": round(self.transfer.saving, 4), "passes": round(self.transfer.passes, 4),
                      "probes": self.transfer.probes}
        if self.adaptive is not None:
            found["adaptive_B"] = round(self.adaptive, 4)
        return found


def with_transfer_if_it_pays(planned: PlannedQuery, context: RunContext, adaptive: PlanTimeDecisions | None = None
                             ) -> tuple[PlannedQuery, RunContext, TransferChoice | None]:
    """``planned`` and ``context`` as the query runs: under the transfer schedule, with ``--ip transfer``'s
    settings, where it pays; else as they are. The choice, where one was priced."""
    choice = transfer_choice(planned, context, adaptive)
    if choice is None or not choice.chosen:
        return planned, context, choice
    return (replace(planned, dag=choice.dag), context.with_settings(replace(context.settings, ip="transfer")),
            choice)


def transfer_choice(planned: PlannedQuery, context: RunContext,
                    adaptive: PlanTimeDecisions | None = None) -> TransferChoice | None:
    """The estimator's choice between the transfer schedule and adaptive's summaries for ``planned`` (their
    plan-time decisions: ``adaptive``, made here when not given); None where there is nothing to choose (another
    strategy, ``--transfer-choice off``, no filtered table to pass from)."""
    settings = context.settings
    if settings.ip != "adaptive" or settings.transfer_choice != "auto" or not _filters_a_joined_table(planned):
        return None
    adaptive = adaptive or PlanTimeDecisions(planned.dag, context)
    costing = adaptive.costing()
    dag = transfer_alternative(planned, settings, context.storage, costing)
    if dag is None:
        return None
    cores = master_cores(settings.master)
    estimator = EdgeEstimator(dag, settings, context.repository, context.calibration,
                              session=SessionFacts(files=context.storage, parallelism=cores),
                              known=costing.estimates.tables)
    price = transfer_price(dag, estimator, context.calibration, cores, settings.bloom_fpp, settings.alpha)
    if price is None:
        return TransferChoice(False, "the transfer's passes have no estimated keys (no statistics)")
    if price.net <= settings.beta:
        return TransferChoice(False, f"the transfer saves {price.saving:.3f} s against its passes' "
                                     f"{price.passes:.3f} s: B = {price.net:.3f} s ≤ β", price)
    own = planned_benefit(adaptive.decisions)
    if price.net <= own + settings.beta:
        return TransferChoice(False, f"the transfer's B = {price.net:.3f} s is not β more than adaptive's "
                                     f"summaries' {own:.3f} s", price, own)
    return TransferChoice(True, f"the transfer's B = {price.net:.3f} s (saves {price.saving:.3f} s, passes "
                                f"{price.passes:.3f} s) > adaptive's summaries' {own:.3f} s + β", price, own, dag)


def _filters_a_joined_table(planned: PlannedQuery) -> bool:
    """Whether some table the query joins has filters of its own (a transfer starts from one), among at least
    three tables (with two, adaptive's one summary is the whole transfer)."""
    scans = [n for stage in planned.dag.stages for n in stage.plan.walk() if isinstance(n, Scan)]
    return len(scans) >= 3 and any(scan.filters or scan.all_partitions for scan in scans)
