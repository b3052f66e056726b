"""How often the benefit estimator decides right: ``aipq bench decisions``.

Per query: one warm-up run under ``adaptive`` records, for every candidate edge (redundant ones aside), its
estimated benefit B and the decision (use it when B > β). Then, round after round, the query runs with no
information passing and once per edge with that edge alone (``SingleEdge``: the same filter size adaptive chose)
— interleaved. An edge's measured benefit is the median time without it minus the median time with it. The
decision was right when its sign agrees with the measured benefit's: used and faster, or skipped and not
faster. Differences within ``tolerance`` of the query's time are noise on this machine; such edges are counted
separately (``neutral``) and right either way in the tolerant accuracy.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from aipq.config import Settings
from aipq.planner.ip import SingleEdge
from aipq.tpch.bench import bench_session
from aipq.tpch.strategy_bench import QueryRunner


@dataclass
class EdgeDecision:
    query: str
    producer: int
    column: str
    target: str
    target_key: tuple
    relation: str
    estimated_benefit: float
    used: bool
    filter_bytes: int | None
    joins: str = "repartition"
    with_edge: list[float] = field(default_factory=list)
    without: list[float] = field(default_factory=list)

    @property
    def measured_benefit(self) -> float:
        return statistics.median(self.without) - statistics.median(self.with_edge)

    def right(self) -> bool:
        return (self.measured_benefit > 0) == self.used

    def neutral(self, tolerance: float) -> bool:
        return abs(self.measured_benefit) <= tolerance * statistics.median(self.without)

    def as_dict(self, tolerance: float) -> dict:
        return {"query": self.query, "joins": self.joins, "summary": f"S{self.producer}.{self.column}",
                "target": self.target,
                "relation": self.relation, "estimated_benefit": round(self.estimated_benefit, 5),
                "decision": "use" if self.used else "skip", "filter_bytes": self.filter_bytes,
                "seconds_with": round(statistics.median(self.with_edge), 4),
                "seconds_without": round(statistics.median(self.without), 4),
                "measured_benefit": round(self.measured_benefit, 4), "right": self.right(),
                "neutral": self.neutral(tolerance)}


def _edges(label: str, record, joins: str) -> list[EdgeDecision]:
    edges = []
    for metrics in record.stages:
        decisions = metrics.decisions
        if decisions is None:
            continue
        for use in decisions.uses:
            if use.estimate is not None:
                edges.append(EdgeDecision(label, use.producer, use.column, use.target.label, use.target.key,
                                          use.relation, use.estimate["B"], True, use.estimate["filter_bytes"],
                                          joins))
        for rejected in decisions.rejected:
            candidate = rejected.candidate
            if rejected.estimate is None or rejected.reason.startswith("redundant"):
                continue
            edges.append(EdgeDecision(label, candidate.producer, candidate.column, candidate.target.label,
                                      candidate.target.key, candidate.relation, rejected.estimate["B"], False,
                                      rejected.estimate["filter_bytes"], joins))
    return edges


def measure_decisions(home: Path, workload: list[tuple[str, str]], repeat: int, base: Settings,
                      progress=None, thresholds: list[int] | None = None) -> list[EdgeDecision]:
    """Every candidate edge of every query, under each broadcast threshold (default: the base settings')."""
    from aipq.tpch.strategy_bench import joins_label

    spark, catalog, scratch = bench_session(home, base)
    try:
        runner = QueryRunner(spark, home, catalog, scratch)
        found = []
        for threshold in thresholds or [base.broadcast_threshold]:
            found += _measure(runner, workload, repeat, replace(base, broadcast_threshold=threshold),
                              joins_label(threshold), progress)
        return found
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(runner: QueryRunner, workload: list[tuple[str, str]], repeat: int, base: Settings, joins: str,
             progress) -> list[EdgeDecision]:
    # the measured runs carry no estimator (its own work would bias the comparison with off)
    adaptive, off, single = replace(base, ip="adaptive"), replace(base, ip="off"), replace(base, ip="always")
    found: list[EdgeDecision] = []
    for label, text in workload:
        runner.aipq(text, adaptive)  # statistics for the estimator
        runner.aipq(text, adaptive)
        edges = _edges(label, runner.last_record, joins)
        for round_number in range(repeat + 1):  # round 0 warms up
            seconds = runner.aipq(text, off)[0].seconds
            for edge in edges:
                strategy = SingleEdge(edge.producer, edge.column, edge.target_key, edge.filter_bytes)
                with_edge = runner.aipq(text, single, strategy)[0].seconds
                if round_number > 0:
                    edge.without.append(seconds)
                    edge.with_edge.append(with_edge)
            if progress:
                progress()
        found += edges
    return found


def accuracy(edges: list[EdgeDecision], tolerance: float) -> tuple[float, float]:
    """(strict, tolerant): the share of right decisions by sign alone, and counting noise-level edges right."""
    if not edges:
        return float("nan"), float("nan")
    strict = sum(e.right() for e in edges) / len(edges)
    tolerant = sum(e.right() or e.neutral(tolerance) for e in edges) / len(edges)
    return strict, tolerant
