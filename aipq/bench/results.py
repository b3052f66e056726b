"""What a strategy benchmark's results say: speedups (plain and paired), pruning efficiency, the headline
statements, and the rows of results.csv."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from aipq.bench.runner import StrategyResult, joins_label
from aipq.bench.series import SPARK, SPARK_ANCHORS, WITHOUT_SUMMARIES


def pruning_efficiency(results: list[StrategyResult]) -> dict[tuple[str, int, str], float | None]:
    """Per query, join setting and strategy: (rows shuffled under off − under it) / (under off − under oracle),
    the share of the prunable rows the strategy pruned (1 = as well as exact key sets)."""
    by = {(r.query, r.broadcast_threshold, r.strategy): r for r in results}
    efficiency: dict[tuple[str, int, str], float | None] = {}
    for (query, threshold, strategy), result in by.items():
        off, oracle = by.get((query, threshold, "off")), by.get((query, threshold, "oracle"))
        if off is None or oracle is None or strategy in SPARK_ANCHORS:
            continue
        prunable = off.shuffle_write_records - oracle.shuffle_write_records
        pruned = off.shuffle_write_records - result.shuffle_write_records
        efficiency[(query, threshold, strategy)] = pruned / prunable if prunable > 0 else None
    return efficiency



def _counterpart(results: list[StrategyResult], result: StrategyResult, strategy: str) -> StrategyResult | None:
    """``strategy``'s result on the same query and join setting as ``result``."""
    return next((other for other in results if (other.query, other.broadcast_threshold, other.strategy)
                 == (result.query, result.broadcast_threshold, strategy)), None)



def speedup(results: list[StrategyResult], result: StrategyResult, baseline: str) -> float | None:
    """How many times faster ``result`` ran than ``baseline`` on the same query and join setting (medians)."""
    other = _counterpart(results, result, baseline)
    return None if other is None else other.median_seconds / result.median_seconds



def paired_speedup(results: list[StrategyResult], result: StrategyResult, baseline: str) -> float | None:
    """The median over rounds of ``baseline``'s time over ``result``'s in the same round. Strategies run
    interleaved, so a round's runs share the machine's state of the moment; on this machine the ratio of medians
    swings by ±10% on two identical plans, the paired ratio by less."""
    other = _counterpart(results, result, baseline)
    pairs = list(zip(other.runs, result.runs)) if other is not None else []
    return statistics.median(b.seconds / r.seconds for b, r in pairs) if pairs else None



SLOWER = 0.97  # "more than 3% slower than off": issue 7's bound on adaptive



@dataclass
class Headline:
    """One statement of a benchmark report, e.g. "always vs off (repartition): geo-mean 1.12× over 10 queries"."""

    strategy: str
    baseline: str
    joins: str
    measure: str  # "speedup", "slowest" or "pruning efficiency"
    value: float
    queries: int
    query: str = ""  # slowest: which query
    paired: float | None = None  # slowest: its speedup paired by round
    slower: int = 0  # slowest: queries more than 3% slower than the baseline by the ratio of medians
    slower_paired: int = 0  # … and paired by round
    slower_on_offs_plan: int = 0  # … of the queries slower by either measure, those run on off's own plan

    def text(self) -> str:
        if self.measure == "speedup":
            return (f"{self.strategy} vs {self.baseline} ({self.joins} joins): geo-mean speedup "
                    f"{self.value:.2f}× over {self.queries} queries")
        if self.measure == "slowest":
            paired = "" if self.paired is None else f" ({self.paired:.2f}× paired by round)"
            same = (f"; {self.slower_on_offs_plan} of the queries slower by either measure ran off's own plan "
                    "(no summary built or used)"
                    if self.slower_on_offs_plan else "")
            return (f"{self.strategy} vs {self.baseline} ({self.joins} joins): slowest on {self.query} at "
                    f"{self.value:.2f}×{paired}; {self.slower} of {self.queries} queries more than 3% slower by "
                    f"the ratio of medians, {self.slower_paired} paired by round{same}")
        return (f"{self.strategy} ({self.joins} joins): mean pruning efficiency {self.value:.0%} "
                f"over {self.queries} queries with prunable rows")



