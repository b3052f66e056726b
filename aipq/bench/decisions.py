"""How often the benefit estimator decides right: ``aipq bench decisions``.

Per query: one warm-up run under ``adaptive`` records, for every candidate edge (redundant ones aside), its
estimated benefit B and the decision (use it when B > β). Then, round after round, the query runs with adaptive's
own edges (``EdgeSet``: each summary at the size adaptive built it) and once per edge with that edge's decision
reversed: a used edge left out, a skipped one added at the size its estimate chose — interleaved, in
``strategy_bench``'s balanced order (``round_order``, adaptive's own edges as the baseline). The estimator decides
an edge among the others adaptive uses, and an edge's worth depends on them: measured alone against no passing
(docs/decisions.md has an edge that lost alone and gained among the others).
An edge's measured benefit is the median time without it minus the median time with it, counted over the stages the
edge can change: the producer (it builds the summary), the stage it prunes and every stage downstream of that one.
The others run the same work either way and only add their noise; the whole query's difference is kept too. The
decision was right when its sign agrees with the measured benefit's: used and faster, or skipped and not faster.
Differences within ``tolerance`` of the query's time are noise on this machine; such edges are counted separately
(``neutral``) and right either way in the tolerant accuracy. A third count asks the runs themselves whether the sign
is known: the effect is ``clear`` when every run with the edge was faster than every run without it, or every one
slower (with 5 runs each, chance alone separates them 1 time in 126); an edge whose runs overlap is right either way
there.

A run during which the hypervisor took more than 5% of the CPU time runs again (``aipq.bench.steal``). Only that run:
a round of Q2 is 17 or 18 runs, over a minute, and a steal spell would rerun most of it; and the one run of
adaptive's own edges is what every edge of the round is compared with, so a disturbed one would misjudge them all."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from aipq.bench.runner import QueryRunner, round_order
from aipq.bench.staging import bench_session
from aipq.bench.steal import StealTally, undisturbed_run
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.ip.strategies import Always
from aipq.planner.stages import StageDag


class EdgeSet(Always):
    """A given set of edges and nothing else, each summary at a given filter size: what measuring one decision
    needs (``aipq bench decisions`` runs adaptive's own edges with and without the edge it measures)."""

    name = "edge-set"

    def __init__(self, edges: Iterable[tuple[int, str, tuple]], filter_bytes: dict[tuple[int, str], int] | None = None):
        # an edge: (producer, column, the target's stable_key); plans are rebuilt per run, so no object identity
        self.edges = frozenset(edges)
        self.filter_bytes = dict(filter_bytes or {})

    def creation(self, planner, stage):
        return [(column, "an edge being measured") for column in sorted({c for p, c, _ in self.edges if p == stage.id})]

    def filter_bits(self, planner, stage, column):
        size = self.filter_bytes.get((stage.id, column))
        return size * 8 if size else None

    def usage(self, planner, candidate, built):
        if (candidate.producer, candidate.column, candidate.target.stable_key) not in self.edges:
            return None
        return "an edge being measured"

    def rejection(self, planner, candidate, built):
        return "not an edge being measured"


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
    stages: frozenset[int] = frozenset()  # the stages the edge can change (empty: every stage)
    with_edge: list[float] = field(default_factory=list)  # seconds of those stages
    without: list[float] = field(default_factory=list)
    query_with: list[float] = field(default_factory=list)  # seconds of the whole query
    query_without: list[float] = field(default_factory=list)

    @property
    def measured_benefit(self) -> float:
        return statistics.median(self.without) - statistics.median(self.with_edge)

    @property
    def key(self) -> tuple[int, str, tuple]:
        return (self.producer, self.column, self.target_key)

    def record(self, with_edge, without) -> None:
        """One round: adaptive's edges with this one and without it (``Measurement``s)."""
        self.with_edge.append(_stage_seconds(with_edge, self.stages))
        self.without.append(_stage_seconds(without, self.stages))
        self.query_with.append(with_edge.seconds)
        self.query_without.append(without.seconds)

    def right(self) -> bool:
        return (self.measured_benefit > 0) == self.used

    def neutral(self, tolerance: float) -> bool:
        return abs(self.measured_benefit) <= tolerance * statistics.median(self.query_without)

    def clear(self) -> bool:
        """Whether the runs with and without the edge do not overlap: the sign is then not noise."""
        return max(self.with_edge) < min(self.without) or max(self.without) < min(self.with_edge)

    def verdict(self, tolerance: float) -> str:
        if self.right():
            return "yes"
        if self.neutral(tolerance):
            return "noise"
        return "no" if self.clear() else "unclear"

    def as_dict(self, tolerance: float) -> dict:
        return {"query": self.query, "joins": self.joins, "summary": f"S{self.producer}.{self.column}",
                "target": self.target,
                "relation": self.relation, "estimated_benefit": round(self.estimated_benefit, 5),
                "decision": "use" if self.used else "skip", "filter_bytes": self.filter_bytes,
                "seconds_with": round(statistics.median(self.with_edge), 4),
                "seconds_without": round(statistics.median(self.without), 4),
                "measured_benefit": round(self.measured_benefit, 4), "right": self.right(),
                "neutral": self.neutral(tolerance), "clear": self.clear(), "verdict": self.verdict(tolerance),
                "stages": sorted(self.stages),
                "runs_with": [round(x, 4) for x in self.with_edge], "runs_without": [round(x, 4) for x in self.without],
                "query_seconds_with": round(statistics.median(self.query_with), 4),
                "query_seconds_without": round(statistics.median(self.query_without), 4),
                "measured_query_benefit": round(statistics.median(self.query_without)
                                                - statistics.median(self.query_with), 4)}


def _stage_seconds(measurement, stages: frozenset[int]) -> float:
    timed = measurement.detail["stages"]  # stage id (as text) → its figures
    return sum(s["seconds"] for sid, s in timed.items() if not stages or int(sid) in stages)


def affected_stages(dag: StageDag, producer: int, target_stage: int) -> frozenset[int]:
    """The producer, the target stage and every stage that reads, directly or not, the target's output."""
    found, todo = {producer, target_stage}, [target_stage]
    while todo:
        for consumer in dag.dataflow.get(todo.pop(), []):
            if consumer not in found:
                found.add(consumer)
                todo.append(consumer)
    return frozenset(found)


def _edges(label: str, record, joins: str, dag: StageDag) -> list[EdgeDecision]:
    edges = []
    for metrics in record.stages:
        decisions = metrics.decisions
        if decisions is None:
            continue
        for use in decisions.uses:
            if use.estimate is not None:
                edges.append(EdgeDecision(label, use.producer, use.column, use.target.label, use.target.stable_key,
                                          use.relation, use.estimate["B"], True, use.estimate["filter_bytes"],
                                          joins, affected_stages(dag, use.producer, use.target.stage)))
        for rejected in decisions.rejected:
            candidate = rejected.candidate
            if rejected.estimate is None or rejected.reason.startswith("redundant"):
                continue
            edges.append(EdgeDecision(label, candidate.producer, candidate.column, candidate.target.label,
                                      candidate.target.stable_key, candidate.relation, rejected.estimate["B"], False,
                                      rejected.estimate["filter_bytes"], joins,
                                      affected_stages(dag, candidate.producer, candidate.target.stage)))
    return edges


def measure_decisions(home: Path, workload: list[tuple[str, str]], repeat: int, base: Settings,
                      progress=None, thresholds: list[int] | None = None,
                      steal: StealTally | None = None) -> list[EdgeDecision]:
    """Every candidate edge of every query, under each broadcast threshold (default: the base settings');
    ``steal`` counts the timed runs run again for steal and the steal of those kept."""
    from aipq.bench.runner import joins_label

    context = RunContext(home, base)
    scratch = bench_session(context)
    try:
        runner = QueryRunner(context, scratch)
        found = []
        for threshold in thresholds or [base.broadcast_threshold]:
            found += _measure(runner, workload, repeat, replace(base, broadcast_threshold=threshold),
                              joins_label(threshold), progress, steal if steal is not None else StealTally())
        return found
    finally:
        context.storage.delete(scratch)


def _measure(runner: QueryRunner, workload: list[tuple[str, str]], repeat: int, base: Settings, joins: str,
             progress, steal: StealTally) -> list[EdgeDecision]:
    # the measured runs carry no estimator: they run fixed edge sets, and its own work would only add noise
    adaptive, measured = replace(base, ip="adaptive"), replace(base, ip="always")
    found: list[EdgeDecision] = []
    for label, text in workload:
        runner.aipq(text, adaptive)  # statistics for the estimator
        runner.aipq(text, adaptive)
        edges = _edges(label, runner.last_record, joins, runner.last_dag)
        chosen, sizes = adaptive_edges(runner.last_record, edges)
        for round_number in range(repeat + 1):  # round 0 warms up
            timed: dict[int, object] = {}  # adaptive's own edges under -1, else under the toggled edge's index
            for index in round_order([-1, *range(len(edges))], round_number):
                run = partial(_timed, runner, text, measured,
                              EdgeSet(chosen if index < 0 else chosen ^ {edges[index].key}, sizes))
                if round_number == 0:
                    timed[index] = run()
                    continue
                timed[index], discarded = undisturbed_run(run)
                steal.add(timed[index], discarded)
            if round_number > 0:
                for index, edge in enumerate(edges):
                    toggled, own = timed[index], timed[-1]
                    edge.record(own if edge.used else toggled, toggled if edge.used else own)
            if progress:
                progress()
        found += edges
    return found


def adaptive_edges(record, edges: list[EdgeDecision]) -> tuple[frozenset[tuple], dict[tuple[int, str], int]]:
    """The edges adaptive used in ``record``, and each summary's filter size: as built there, else (a summary
    only skipped edges would use) the size the estimate of its best edge chose, as adaptive sizes a summary."""
    sizes = {(edge.producer, edge.column): edge.filter_bytes
             for edge in sorted(edges, key=lambda e: e.estimated_benefit) if edge.filter_bytes}
    for metrics in record.stages:
        for built in metrics.summaries:
            if built.bits:
                sizes[(built.stage, built.column)] = built.bits // 8
    return frozenset(edge.key for edge in edges if edge.used), sizes


def _timed(runner: QueryRunner, text: str, settings: Settings, strategy):
    return runner.aipq(text, settings, strategy)[0]


@dataclass(frozen=True)
class Accuracy:
    """Shares of right decisions: by sign alone; counting edges within the tolerance right; counting edges
    whose runs overlap (no clear sign) right."""

    by_sign: float
    within_noise: float
    where_clear: float


def accuracy(edges: list[EdgeDecision], tolerance: float) -> Accuracy:
    if not edges:
        return Accuracy(float("nan"), float("nan"), float("nan"))
    return Accuracy(sum(e.right() for e in edges) / len(edges),
                    sum(e.right() or e.neutral(tolerance) for e in edges) / len(edges),
                    sum(e.right() or not e.clear() for e in edges) / len(edges))
