"""Time the plan-time decisions ``execute()`` makes before a run, over TPC-DS's 99: the transfer choice
(``workflow/transfer_choice.py``) and the handoff (``engine/handoff.py``), sharing one ``PlanTimeDecisions``.
Each query is planned once and decided five times; the best of the five is kept, and the median, total and
largest over the queries are printed (docs/decisions/information-passing.md).

Needs the home's TPC-DS (``aipq tpcds gen --sf 1``) and its statistics (a run of the queries collects them).
Run from the repository's root: ``python scripts/plan_time_decisions.py``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from aipq.config import Settings, default_home
from aipq.engine.context import RunContext
from aipq.errors import AipqError
from aipq.pipeline import plan_query
from aipq.tpcds.queries import query_text
from aipq.workflow.planning_estimates import PlanTimeDecisions
from aipq.workflow.query import query_handoff
from aipq.workflow.transfer_choice import with_transfer_if_it_pays


def decided_in(planned, context: RunContext) -> float:
    started = time.perf_counter()
    adaptive = PlanTimeDecisions(planned.dag, context)
    chosen, run_context, choice = with_transfer_if_it_pays(planned, context, adaptive)
    if choice is None or not choice.chosen:  # as execute(): a chosen transfer is never handed off
        query_handoff(chosen, run_context, None, False, adaptive)
    return time.perf_counter() - started


def main() -> None:
    base = RunContext(default_home(), Settings())
    context = base.with_settings(replace(base.settings, cache_size=0))
    costing = context.join_costing()
    spent = []
    for number in range(1, 100):
        try:
            planned = plan_query(query_text(number), context.catalog, context.settings, context.storage,
                                 f"DS{number}", costing)
        except AipqError:  # DS77 with --cartesian refuse
            continue
        spent.append(min(decided_in(planned, context) for _ in range(5)))
    print(f"{len(spent)} queries: median {statistics.median(spent) * 1000:.1f} ms, total {sum(spent) * 1000:.0f} ms,"
          f" max {max(spent) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
