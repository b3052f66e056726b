"""Corrective re-optimization between stages (``--reoptimize-factor``; ADP, Ives/Halevy/Weld): after each written
stage, its rows are compared with the estimate the plan was made with; when they differ by more than the factor
(or the plan had no estimate), the query is planned again with the joins already done standing as their outputs
(``pipeline.replan_dag``), from what is now known: the rows every finished stage wrote and the distinct keys this
run sketched in them, the statistics this run collected so far, and for tables still without statistics the row
counts, minima and maxima in their files' footers (an integral key's range bounding its distinct values).
"""

from __future__ import annotations

from aipq.engine.context import RunContext
from aipq.estimator.join_estimates import JoinEstimates, KnownTables, q_error
from aipq.pipeline import PlannedQuery, replan_dag
from aipq.planner.stages import Stage, StageDag
from aipq.stats.plan_key import stage_plan_key

MAX_REPLANS = 16  # a bound on re-planning one query, though each re-plan needs a join finished since the last


class Reoptimizer:
    """``engine.executor.Reoptimizer`` for one planned query."""

    def __init__(self, planned: PlannedQuery, context: RunContext):
        self.planned = planned
        self.context = context
        self.factor = context.settings.reoptimize_factor
        self.estimates: dict[int, float | None] = {}  # stage id → the rows its plan was made with
        self.replans: list[dict] = []
        self._note_estimates(planned.dag, {})

    @staticmethod
    def applies(planned: PlannedQuery, context: RunContext) -> bool:
        settings = context.settings
        return settings.plan == "cost" and settings.reoptimize_factor > 0 and planned.written is not None

    def _estimates(self, dag: StageDag, measured: dict[int, float],
                   distinct: dict[tuple[int, str], float] | None = None) -> JoinEstimates:
        context = self.context
        return JoinEstimates(KnownTables(context.repository, context.storage), dag, measured,
                             measured_distinct=distinct, footers=context.table_footers())

    def _note_estimates(self, dag: StageDag, measured: dict[int, float],
                        distinct: dict[tuple[int, str], float] | None = None) -> None:
        """Each new stage's rows as estimated from what its plan was made with."""
        estimates = self._estimates(dag, measured, distinct)
        for stage in dag.stages:
            if stage.id not in self.estimates:
                self.estimates[stage.id] = estimates.rows(stage.plan)

    def after_stage(self, dag: StageDag, stage: Stage, rows: int, done: frozenset[int], written: dict[int, int],
                    distinct: dict[tuple[int, str], float]) -> tuple[StageDag | None, dict] | None:
        if stage.operator != "JOIN" or len(self.replans) >= MAX_REPLANS:
            return None  # only a finished join can stand in a join block still to be ordered
        estimate = self.estimates.get(stage.id)
        off_by = q_error(estimate, rows) if estimate is not None else None
        if off_by is not None and off_by <= self.factor:
            return None
        context = self.context
        measured = {stage_id: float(count) for stage_id, count in written.items()}
        costing = context.join_costing(self._estimates(dag, measured, distinct))
        replanned = replan_dag(self.planned, dag, done, context.settings, context.storage, costing)
        if replanned is None:
            return None  # no finished join stands in a join block still to order: nothing to re-plan
        new, used = replanned
        changed = _remaining_work(dag, done) != _remaining_work(new, done)
        note = {"after_stage": stage.id, "estimated_rows": None if estimate is None else round(estimate, 1),
                "actual_rows": rows, "q_error": None if off_by is None else round(off_by, 2),
                "finished_joins": used, "changed": changed,
                "join_order": list(new.plan.join_order) if changed else list(dag.plan.join_order),
                "stages": [s.id for s in new.stages if s.id not in done and s.operator != "SCAN"] if changed else []}
        self.replans.append(note)
        if not changed:
            return None, note
        self._note_estimates(new, measured, distinct)
        return new, note


def _remaining_work(dag: StageDag, done: frozenset[int]) -> list[str]:
    """The stages not yet run, by canonical subplan: equal lists mean the re-plan changed nothing (summary
    pre-passes aside: they follow from the joins)."""
    return sorted(stage_plan_key(dag, stage.id) for stage in dag.stages
                  if stage.id not in done and stage.operator != "SCAN")
