"""What the IP planner decides for a stage (``StageDecisions``: the summaries it builds, those it uses and where,
the candidates it rejected, each with its reason), what it knows of a built summary (``BuiltInfo``), and what it
asks of the benefit estimator (``EdgeEstimator``, ``Estimate``, ``Pruning``): the records the engine, the
estimator and explain read, apart from how they are decided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from aipq.ip.candidates import Candidate, Target

SummaryKind = Literal["bloom", "hash-list", "exact"]



@dataclass(frozen=True)
class SummaryBuild:
    """SUMMARY_CREATION: stage ``stage`` summarizes its output column ``column`` while writing it."""

    stage: int
    column: str
    kind: SummaryKind
    bits: int | None  # Bloom filters: the filter's size in bits
    expected_items: int | None  # what the size was chosen for (None: fixed size or not a Bloom filter)
    reason: str
    estimate: dict | None = None  # adaptive: the benefit estimate of the best edge it serves

    @property
    def key(self) -> tuple[int, str]:
        return (self.stage, self.column)

    @property
    def planned_bytes(self) -> int | None:
        return None if self.bits is None else self.bits // 8



@dataclass(frozen=True)
class SummaryUse:
    """SUMMARY_USAGE: the summary of ``producer.column`` prunes ``target``."""

    producer: int
    column: str
    target: Target
    relation: str
    reason: str
    estimate: dict | None = None  # adaptive: B and its parts, and where each input came from

    @property
    def summary(self) -> tuple[int, str]:
        return (self.producer, self.column)



@dataclass(frozen=True)
class Rejected:
    candidate: Candidate
    reason: str
    estimate: dict | None = None



@dataclass
class StageDecisions:
    stage: int
    builds: list[SummaryBuild] = field(default_factory=list)
    uses: list[SummaryUse] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    # the share of the stage's subplan rows the estimator expects it to output once the summaries chosen probe:
    # here and below (``IpPlanner.share_after_pruning``), and of that at its own places alone (``share_within``)
    rows_kept: float = 1.0
    own_rows_kept: float = 1.0



# Summaries that prune a stage's own join inputs by the other side's keys: they drop only rows that join drops.
OWN_JOIN_RELATIONS = ("child-to-parent", "filtered-scan")



def drops_output_rows(decisions: StageDecisions) -> bool:
    """Whether the summaries a stage applies may remove rows its subplan outputs: any but those pruning its own
    join's inputs (sibling-to-sibling and transitive passing drop rows only a later join drops)."""
    return any(_beyond_own_join(u, decisions.stage) for u in decisions.uses)



def keeping_output_exact(decisions: StageDecisions) -> StageDecisions:
    """The decisions without the summaries that would remove rows the stage's subplan outputs."""
    return replace(decisions, uses=[u for u in decisions.uses if not _beyond_own_join(u, decisions.stage)],
                   rows_kept=decisions.rows_kept / max(decisions.own_rows_kept, 1e-12), own_rows_kept=1.0)



def _beyond_own_join(use: SummaryUse, stage: int) -> bool:
    return not (use.relation in OWN_JOIN_RELATIONS and use.target.stage == stage)



@dataclass(frozen=True)
class BuiltInfo:
    """What the planner knows of a summary once its stage ran."""

    kind: SummaryKind
    size_bytes: int | None
    items: int | None
    sketch: bytes | None = None  # HLL sketch of its keys, for the benefit estimator



class Estimate(Protocol):
    """What the planner reads of a benefit estimate (``estimator.benefit.EdgeEstimate``)."""

    @property
    def total(self) -> float: ...

    @property
    def filter_bytes(self) -> int: ...

    @property
    def expected_keys(self) -> float | None: ...

    @property
    def savings(self) -> float: ...

    @property
    def one_time(self) -> float: ...

    @property
    def survive(self) -> float: ...  # share of the probed rows the summary keeps

    def with_downstream(self, saved: float) -> Estimate: ...

    def as_dict(self) -> dict: ...



@dataclass(frozen=True)
class Pruning:
    """What the summaries chosen so far do to the plan, handed to the estimator with every edge it prices: of
    what a stage's subplan wrote in an earlier run, the share kept now that summaries chosen in or below it
    prune (``after``); of a place's rows, the share the summaries already chosen there keep (``at``); of a
    stage's rows as its plan estimates them from its inputs, the share its own probes keep (``within``)."""

    after: Callable[[int], float]
    at: Callable[[Target], float]
    within: Callable[[int], float] = lambda stage_id: 1.0



NO_PRUNING = Pruning(after=lambda stage_id: 1.0, at=lambda target: 1.0)



class EdgeEstimator(Protocol):
    def materialization_seconds(self, stage_id: int) -> float:
        """Writing the stage's output and reading it back, beyond computing it in its consumer's job."""

    def __call__(self, candidate: Candidate, built: BuiltInfo | None, pruning: Pruning) -> Estimate | None:
        """The benefit of ``candidate``: before its summary exists (``built`` None: the best case the known
        sizes allow) or once it does, given the pruning chosen so far."""
        ...

