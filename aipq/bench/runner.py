"""Running a workload under each benchmark series (``bench/series.py``): ``aipq bench tpch``, ``tpcds``, ``reopt``
and ``synthetic`` (their results read by ``bench/results.py``).

For every query and join setting (repartition joins only, the paper's Hive setting, and broadcast joins allowed),
each series runs ``WARMUP_ROUNDS`` times to warm up and then ``repeat`` times, series interleaved round by round
in a balanced order (``round_order``) so that machine drift hits all of them alike. A round during which the
hypervisor took more than 5% of the machine's CPU time from one of its runs runs again, whole
(``aipq.bench.steal``). Every run's rows are compared with the first series'; a difference fails the benchmark,
naming the query and series. With ``--min-run-seconds``, a short query runs back to back within each timed run,
the same number of times for every series, and the run reports seconds per execution. aipq's series run as
``aipq run`` does, without the stage-output cache; ``spark`` hands the whole query to ``spark.sql`` with Spark's
own defaults (AQE, its runtime Bloom filter, dynamic partition pruning). Why the order, the warm-up rounds and
the back-to-back runs are as they are: docs/decisions.md."""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from aipq.bench.queries import BenchQuery
from aipq.bench.series import Series
from aipq.bench.staging import bench_session, spark_sql_text
from aipq.bench.steal import steal_seconds, undisturbed_round
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.records import RunRecord
from aipq.engine.report import run_dict
from aipq.engine.session import LONG_DECIMALS_SETTING, sql_conf
from aipq.engine.storage import join
from aipq.errors import ExecutionError
from aipq.explanation import stage_estimates
from aipq.ip.strategies import Strategy
from aipq.pipeline import plan_query
from aipq.planner.stages import StageDag
from aipq.stats.repository import StatsRepository
from aipq.workflow.query import execute

# Untimed rounds before the timed ones (docs/decisions.md: why two).
WARMUP_ROUNDS = 2



# The most executions one timed run repeats a short query (``--min-run-seconds``).
MAX_EXECUTIONS = 20



@dataclass
class Measurement:
    """One timed run."""

    seconds: float
    shuffle_write_bytes: int
    shuffle_write_records: int
    planning_seconds: float = 0.0
    decision_seconds: float = 0.0
    statistics_seconds: float = 0.0  # piggybacked statistics: sketches merged and stored after the stages
    detail: dict | None = None  # aipq: per stage figures, summaries and probes
    steal_seconds: float = 0.0  # CPU time the hypervisor took from the machine meanwhile (all CPUs)
    executions: int = 1  # back-to-back executions the run timed; ``seconds`` is their mean



@dataclass
class StrategyResult:
    query: str
    strategy: str
    broadcast_threshold: int
    stages: int
    ratio: float | None = None
    runs: list[Measurement] = field(default_factory=list)
    rerun_rounds: int = 0  # rounds run again because the hypervisor took CPU time during one of their runs

    @property
    def median_seconds(self) -> float:
        return statistics.median(m.seconds for m in self.runs)

    @property
    def shuffle_write_records(self) -> int:
        return self.runs[0].shuffle_write_records if self.runs else 0

    @property
    def shuffle_write_bytes(self) -> int:
        return self.runs[0].shuffle_write_bytes if self.runs else 0

    def as_dict(self) -> dict:
        return {
            "query": self.query, "strategy": self.strategy, "broadcast_threshold": self.broadcast_threshold,
            "stages": self.stages, "ratio": self.ratio, "median_seconds": self.median_seconds,
            "min_seconds": min(m.seconds for m in self.runs), "max_seconds": max(m.seconds for m in self.runs),
            "shuffle_write_bytes": self.shuffle_write_bytes, "shuffle_write_records": self.shuffle_write_records,
            "rerun_rounds": self.rerun_rounds, "runs": [m.__dict__ for m in self.runs],
        }



def canonical_rows(rows: list) -> list[tuple]:
    """Rows in a fixed order, decimals and floats to two places: equal answers compare equal."""
    def normal(value):
        return round(float(value), 2) if isinstance(value, float) or type(value).__name__ == "Decimal" else value

    return sorted((tuple(normal(v) for v in row) for row in rows), key=repr)