def headlines(results: list[StrategyResult]) -> list[Headline]:
    """The report's statements, all from this run: geo-mean speedup of every strategy against ``off`` and
    ``spark``, where each strategy but ``off``, ``oracle`` and ``spark`` fell furthest behind ``off``, and the
    mean pruning efficiency of those strategies."""
    lines: list[Headline] = []
    strategies = list(dict.fromkeys(r.strategy for r in results))
    thresholds = sorted({r.broadcast_threshold for r in results})
    for threshold in thresholds:
        joins = joins_label(threshold)
        mine = [r for r in results if r.broadcast_threshold == threshold]
        for baseline in ("off", SPARK):
            for strategy in strategies:
                if strategy == baseline or (strategy in SPARK_ANCHORS and baseline == "off"):
                    continue
                ratios = [x for r in mine if r.strategy == strategy
                          for x in [speedup(results, r, baseline)] if x is not None]
                if ratios:
                    lines.append(Headline(strategy, baseline, joins, "speedup", geometric_mean(ratios), len(ratios)))
        for strategy in strategies:
            if strategy not in ("off", "oracle", *SPARK_ANCHORS):
                lines += _slowest(results, [r for r in mine if r.strategy == strategy], joins)
        efficiency = pruning_efficiency(mine)
        for strategy in strategies:
            if strategy == "oracle" or strategy in WITHOUT_SUMMARIES:
                continue
            values = [v for (_, _, s), v in efficiency.items() if s == strategy and v is not None]
            if values:
                lines.append(Headline(strategy, "oracle", joins, "pruning efficiency",
                                      sum(values) / len(values), len(values)))
    return lines



def _slowest(results: list[StrategyResult], mine: list[StrategyResult], joins: str) -> list[Headline]:
    """Where ``mine`` (one strategy, one join setting) fell furthest behind ``off``, and how often by more
    than 3%, by medians and paired by round."""
    found = [(ratio, paired_speedup(results, r, "off"), r.query, r) for r in mine
             for ratio in [speedup(results, r, "off")] if ratio is not None]
    if not found:
        return []
    ratio, paired, query, _ = min(found, key=lambda item: item[:3])
    slower = sum(1 for value, _, _, _ in found if value < SLOWER)
    slower_paired = sum(1 for _, value, _, _ in found if value is not None and value < SLOWER)
    on_offs_plan = sum(1 for value, pair, _, r in found
                       if (value < SLOWER or (pair is not None and pair < SLOWER)) and ran_offs_plan(results, r))
    return [Headline(mine[0].strategy, "off", joins, "slowest", ratio, len(found), query, paired, slower,
                     slower_paired, on_offs_plan)]



def ran_offs_plan(results: list[StrategyResult], result: StrategyResult) -> bool:
    """Whether ``result`` ran ``off``'s plan: as many stages, and no summary built or probed in any run. Its
    difference from ``off`` is then the spread of running the same work again."""
    off = _counterpart(results, result, "off")
    return (off is not None and off.stages == result.stages and bool(result.runs)
            and all(m.detail is not None and not any(stage["summaries"] or stage["probes"]
                                                      for stage in m.detail["stages"].values())
                    for m in result.runs))



CSV_COLUMNS = ("query", "ratio", "joins", "strategy", "stages", "median_seconds", "min_seconds", "max_seconds",
               "speedup_vs_off", "speedup_vs_off_paired", "speedup_vs_spark", "shuffle_write_bytes",
               "shuffle_write_records", "pruning_efficiency", "planning_seconds", "decision_seconds",
               "statistics_seconds")



def csv_rows(results: list[StrategyResult]) -> list[dict]:
    efficiency = pruning_efficiency(results)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    rows = []
    for r in results:
        rows.append({
            "query": r.query, "ratio": r.ratio, "joins": joins_label(r.broadcast_threshold),
            "strategy": r.strategy, "stages": r.stages, "median_seconds": round(r.median_seconds, 4),
            "min_seconds": round(min(m.seconds for m in r.runs), 4),
            "max_seconds": round(max(m.seconds for m in r.runs), 4),
            "speedup_vs_off": rounded(speedup(results, r, "off")),
            "speedup_vs_off_paired": rounded(paired_speedup(results, r, "off")),
            "speedup_vs_spark": rounded(speedup(results, r, SPARK)),
            "shuffle_write_bytes": r.shuffle_write_bytes, "shuffle_write_records": r.shuffle_write_records,
            "pruning_efficiency": rounded(efficiency.get((r.query, r.broadcast_threshold, r.strategy))),
            "planning_seconds": rounded(statistics.median(m.planning_seconds for m in r.runs)),
            "decision_seconds": rounded(statistics.median(m.decision_seconds for m in r.runs)),
            "statistics_seconds": rounded(statistics.median(m.statistics_seconds for m in r.runs)),
        })
    return rows



def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")

