"""Summary passes run as one Spark job instead of one job each: predicate transfer's passes (``ip/transfer.py``)
and the summary pre-passes (SCAN stages) of the other Bloom filter strategies, which otherwise cost a job's fixed
time each before the stage that reads their filters (TPC-H Q7 and Q20 have three).

Each pass is compiled as a DataFrame whose probes read the Bloom filters of earlier passes as scalar subqueries,
as Spark's own runtime filters read theirs, and its summaries (Bloom filter, key range, key sketch, rows) as one
aggregate over it, itself a scalar subquery. One action selects every pass's aggregate: Spark runs the
subqueries on its own threads, each pass once (a subquery met again is reused), and Python waits for one round
trip where it waited for one job per pass. The reading stages then probe with the filters as built, exactly as
after passes run one by one."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from aipq.engine import jvm
from aipq.engine.kept_rows import HOW_KEPT
from aipq.engine.records import StageMetrics
from aipq.engine.session import sql_conf
from aipq.engine.stage_job import StageRunner, spark_error
from aipq.engine.summaries import ProbeRecord
from aipq.errors import AipqError
from aipq.ip.decisions import StageDecisions
from aipq.planner.logical import Scan
from aipq.planner.stages import Stage


@dataclass
class PendingPass:
    """A pass compiled but not yet run: its frame, and its summaries' aggregate as a scalar subquery."""

    stage: Stage
    decisions: StageDecisions
    frame: DataFrame
    aggregate: Column
    built: Column  # the same aggregate's struct, for a pass run as an action of its own (``run_alone``)
    probes: list[ProbeRecord]
    decision_seconds: float
    nested: int  # the passes its plan holds, itself and those whose subqueries it probes, counted as a tree
    keeps: bool = False  # it keeps its rows for later stages: it runs alone (``run_alone``)
    kept_rows: str = ""  # the rows it keeps for later stages, and the kept rows it reads (``kept_rows.py``)


# The most passes one pass's plan may hold, counted as a tree (a pass probed twice counted twice): Spark copies
# a subquery's plan into each place that reads it before reusing it, so plans that nest further grow as a tree
# of the schedule does and exhaust the driver's memory; beyond it, the passes so far run first and the pass
# probes their filters as built.
MAX_NESTED_PASSES = 6


class PassJob:
    """The summary passes of one run, gathered until a stage that is not a pass needs their summaries."""

    def __init__(self, runner: StageRunner, group: str):
        self.runner = runner
        self.group = group  # the Spark job group the passes' job runs under
        self.pending: list[PendingPass] = []

    def nested(self, decisions: StageDecisions) -> int:
        """The passes a pass's plan would hold with the pending passes it probes (``MAX_NESTED_PASSES``)."""
        probed = {use.producer for use in decisions.uses}
        return 1 + sum(p.nested for p in self.pending if p.stage.id in probed)

    def add(self, stage: Stage, decisions: StageDecisions, decision_seconds: float, keep: Scan | None = None) -> None:
        """Compile a pass; its summaries become pending ones that later passes probe as subqueries. With ``keep``,
        its rows of that scan are kept for the stages that read the scan later (``engine/kept_rows.py``)."""
        runner, probes, nested = self.runner, [], self.nested(decisions)
        kept = runner.compiler.kept
        kept.keeping = (keep, stage.id) if keep is not None else None
        try:
            frame = runner.frame(stage, decisions, probes, self.group, statistics=None)
        finally:
            runner.reset_hooks()
            kept.keeping = None
        keeps = keep is not None and kept.kept(keep)
        note = kept_rows_note(kept.take_served(), keeps)
        columns = [F.count(F.lit(1)).alias("rows"), *runner.store.build_columns(frame, decisions.builds, {})]
        built = F.struct(*columns).alias("built")
        aggregate = frame.agg(built).scalar()
        runner.store.pend(frame, decisions.builds, aggregate)
        self.pending.append(PendingPass(stage, decisions, frame, aggregate, built, probes, decision_seconds, nested,
                                        keeps, note))

    def run(self) -> list[StageMetrics]:
        """Every pending pass in one action; each pass's metrics (the job's time on the first of them)."""
        passes, self.pending = self.pending, []
        spark = self.runner.spark
        sc = spark.sparkContext
        names = ", ".join(p.stage.name for p in passes)
        sc.setJobGroup(self.group, f"aipq summary passes {names}", interruptOnCancel=True)
        started = time.perf_counter()
        try:
            # one plan of small aggregates: nothing for adaptive execution to coalesce, and each subquery is
            # planned once rather than again at every stage
            with sql_conf(spark, {"spark.sql.adaptive.enabled": "false"}):
                row = run_alone(passes[0]) if len(passes) == 1 and passes[0].keeps else \
                    spark.range(1).select(*[p.aggregate.alias(f"pass_{i}") for i, p in enumerate(passes)]).first()
        except AipqError:
            raise
        except Exception as error:
            raise spark_error(error, f"summary passes ({names})") from error
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        self.runner.compiler.kept.drop_superseded()  # read by the passes that kept rows of the same tables again
        seconds = time.perf_counter() - started
        marks = [probe.mark for p in passes for probe in p.probes if probe.mark is not None]
        counts = jvm.filter_row_counts(spark, self.group, marks) if marks else {}
        metrics = []
        for i, done in enumerate(passes):
            values = row[f"pass_{i}"].asDict()
            self.runner.store.collect(done.frame, done.decisions.builds, None, values, {})
            for probe in done.probes:
                probe.finish(counts)
            first = i == 0  # the job's time and shuffle are the first pass's; the others say where they ran
            staging = f"summary passes {names} in one Spark job" + (
                "" if first else f" (timed on {passes[0].stage.name})")
            built = [self.runner.store.built[b.key] for b in done.decisions.builds]
            metrics.append(StageMetrics(
                done.stage.id, done.stage.operator, seconds if first else 0.0, int(values["rows"]), 0,
                summaries=built, probes=done.probes, decisions=done.decisions, decision_seconds=done.decision_seconds,
                materialized=False, staging=staging, job_group=self.group if first else "", kept_rows=done.kept_rows))
        return metrics


def run_alone(done: PendingPass):
    """A pass that keeps its rows, run as an action of its own (its row as ``run``'s): its cached
    relation is then built by the action's own thread. Inside a subquery, each of Spark's subquery threads building
    a cached relation holds its builder's lock while it waits for the subqueries of that relation's plan, and
    enough of them nested (TPC-DS Q88's eight scalar subqueries, each a pass) leave none free to run those."""
    return done.frame.agg(done.built.alias("pass_0")).first()


def kept_rows_note(read: list[int], keeps: bool) -> str:
    """What a stage's record says of kept rows: the passes whose kept rows it read, and whether it keeps its own."""
    parts = [f"read the rows {', '.join(f'S{s}' for s in read)} kept instead of the table"] if read else []
    if keeps:
        parts.append(f"kept its rows for the stages that read the table ({HOW_KEPT})")
    return "; ".join(parts)