class QueryRunner:
    def __init__(self, context: RunContext, scratch: str):
        self.context = context
        self.spark = context.spark
        self.catalog = context.catalog
        self.scratch = scratch
        self.last_record: RunRecord | None = None
        self.last_dag: StageDag | None = None

    def aipq(self, text: str, settings: Settings, strategy: Strategy | None = None,
             executions: int = 1, prior_statistics: bool = True) -> tuple[Measurement, list]:
        """One timed run: the query planned once (planning is not timed) and executed ``executions`` times back
        to back; the figures but the time are the first execution's. Without ``prior_statistics``, planning and
        each execution start from an empty statistics repository."""
        with ExitStack() as scratch_repositories:
            uncached = replace(settings, cache_size=0)  # benchmarks compute every stage

            def context() -> RunContext:
                if prior_statistics:
                    return self.context.with_settings(uncached)
                folder = scratch_repositories.enter_context(tempfile.TemporaryDirectory(prefix="aipq-bench-stats-"))
                return self.context.with_repository(StatsRepository(Path(folder))).with_settings(uncached)

            return self._aipq(text, [context() for _ in range(executions)], strategy)

    def _aipq(self, text: str, runs: list[RunContext], strategy: Strategy | None) -> tuple[Measurement, list]:
        """``aipq`` with the context of each execution, the first also planning's; every execution runs as
        ``aipq run`` does (``execute``), without the stage-output cache."""
        executions, run = len(runs), runs[0]
        planning = time.perf_counter()
        planned = plan_query(text, self.catalog, run.settings, run.storage, "aipq bench", run.join_costing())
        self.last_dag = planned.dag
        planning_seconds = time.perf_counter() - planning
        stolen = steal_seconds()
        started = time.perf_counter()
        done = [execute(planned, each, ip_strategy=strategy) for each in runs]
        seconds = (time.perf_counter() - started) / executions
        stolen = steal_seconds() - stolen
        record = done[0].record
        self.last_record = record
        rows = self.spark.read.parquet(record.result_path).collect()
        for query_run in done:
            query_run.close()
        return self._measured(record, run, planned.dag, seconds, stolen, planning_seconds, executions), rows

    def _measured(self, record: RunRecord, run: RunContext, dag: StageDag, seconds: float, stolen: float,
                  planning_seconds: float, executions: int) -> Measurement:
        detail = run_dict(record)
        ran = record.dag or dag  # re-planned while it ran, or run as a transfer: the stages as they ran
        self.last_dag = ran
        # after the timed part; from the tables' statistics alone, so that the q-error is that of a first sight
        decisions = [m.decisions for m in record.stages if m.decisions is not None]
        for stage_id, figures in stage_estimates(ran, run, detail["stages"], history_before=None,
                                                 decisions=decisions).items():
            if stage_id in detail["stages"]:
                detail["stages"][stage_id].update(figures)
        return Measurement(
            seconds, sum(m.shuffle.shuffle_write_bytes for m in record.stages),
            sum(m.shuffle.shuffle_write_records for m in record.stages), planning_seconds=planning_seconds,
            decision_seconds=sum(m.decision_seconds for m in record.stages),
            statistics_seconds=record.statistics_seconds, detail=detail, steal_seconds=stolen,
            executions=executions)

    def spark_sql(self, text: str, settings: Settings, executions: int = 1,
                  forced_bloom: bool = False) -> tuple[Measurement, list]:
        from aipq.engine.jvm import job_group_figures

        sql = spark_sql_text(text, settings.dialect)
        targets = [join(self.scratch, f"spark-{time.monotonic_ns()}-{n}") for n in range(executions)]
        conf = {"spark.sql.autoBroadcastJoinThreshold": str(settings.broadcast_threshold or -1),
                "spark.sql.adaptive.enabled": "true",
                "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
                "spark.sql.optimizer.dynamicPartitionPruning.enabled": "true", LONG_DECIMALS_SETTING: "false"}
        if forced_bloom:
            conf["spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold"] = "1"
        group = f"aipq-bench-spark-{time.monotonic_ns()}"
        sc = self.spark.sparkContext
        sc.setJobGroup(group, "spark.sql baseline")
        try:
            with sql_conf(self.spark, conf):
                stolen = steal_seconds()
                started = time.perf_counter()
                for target in targets:
                    self.spark.sql(sql).write.parquet(target)
                seconds = (time.perf_counter() - started) / executions
                stolen = steal_seconds() - stolen
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        figures = job_group_figures(self.spark, group)
        rows = self.spark.read.parquet(targets[0]).collect()
        for target in targets:
            self.context.storage.delete(target)
        return Measurement(seconds, figures.shuffle_write_bytes // executions,
                           figures.shuffle_write_records // executions, steal_seconds=stolen,
                           executions=executions), rows



def executions_for(min_run_seconds: float, seconds: float) -> int:
    """How many back-to-back executions make a timed run of a query that takes ``seconds`` last about
    ``min_run_seconds`` (1 when that is 0)."""
    if min_run_seconds <= 0 or seconds <= 0:
        return 1
    return max(1, min(MAX_EXECUTIONS, math.ceil(min_run_seconds / seconds - 0.25)))



