"""The IP planner: before each stage is submitted, which summaries it builds (the paper's Algorithm 1,
SUMMARY_CREATION) and which earlier summaries it loads and where (Algorithm 2, SUMMARY_USAGE), with a reason
for each decision.

The admissible edges come from ``planner/ip_candidates.py``; a strategy chooses among them:

- ``off``: Hive — nothing.
- ``hip``: the HIP baseline — every stage whose output a later JOIN stage reads builds a list of the distinct
  hash values of the key it is joined on; the consuming stage loads it (child-to-parent only) when its size is
  at most α. No estimation.
- ``always``: "IP without benefit estimation" — every admissible summary is a Bloom filter, built and used
  (child-to-parent, sibling-to-sibling, transitive) when it is at most α.
- ``oracle``: the same edges as ``always`` with exact key sets, so the false-positive cost can be measured.

The benefit estimator (strategy ``adaptive``) plugs in as another ``Strategy`` with the same two decisions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from aipq.config import Settings
from aipq.planner.ip_candidates import Candidate, Target, find_candidates
from aipq.planner.stages import Stage, StageDag

SummaryKind = Literal["bloom", "hash-list", "exact"]
STRATEGIES = ("off", "hip", "always", "oracle")
MIN_BLOOM_BITS = 1 << 16
# Auto-sized filters stop here unless --bloom-size says otherwise: the distinct-key bounds available before a
# stage runs (input row counts) are loose, and Spark's runtime filters use the same 1 MB default.
AUTO_BLOOM_CAP_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SummaryBuild:
    """SUMMARY_CREATION: stage ``stage`` summarizes its output column ``column`` while writing it."""

    stage: int
    column: str
    kind: SummaryKind
    bits: int | None  # Bloom filters: the filter's size in bits
    expected_items: int | None  # what the size was chosen for (None: fixed size or not a Bloom filter)
    reason: str

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

    @property
    def summary(self) -> tuple[int, str]:
        return (self.producer, self.column)


@dataclass(frozen=True)
class Rejected:
    candidate: Candidate
    reason: str


@dataclass
class StageDecisions:
    stage: int
    builds: list[SummaryBuild] = field(default_factory=list)
    uses: list[SummaryUse] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


@dataclass(frozen=True)
class BuiltInfo:
    """What the planner knows of a summary once its stage ran."""

    kind: SummaryKind
    size_bytes: int | None
    items: int | None


def bloom_bits(expected_items: int, fpp: float, cap_bytes: int) -> int:
    """Bits for ``expected_items`` keys at false-positive rate ``fpp`` (m = -n ln p / (ln 2)^2), a multiple of
    64 between 64 Kbit and the cap."""
    wanted = -max(expected_items, 1) * math.log(fpp) / (math.log(2) ** 2)
    bits = max(MIN_BLOOM_BITS, min(int(wanted), cap_bytes * 8))
    return (bits + 63) // 64 * 64


class Strategy:
    name = "off"
    kind: SummaryKind = "bloom"

    def creation(self, planner: IpPlanner, stage: Stage) -> list[tuple[str, str]]:
        """(column, reason) for each summary ``stage`` should build."""
        return []

    def usage(self, planner: IpPlanner, candidate: Candidate, built: BuiltInfo) -> str | None:
        """The reason to use ``candidate`` now that its summary exists, or None to skip it (see rejection)."""
        return None

    def rejection(self, planner: IpPlanner, candidate: Candidate, built: BuiltInfo | None) -> str:
        return "strategy off"


class Hip(Strategy):
    name = "hip"
    kind: SummaryKind = "hash-list"

    def creation(self, planner, stage):
        consumers = planner.dag.dataflow.get(stage.id, [])
        if stage.consumer_keys and any(planner.dag.stage(c).operator == "JOIN" for c in consumers):
            return [(column, "HIP: a later JOIN stage reads this output on this key")
                    for column in stage.consumer_keys]
        return []

    def usage(self, planner, candidate, built):
        if candidate.relation != "child-to-parent" or built.kind != "hash-list":
            return None
        if built.size_bytes is None:
            return "HIP: child-to-parent, if the hash list is ≤ α once built"
        if built.size_bytes > planner.settings.alpha:
            return None
        return f"HIP: child-to-parent, hash list of {built.items or 0:,} keys ≤ α"

    def rejection(self, planner, candidate, built):
        if candidate.relation != "child-to-parent":
            return f"HIP passes child-to-parent only ({candidate.relation})"
        if built is None or built.kind != "hash-list":
            return "HIP: no hash list on this key"
        return f"HIP: hash list {built.size_bytes:,} B > α"


class Always(Strategy):
    name = "always"

    def creation(self, planner, stage):
        columns = sorted({c.column for c in planner.candidates if c.producer == stage.id})
        return [(column, "every admissible summary is built (no benefit estimation)") for column in columns]

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        return f"{candidate.relation}, summary ≤ α (no benefit estimation)"

    def rejection(self, planner, candidate, built):
        if built is None:
            return "summary not built"
        return f"summary {built.size_bytes:,} B > α"


class Oracle(Always):
    name = "oracle"
    kind: SummaryKind = "exact"

    def usage(self, planner, candidate, built):
        return f"{candidate.relation}, exact key set (the edges 'always' uses)"


_STRATEGIES: dict[str, type[Strategy]] = {"off": Strategy, "hip": Hip, "always": Always, "oracle": Oracle}


class IpPlanner:
    def __init__(self, dag: StageDag, settings: Settings,
                 expected_items: Callable[[int, str], int | None] | None = None):
        if settings.ip not in _STRATEGIES:
            raise ValueError(f"unknown information passing strategy {settings.ip!r}")
        self.dag = dag
        self.settings = settings
        self.strategy = _STRATEGIES[settings.ip]()
        self.candidates = find_candidates(dag) if settings.ip != "off" else []
        self.used: set[tuple[int, str, tuple]] = set()  # (producer, column, target key) of summaries in use
        self.expected_items = expected_items or (lambda stage, column: None)

    def bloom_size(self, stage: int, column: str) -> tuple[int, int | None]:
        if self.settings.bloom_size > 0:
            return self.settings.bloom_size * 8, None
        cap = min(self.settings.alpha, AUTO_BLOOM_CAP_BYTES)
        expected = self.expected_items(stage, column)
        if expected is None:
            return cap * 8, None
        return bloom_bits(expected, self.settings.bloom_fpp, cap), expected

    def creations(self, stage: Stage) -> list[SummaryBuild]:
        """Algorithm 1: the summaries ``stage`` builds while it writes its output."""
        builds = []
        for column, reason in self.strategy.creation(self, stage):
            if self.strategy.kind == "bloom":
                bits, expected = self.bloom_size(stage.id, column)
                if bits // 8 > self.settings.alpha:
                    continue  # no later stage could load it
                builds.append(SummaryBuild(stage.id, column, "bloom", bits, expected, reason))
            else:
                builds.append(SummaryBuild(stage.id, column, self.strategy.kind, None, None, reason))
        return builds

    def usages(self, stage: Stage, built: dict[tuple[int, str], BuiltInfo]) -> tuple[list[SummaryUse],
                                                                                      list[Rejected]]:
        """Algorithm 2: the earlier summaries ``stage`` loads, and where it probes them."""
        uses, rejected = [], []
        mine = [c for c in self.candidates if c.target.stage == stage.id]
        # inputs first: pruning them makes pruning the same stage's output redundant
        for candidate in sorted(mine, key=lambda c: c.target.place == "output"):
            deeper = [key for key in candidate.covered_by if (candidate.producer, candidate.column, key) in self.used]
            if deeper:
                rejected.append(Rejected(candidate, "redundant: the same summary already pruned this data "
                                                    "earlier on its path"))
                continue
            info = built.get((candidate.producer, candidate.column))
            reason = self.strategy.usage(self, candidate, info) if info is not None else None
            if reason is None:
                rejected.append(Rejected(candidate, self.strategy.rejection(self, candidate, info)))
            else:
                uses.append(SummaryUse(candidate.producer, candidate.column, candidate.target,
                                       candidate.relation, reason))
                self.used.add((candidate.producer, candidate.column, candidate.target.key))
        return uses, rejected

    def decide(self, stage: Stage, built: dict[tuple[int, str], BuiltInfo]) -> StageDecisions:
        uses, rejected = self.usages(stage, built)
        return StageDecisions(stage.id, self.creations(stage), uses, rejected)

    def plan_all(self) -> list[StageDecisions]:
        """Every stage's decisions, assuming each summary is built at its planned size (for explain)."""
        built: dict[tuple[int, str], BuiltInfo] = {}
        result = []
        for stage in self.dag.stages:
            decisions = self.decide(stage, built)
            for build in decisions.builds:
                built[build.key] = BuiltInfo(build.kind, build.planned_bytes, None)
            result.append(decisions)
        return result
