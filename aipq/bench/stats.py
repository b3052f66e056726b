"""What piggybacked statistics cost and how accurate they are: ``aipq bench stats`` (the paper's Figs. 11–12).

Per query, each round runs it once with statistics off and once per lg_k with every statistic collected again
(``recollect``), interleaved, in ``strategy_bench``'s balanced order (``round_order``, statistics off as the
baseline) so that no setting always runs before another; the slowdown is the median collecting time over the median
time without, and also the median of the rounds' own ratios (``paired_slowdown``), which a slow spell spanning a
round leaves out. A round during which the hypervisor took more than 5% of the CPU time from one of its runs runs
again (``aipq.bench.steal``). After each collecting run, the NDV estimates just stored are compared with exact
distinct counts of the same columns.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from aipq.bench.runner import Measurement, QueryRunner, round_order
from aipq.bench.staging import bench_session
from aipq.bench.steal import undisturbed_round
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.session import read_table
from aipq.stats.repository import StatsRepository
from aipq.stats.sketches import relative_standard_error


@dataclass
class CollectionOverhead:
    query: str
    lg_k: int | None  # None: statistics off
    seconds: list[float] = field(default_factory=list)
    statistics_seconds: list[float] = field(default_factory=list)
    steal_seconds: list[float] = field(default_factory=list)  # CPU time the hypervisor took meanwhile
    rerun_rounds: int = 0  # rounds run again because the hypervisor took CPU time during one of their runs

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass
class NdvError:
    table: str
    column: str
    lg_k: int
    estimate: float
    exact: int

    @property
    def error(self) -> float:
        return abs(self.estimate - self.exact) / self.exact if self.exact else 0.0

    def as_dict(self) -> dict:
        return {**self.__dict__, "error": round(self.error, 6), "rse": round(relative_standard_error(self.lg_k), 6)}


def measure_collection(home: Path, workload: list[tuple[str, str]], lg_ks: list[int], repeat: int,
                       base: Settings, progress=None) -> tuple[list[CollectionOverhead], list[NdvError]]:
    context = RunContext(home, base)
    scratch = bench_session(context)
    try:
        return _measure(context.spark, context.catalog, QueryRunner(context, scratch), StatsRepository(home),
                        workload, lg_ks, repeat, base, progress)
    finally:
        context.storage.delete(scratch)


def _measure(spark, catalog, runner: QueryRunner, repository: StatsRepository, workload: list[tuple[str, str]],
             lg_ks: list[int], repeat: int, base: Settings,
             progress) -> tuple[list[CollectionOverhead], list[NdvError]]:
    overheads: list[CollectionOverhead] = []
    estimates: dict[tuple[str, str, int], float] = {}
    for label, text in workload:
        settings = {None: replace(base, statistics="off")}
        settings.update({k: replace(base, statistics="recollect", stats_lg_k=k) for k in lg_ks})
        mine = {k: CollectionOverhead(label, k) for k in settings}
        one_round = partial(_run_round, runner, repository, text, list(settings.items()), estimates, progress)
        one_round(0, round_number=0)  # round 0 warms up
        for round_number in range(1, repeat + 1):
            kept, discarded = undisturbed_round(partial(one_round, round_number=round_number))
            for lg_k, measurement in kept:
                mine[lg_k].seconds.append(measurement.seconds)
                mine[lg_k].statistics_seconds.append(measurement.statistics_seconds)
                mine[lg_k].steal_seconds.append(measurement.steal_seconds)
                mine[lg_k].rerun_rounds += discarded
        overheads += mine.values()
    errors = _ndv_errors(spark, catalog, estimates)
    return overheads, errors


def _run_round(runner: QueryRunner, repository: StatsRepository, text: str,
               settings: list[tuple[int | None, Settings]], estimates: dict[tuple[str, str, int], float], progress,
               attempt: int, round_number: int) -> list[tuple[int | None, Measurement]]:
    """One run per setting, in the round's order (``round_order``); after each collecting run, the NDV estimates it
    stored. Progress is told on a round's first attempt only."""
    runs = []
    for lg_k, chosen in round_order(settings, round_number):
        measurement, _ = runner.aipq(text, chosen)
        runs.append((lg_k, measurement))
        if lg_k is not None:
            for table in repository.tables():
                for column in table.columns.values():
                    if column.lg_k == lg_k:
                        estimates[(table.path, column.column, lg_k)] = column.ndv
        if progress and attempt == 0:
            progress()
    return runs


def _ndv_errors(spark, catalog, estimates: dict[tuple[str, str, int], float]) -> list[NdvError]:
    """Exact distinct counts in one pass per table (count(DISTINCT) for each column measured)."""
    from pyspark.sql import functions as F

    by_path: dict[str, set[str]] = {}
    for path, column, _ in estimates:
        by_path.setdefault(path, set()).add(column)
    entries = {e.path: e for e in catalog.entries()}
    exact: dict[tuple[str, str], int] = {}
    for path, columns in by_path.items():
        entry = entries.get(path)
        if entry is None:
            continue
        ordered = sorted(columns)
        row = read_table(spark, entry).agg(*[F.countDistinct(F.col(c)).alias(c) for c in ordered]).first()
        exact.update({(path, c): int(row[c]) for c in ordered})
    names = {e.path: e.qualified_name for e in catalog.entries()}
    return sorted((NdvError(names.get(path, path), column, lg_k, estimate, exact[(path, column)])
                   for (path, column, lg_k), estimate in estimates.items() if (path, column) in exact),
                  key=lambda e: (e.table, e.column, e.lg_k))


def paired_slowdown(collecting: list[float], off: list[float]) -> float:
    """The median over rounds of each round's slowdown: a round runs both settings back to back, so a slow
    spell of the machine that spans it cancels out, where the medians taken apart keep it."""
    return statistics.median(on / without - 1 for on, without in zip(collecting, off))


def overhead_rows(overheads: list[CollectionOverhead]) -> list[dict]:
    """Per query and lg_k: median seconds and the slowdown against statistics off, as the ratio of the medians
    and paired round by round."""
    off = {o.query: o for o in overheads if o.lg_k is None}
    return [{"query": o.query, "lg_k": o.lg_k, "rse": round(relative_standard_error(o.lg_k), 5),
             "median_seconds": round(o.median, 4), "off_seconds": round(off[o.query].median, 4),
             "slowdown": round(o.median / off[o.query].median - 1, 4),
             "paired_slowdown": round(paired_slowdown(o.seconds, off[o.query].seconds), 4),
             "storing_seconds": round(statistics.median(o.statistics_seconds), 4)}
            for o in overheads if o.lg_k is not None]
