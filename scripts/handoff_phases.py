"""Time a handed-off query phase by phase against the benchmark's own ``spark`` series, interleaved on one
session: where aipq's per-run work around Spark's plan goes (docs/decisions/handoff.md).

Each query is planned once, run three times each way to warm up, then ``RUNS`` times each way in turn; the
medians of ``execute()`` (aipq's defaults), of ``spark.sql(q).write.parquet`` under the anchor's settings, and of
each phase of the handed-off run are printed. Queries are ``DS<n>`` (TPC-DS) or ``Q<n>`` (TPC-H), from the
home's catalog (``aipq tpcds gen --sf 1``, ``aipq tpch gen --sf 1``).

Run from the repository's root: ``python scripts/handoff_phases.py DS90,DS62,Q19 7``.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace

import aipq.engine.handoff as handoff
import aipq.workflow.query as query
from aipq.bench.runner import QueryRunner
from aipq.bench.staging import bench_session
from aipq.config import Settings, default_home
from aipq.engine.context import RunContext
from aipq.pipeline import plan_query
from aipq.tpcds.queries import query_text as tpcds_text
from aipq.tpch.queries import query_text as tpch_text

PHASES = ((query, "check_table_data", "check"), (query, "query_handoff", "decide"),
          (handoff, "handed_off_frame", "views and analysis"), (handoff, "_write", "write"),
          (handoff, "drop_views", "drop views"), (handoff.jvm, "job_group_figures", "figures"))


def timed_phases(spent: dict[str, float]) -> None:
    """Wrap each phase's function so that its wall clock adds to ``spent``."""
    for module, name, label in PHASES:
        function = getattr(module, name)

        @functools.wraps(function)
        def wrapper(*args, _function=function, _label=label, **kwargs):
            started = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - started

        setattr(module, name, wrapper)


def text_of(label: str) -> str:
    return tpcds_text(int(label[2:])) if label.startswith("DS") else tpch_text(int(label[1:]))


def main(labels: list[str], runs: int) -> None:
    spent: dict[str, float] = defaultdict(float)
    timed_phases(spent)
    base = RunContext(default_home(), Settings())
    runner = QueryRunner(base, bench_session(base))
    settings = replace(base.settings, cache_size=0)
    context = base.with_settings(settings)
    for label in labels:
        text = text_of(label)
        planned = plan_query(text, context.catalog, settings, context.storage, label, context.join_costing())
        for _ in range(3):
            query.execute(planned, context).close()
            runner.spark_sql(text, settings)
        handed = query.query_handoff(planned, context).chosen
        aipq_seconds, spark_seconds, phases = [], [], defaultdict(list)
        for _ in range(runs):
            spent.clear()
            started = time.perf_counter()
            query.execute(planned, context).close()
            aipq_seconds.append(time.perf_counter() - started)
            for phase, seconds in spent.items():
                phases[phase].append(seconds)
            spark_seconds.append(runner.spark_sql(text, settings)[0].seconds)
        aipq_median, spark_median = statistics.median(aipq_seconds), statistics.median(spark_seconds)
        print(f"{label} {'handed off' if handed else 'aipq plan'}: aipq {aipq_median:.3f} s, spark "
              f"{spark_median:.3f} s, {spark_median / aipq_median:.2f}x;",
              ", ".join(f"{phase} {statistics.median(values):.3f} s" for phase, values in phases.items()),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","), int(sys.argv[2]) if len(sys.argv) > 2 else 7)
