"""The estimator a query's plan-time decisions are made with (explain, the handoff, the transfer choice)."""

from __future__ import annotations

from functools import cached_property

from aipq.config import master_cores
from aipq.engine.context import RunContext
from aipq.estimator.edge_inputs import EdgeEstimator, SessionFacts, adaptive_estimator
from aipq.estimator.join_estimates import JoinEstimates, KnownTables
from aipq.ip.decisions import StageDecisions
from aipq.ip.planner import IpPlanner
from aipq.planner.join_order import JoinCosting
from aipq.planner.stages import StageDag


def planning_estimator(dag: StageDag, context: RunContext, known: KnownTables | None = None) -> EdgeEstimator | None:
    """Strategy ``adaptive``'s estimator over what is known before the run (None under another strategy);
    ``known``: tables' statistics already looked up."""
    settings = context.settings
    return adaptive_estimator(dag, settings, context.repository, context.calibration,
                              lambda: SessionFacts(files=context.storage, parallelism=master_cores(settings.master)),
                              known=known)


class PlanTimeDecisions:
    """Strategy ``adaptive``'s decisions for ``dag`` from what is known before the run, made once when first
    asked: the handoff and the transfer choice both read them, and the tables' statistics behind them."""

    def __init__(self, dag: StageDag, context: RunContext):
        self.dag = dag
        self.context = context

    @cached_property
    def estimates(self) -> JoinEstimates:
        """The tables' statistics (and footers, where a table has none), each looked up once for all."""
        return JoinEstimates(KnownTables(self.context.repository, self.context.storage),
                             footers=self.context.table_footers())

    def costing(self) -> JoinCosting:
        return self.context.join_costing(self.estimates)

    @cached_property
    def estimator(self) -> EdgeEstimator | None:
        return planning_estimator(self.dag, self.context, self.estimates.tables)

    @cached_property
    def decisions(self) -> list[StageDecisions]:
        return IpPlanner(self.dag, self.context.settings, estimator=self.estimator).plan_all()
