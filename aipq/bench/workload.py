"""A whole workload against ``spark``: each series' total time beside its geo-mean, the queries it ran slower than
``spark`` beyond the run's own A/A spread, and the distribution of its per-query ratios (``report.py`` plots it).

The A/A spread of a query (at one join setting) is how far identical work differed within the run: the larger of
``|1 − spark / spark-again|`` (their median seconds; the ``spark-again`` control, when the run has it) and
``(max − min) / median`` of ``spark``'s own timed runs. A series is *slower than spark beyond the spread* on a
query when its ratio to ``spark`` (``spark``'s median seconds over its own) is below ``1 − spread``."""

from __future__ import annotations

from dataclasses import dataclass

from aipq.bench.results import geometric_mean
from aipq.bench.runner import StrategyResult, joins_label
from aipq.bench.series import SPARK, SPARK_AGAIN

# Series compared with ``spark`` that are not themselves its A/A control.
NOT_COMPARED = (SPARK, SPARK_AGAIN)


@dataclass(frozen=True)
class SlowQuery:
    """A query a series ran slower than ``spark`` beyond the A/A spread."""

    series: str
    joins: str
    query: str
    ratio: float  # spark's median seconds over the series'
    spread: float  # the query's A/A spread
    seconds: float
    spark_seconds: float

    def text(self) -> str:
        return (f"{self.query} {self.ratio:.2f}× ({self.seconds:.2f} s against {self.spark_seconds:.2f} s; "
                f"A/A spread {self.spread:.0%})")


@dataclass(frozen=True)
class SeriesTotal:
    """One series over the whole workload at one join setting, against ``spark`` on the same queries."""

    series: str
    joins: str
    queries: int
    geo_mean: float  # of the per-query ratios to spark
    seconds: float  # sum of the queries' median seconds
    spark_seconds: float  # spark's sum over the same queries
    slower: tuple[SlowQuery, ...]  # slower beyond the spread, slowest first

    @property
    def total_ratio(self) -> float:
        return self.spark_seconds / self.seconds if self.seconds > 0 else float("nan")

    def as_dict(self) -> dict:
        return {"series": self.series, "joins": self.joins, "queries": self.queries,
                "geo_mean_vs_spark": round(self.geo_mean, 4), "total_seconds": round(self.seconds, 3),
                "spark_total_seconds": round(self.spark_seconds, 3), "total_vs_spark": round(self.total_ratio, 4),
                "slower_than_spark": [s.__dict__ for s in self.slower]}


def aa_spread(spark: StrategyResult, again: StrategyResult | None) -> float:
    """The query's A/A spread (the module's definition): how far identical runs of ``spark`` differed."""
    times = [m.seconds for m in spark.runs]
    within = (max(times) - min(times)) / spark.median_seconds if times and spark.median_seconds > 0 else 0.0
    if again is None or not again.runs or again.median_seconds <= 0:
        return within
    return max(within, abs(1.0 - spark.median_seconds / again.median_seconds))


def _by_key(results: list[StrategyResult]) -> dict[tuple[str, int, str], StrategyResult]:
    return {(r.query, r.broadcast_threshold, r.strategy): r for r in results if r.runs}


def slower_than_spark(results: list[StrategyResult]) -> list[SlowQuery]:
    """Every (series, join setting, query) slower than ``spark`` beyond the query's A/A spread, slowest first."""
    by = _by_key(results)
    found = []
    for (query, threshold, series), result in by.items():
        spark = by.get((query, threshold, SPARK))
        if series in NOT_COMPARED or spark is None or result.median_seconds <= 0:
            continue
        spread = aa_spread(spark, by.get((query, threshold, SPARK_AGAIN)))
        ratio = spark.median_seconds / result.median_seconds
        if ratio < 1.0 - spread:
            found.append(SlowQuery(series, joins_label(threshold), query, ratio, spread, result.median_seconds,
                                   spark.median_seconds))
    return sorted(found, key=lambda s: (s.series, s.joins, s.ratio))


def series_totals(results: list[StrategyResult]) -> list[SeriesTotal]:
    """Per series but ``spark`` and join setting: geo-mean and total time against ``spark`` over the queries both
    ran, and the queries slower beyond the spread (``spark-again`` included: its own row is the A/A control)."""
    by = _by_key(results)
    slow = slower_than_spark(results)
    totals = []
    for series in dict.fromkeys(r.strategy for r in results):
        for threshold in sorted({r.broadcast_threshold for r in results}):
            pairs = [(result, by[(query, threshold, SPARK)]) for (query, t, s), result in by.items()
                     if s == series and t == threshold and (query, threshold, SPARK) in by]
            if series == SPARK or not pairs:
                continue
            joins = joins_label(threshold)
            ratios = [spark.median_seconds / mine.median_seconds for mine, spark in pairs]
            totals.append(SeriesTotal(series, joins, len(pairs), geometric_mean(ratios),
                                      sum(mine.median_seconds for mine, _ in pairs),
                                      sum(spark.median_seconds for _, spark in pairs),
                                      tuple(s for s in slow if (s.series, s.joins) == (series, joins))))
    return totals


def sorted_ratios(results: list[StrategyResult]) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Per (series, join setting) but ``spark``'s own: each query's ratio to ``spark``, lowest first (the
    distribution plot)."""
    by = _by_key(results)
    found: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for (query, threshold, series), result in by.items():
        spark = by.get((query, threshold, SPARK))
        if series == SPARK or spark is None or result.median_seconds <= 0:
            continue
        found.setdefault((series, joins_label(threshold)), []).append(
            (query, spark.median_seconds / result.median_seconds))
    return {key: sorted(values, key=lambda item: item[1]) for key, values in found.items()}


def total_lines(totals: list[SeriesTotal]) -> list[str]:
    """The Markdown table of the workload: per series its geo-mean and total time against ``spark``."""
    if not totals:
        return []
    lines = ["| series | joins | queries | geo-mean vs spark | total s | spark total s | total vs spark | "
             "slower than spark beyond A/A |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for t in totals:
        lines.append(f"| {t.series} | {t.joins} | {t.queries} | {t.geo_mean:.2f}× | {t.seconds:.2f} | "
                     f"{t.spark_seconds:.2f} | {t.total_ratio:.2f}× | {len(t.slower)} |")
    return lines


def slower_lines(totals: list[SeriesTotal], has_control: bool) -> list[str]:
    """The report's list of queries slower than ``spark`` beyond the A/A spread, per series and join setting."""
    if not totals:
        return []
    how = ("the larger of |1 − spark/spark-again| and spark's own (max − min)/median" if has_control else
           "spark's own (max − min)/median only: the run has no spark-again control")
    lines = [f"Slower than `spark` beyond the query's A/A spread ({how}):", ""]
    for t in totals:
        listed = ", ".join(s.text() for s in t.slower) if t.slower else "none"
        lines.append(f"- {t.series} ({t.joins} joins): {len(t.slower)} of {t.queries}: {listed}")
    return lines