def compare_strategies(context: RunContext, workload: list[BenchQuery], strategies: list[str],
                       thresholds: list[int], repeat: int, progress=None,
                       min_run_seconds: float = 0.0) -> list[StrategyResult]:
    """Each query and join setting under every strategy (see the module's description). With
    ``min_run_seconds``, each timed run executes the query back to back as often as the last warm-up round's
    median says it takes to last that long, the same count for every strategy of the query and setting."""
    base, catalog = context.settings, context.catalog
    scratch = bench_session(context)
    runner = QueryRunner(context, scratch)
    results: list[StrategyResult] = []
    try:
        for query in workload:
            text = query.text
            for threshold in thresholds:
                by_strategy = {}
                for series in map(Series.parse, strategies):
                    settings = series.run_settings(base, threshold)
                    stages = len(plan_query(text, catalog, settings, context.storage,
                                            costing=context.with_settings(settings).join_costing()).dag.stages)
                    by_strategy[series.name] = (StrategyResult(query.label, series.name, threshold, stages,
                                                               query.ratio), settings)
                one_round = partial(_run_round, runner, query.label, text, list(by_strategy.values()), [], progress)
                warmup: list = []
                for _ in range(WARMUP_ROUNDS):
                    warmup = one_round(0, round_number=0)
                typical = statistics.median(m.seconds for _, m in warmup) if warmup else 0.0
                one_round = partial(one_round, executions=executions_for(min_run_seconds, typical))
                for round_number in range(1, repeat + 1):
                    kept, discarded = undisturbed_round(partial(one_round, round_number=round_number))
                    for result, measurement in kept:
                        result.runs.append(measurement)
                        result.rerun_rounds += discarded
                        ran = (measurement.detail or {}).get("stages")
                        if ran:  # stages run: a summary pre-pass whose summary is not built does not run
                            result.stages = len(ran)
                results += [result for result, _ in by_strategy.values()]
    finally:
        context.storage.delete(scratch)
    return results



def _run_round(runner: QueryRunner, label: str, text: str, order: list[tuple[StrategyResult, Settings]],
               expected: list, progress, attempt: int, round_number: int,
               executions: int = 1) -> list[tuple[StrategyResult, Measurement]]:
    """One run of each strategy, in the round's order (``round_order``, ``off`` as the baseline), each run's rows
    checked against the first run's; progress is told on a round's first attempt only."""
    runs = []
    names = [result.strategy for result, _ in order]
    for result, settings in round_order(order, round_number, names.index("off") if "off" in names else 0):
        series = Series.parse(result.strategy)
        if series.is_spark:
            measurement, rows = runner.spark_sql(text, settings, executions, series.forced_bloom)
        else:
            measurement, rows = runner.aipq(text, settings, executions=executions,
                                            prior_statistics=series.prior_statistics)
        _check_rows(label, result.strategy, rows, expected)
        runs.append((result, measurement))
        if progress and attempt == 0:
            progress()
    return runs



def _check_rows(label: str, strategy: str, rows: list, expected: list) -> None:
    """Every run's rows against the first run's (``expected`` holds the first strategy and its rows once set)."""
    canonical = canonical_rows(rows)
    if not expected:
        expected += [strategy, canonical]
    elif canonical != expected[1]:
        raise ExecutionError(f"{label}: strategy {strategy!r} returned {len(rows)} row(s) that differ from strategy "
                             f"{expected[0]!r}'s", hint="this is a bug; please report it")



def rotated(items: list, round_number: int) -> list:
    """``items`` starting at the ``round_number``-th: each takes every place in the order over the rounds."""
    if not items:
        return items
    start = round_number % len(items)
    return items[start:] + items[:start]



def round_order(items: list, round_number: int, baseline: int = 0) -> list:
    """The run order of round ``round_number`` (0: a warm-up, in the given order) for ``items``, all compared with
    ``items[baseline]``. Timed rounds come in pairs, the second the first reversed: over a pair every item's mean
    place is the middle and each runs once before the baseline and once after it, so a drift within the round
    (runs getting faster as the JVM compiles the query) favours no item. The first round of each pair
    puts the baseline in the middle and the others around it, rotated by one place per pair; an odd last round
    thus keeps the baseline in the middle too, with half the others before it."""
    if round_number <= 0 or len(items) < 2:
        return list(items)
    others = rotated(items[:baseline] + items[baseline + 1:], (round_number - 1) // 2)
    middle = (len(items) - 1) // 2
    first = [*others[:middle], items[baseline], *others[middle:]]
    return first if round_number % 2 else first[::-1]



def joins_label(threshold: int) -> str:
    return "repartition" if threshold <= 0 else "broadcast"

