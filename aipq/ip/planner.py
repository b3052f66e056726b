"""The IP planner: before each stage is submitted, which summaries it builds (the paper's Algorithm 1,
SUMMARY_CREATION) and which earlier summaries it loads and where (Algorithm 2, SUMMARY_USAGE), with a reason
for each decision.

The admissible edges come from ``ip/candidates.py``; a strategy chooses among them:

- ``off``: Hive — nothing.
- ``hip``: the HIP baseline — every stage whose output a later JOIN stage reads builds a list of the distinct
  hash values of the key it is joined on; the consuming stage loads it (child-to-parent only) when its size is
  at most α. No estimation.
- ``always``: "IP without benefit estimation" — every admissible summary is a Bloom filter, built and used
  (child-to-parent, sibling-to-sibling, transitive) when it is at most α.
- ``oracle``: the same edges as ``always`` with exact key sets, so the false-positive cost can be measured.

- ``adaptive``: the paper's IP with its benefit check — a summary is built when the edges it serves may pay
  together (Algorithm 1: the sum of their B with its building cost counted once > β, with the best case for the
  key overlap, since the producer has not run), and used when
  the estimate from what is known once it is built (its actual keys and their sketch, the sizes of the stages
  that ran, the repository's statistics) still clears β and it is at most α (Algorithm 2). The estimate
  itself comes from an ``EdgeEstimator`` (``estimator/edge_inputs.py`` over ``estimator/``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from aipq.config import Settings
from aipq.ip.candidates import Candidate, Target, find_candidates
from aipq.ip.staging import builds_summaries, may_fuse, surely_written
from aipq.ip.transfer import transfer_candidates
from aipq.planner.stages import Stage, StageDag

SummaryKind = Literal["bloom", "hash-list", "exact"]
MAX_HASH_FUNCTIONS = 16
MIN_BLOOM_BITS = 1 << 16
# Auto-sized filters stop here unless --bloom-size says otherwise: the distinct-key bounds available before a
# stage runs (input row counts) are loose, and Spark's runtime filters use the same 1 MB default.
AUTO_BLOOM_CAP_BYTES = 1024 * 1024
# A predicate transfer pass's filter holds room for this many times the keys it is estimated to hold: its
# estimate is an upper bound where the statistics hold, and an underestimate costs precision, never rows.
TRANSFER_KEY_MARGIN = 2
# Spark's serialized Bloom filter: its bits plus at most this header (version, hash functions, word count)
BLOOM_HEADER_BYTES = 16


def loadable_bits(alpha: int) -> int:
    """The most bits a Bloom filter may have for its serialized form, header included, to stay within α (whole
    64-bit words, as Spark stores them)."""
    return max((alpha - BLOOM_HEADER_BYTES) * 8 // 64 * 64, 64)


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


def bloom_bits(expected_items: int, fpp: float, cap_bytes: int) -> int:
    """Bits for ``expected_items`` keys at false-positive rate ``fpp`` (m = -n ln p / (ln 2)^2), a multiple of
    64 between 64 Kbit and the cap."""
    wanted = -max(expected_items, 1) * math.log(fpp) / (math.log(2) ** 2)
    bits = max(MIN_BLOOM_BITS, min(int(wanted), cap_bytes * 8))
    return (bits + 63) // 64 * 64


def least_items(bits: int) -> int:
    """The fewest items to tell Spark a filter of ``bits`` holds: with k = round(bits/n · ln 2), one expected key
    in 64 Kbit means 45,000 hash functions per probe (docs/decisions.md), while beyond
    MAX_HASH_FUNCTIONS the false-positive rate is already below 2^-16."""
    return max(math.ceil(bits * math.log(2) / MAX_HASH_FUNCTIONS), 1)


def bloom_items(bits: int, fpp: float) -> int:
    """The number of keys a filter of ``bits`` holds at false-positive rate ``fpp`` (``bloom_bits`` inverted).

    Spark picks a filter's number of hash functions from the item count it is given, k = round(bits/n · ln 2):
    given a loose upper bound (all 6 M lineitem rows for 0.5 M distinct keys) it picks k = 1 and the filter
    passes ~10 % of absent keys instead of 1 %."""
    return max(int(bits * (math.log(2) ** 2) / -math.log(fpp)), 1)


# A nearer stage's summary keeping at least this share of what a farther one keeps prunes nothing worth a write.
NEARER_KEEPS_AS_MUCH = 0.9


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


class Strategy:
    name = "off"
    kind: SummaryKind = "bloom"

    def filter_bits(self, planner: IpPlanner, stage: Stage, column: str) -> int | None:
        """The Bloom filter size this strategy chose for a summary (None: the planner's sizing rule)."""
        return None

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


class Adaptive(Strategy):
    """Algorithms 1–2 with the benefit check B > β (eq. 1 and the terms aipq adds, ``estimator/benefit.py``)."""

    name = "adaptive"

    def creation(self, planner, stage):
        chosen, benefit = [], 0.0
        for column in sorted({c.column for c in planner.candidates if c.producer == stage.id}):
            together = planner.creation_benefit(stage.id, column)
            best = planner.best_edge(stage.id, column)
            if together is not None and best is not None and together > planner.settings.beta:
                if stage.operator == "SCAN" and not planner.probed_when_planned(stage.id, column):
                    continue
                benefit += together
                chosen.append((column, f"may pay: its edges together B = {together:.3f} s > β = "
                                       f"{planner.settings.beta:g} s (best case; best edge with a "
                                       f"{best.filter_bytes:,} B filter)"))
        cost = planner.materialization_cost(stage)
        if chosen and cost > 0:  # adaptive staging fuses this stage unless its summaries pay for its write
            if benefit - cost <= planner.settings.beta:
                return []
            chosen = [(column, f"{reason}; with its stage's write ({cost:.3f} s) B = {benefit - cost:.3f} s")
                      for column, reason in chosen]
        return chosen

    def filter_bits(self, planner, stage, column):
        if planner.settings.bloom_size > 0:
            return None
        best = planner.best_edge(stage.id, column)
        # a pre-pass's keys are estimated before any stage ran, from filters and summaries on other tables: never
        # below bloom_bits' floor there, as a filter sized to a key estimate several times too low saturates and
        # keeps every row, while 64 Kbit cost next to nothing to build, send and probe (docs/decisions.md)
        least = MIN_BLOOM_BITS if stage.operator == "SCAN" else 64
        return None if best is None else max(best.filter_bytes * 8, least)

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        estimate = planner.estimate(candidate, built)
        if estimate is None or estimate.total <= planner.settings.beta:
            return None
        return f"{candidate.relation}, B = {estimate.total:.3f} s > β = {planner.settings.beta:g} s"

    def rejection(self, planner, candidate, built):
        if built is None:
            return "summary not built (no edge it serves was estimated to pay)"
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return f"summary {built.size_bytes:,} B > α"
        estimate = planner.estimate(candidate, built)
        if estimate is None:
            return "no estimate"
        return f"B = {estimate.total:.3f} s ≤ β = {planner.settings.beta:g} s"


class PredicateTransfer(Always):
    """Predicate transfer: every probe of the schedule ``ip/transfer.py`` laid out, each pass building the
    summaries of its join keys; no stage output builds one."""

    name = "transfer"

    def filter_bits(self, planner, stage, column):
        """Sized for the keys the pass is estimated to hold (``dag.transfer_keys``), with room for twice as many;
        the planner's sizing by the table's rows where the estimates are unknown or --bloom-size is set."""
        keys = planner.dag.transfer_keys.get((stage.id, column))
        if planner.settings.bloom_size > 0 or keys is None:
            return None
        cap = min(planner.settings.alpha, AUTO_BLOOM_CAP_BYTES)
        return bloom_bits(math.ceil(keys * TRANSFER_KEY_MARGIN), planner.settings.bloom_fpp, cap)

    def creation(self, planner, stage):
        columns = sorted({c.column for c in planner.candidates if c.producer == stage.id})
        return [(column, f"predicate transfer, {planner.dag.transfer_passes.get(stage.id, 'reading')} pass")
                for column in columns]

    def usage(self, planner, candidate, built):
        if built.size_bytes is not None and built.size_bytes > planner.settings.alpha:
            return None
        return "predicate transfer: " + ("a later pass over this table" if candidate.target.stage in
                                         planner.dag.transfer_passes else "the stage that reads this table")


class TransferOracle(PredicateTransfer):
    """The transfer schedule with exact key sets: the physical limit of its pruning."""

    name = "transfer-oracle"
    kind: SummaryKind = "exact"

    def usage(self, planner, candidate, built):
        return "predicate transfer with the exact key set"


_STRATEGIES: dict[str, type[Strategy]] = {"off": Strategy, "hip": Hip, "always": Always, "oracle": Oracle,
                                          "adaptive": Adaptive, "transfer": PredicateTransfer,
                                          "transfer-oracle": TransferOracle}


class IpPlanner:
    def __init__(self, dag: StageDag, settings: Settings,
                 expected_items: Callable[[int, str], int | None] | None = None,
                 estimator: EdgeEstimator | None = None, strategy: Strategy | None = None):
        if strategy is None and settings.ip not in _STRATEGIES:
            raise ValueError(f"unknown information passing strategy {settings.ip!r}")
        self.dag = dag
        self.settings = settings
        self.strategy = strategy or _STRATEGIES[settings.ip]()
        self.candidates = (transfer_candidates(dag) if isinstance(self.strategy, PredicateTransfer)
                           else find_candidates(dag, surely_written(dag, settings)) if self.strategy.name != "off"
                           else [])
        self.used: set[tuple[int, str, tuple]] = set()  # (producer, column, target key) of summaries in use
        self._planned: dict[int, frozenset[str]] = {}
        self._planned_as_before: dict[int, frozenset[str]] = {}  # the same, nearer stages always preferred
        self._asking_written = False  # inside _written_for_others: nearer stages always preferred
        self.expected_items = expected_items or (lambda stage, column: None)
        self.estimator = estimator
        self._estimates: dict[tuple, Estimate | None] = {}
        self._surviving: list[tuple[int, int, float]] = []  # (target stage, join stage, surviving share) per use
        self._place_shares: dict[tuple, float] = {}  # (stage, place, node) → share its summaries in use keep
        self._built: dict[tuple[int, str], BuiltInfo] = {}  # summaries built so far (Algorithm 1 reads them)
        self._probed_when_planned: frozenset[tuple[int, str]] | None = None  # see probed_when_planned
        self._looking_ahead = False  # this planner is another's look-ahead: pre-passes decided on the best case

    def share_after_pruning(self, stage_id: int) -> float:
        """Of what ``stage_id``'s subplan wrote when nothing pruned it (the repository's figures), the share
        expected now: the product of the surviving shares of the summaries already chosen in it or below it
        whose join lies further on (independent keys; rows assumed to carry their share up to that join).
        A summary whose join is this stage or one below it removes only rows that join drops anyway: Q18's
        ``l_orderkey`` summary on orders leaves S2's output as it was, Q7's nation summary on supplier in S1
        shrinks the outputs of S1 to S3, up to nation's join in S4."""
        below = self._stages_up_to(stage_id)
        share = 1.0
        for target_stage, join_stage, survive in self._surviving:
            if target_stage in below and join_stage not in below:
                share *= survive
        return share

    def share_within(self, stage_id: int) -> float:
        """Of ``stage_id``'s rows as its plan estimates them (its inputs' rows already pruned as they are), the
        share expected once the summaries chosen at its own places probe: those whose join lies further on
        (``share_after_pruning``'s rule, for this stage alone). Q21's l1, cut into a stage of its own
        (``ip/written_scans.py``), keeps only the rows the Saudi suppliers' summary lets through."""
        below = self._stages_up_to(stage_id)
        share = 1.0
        for target_stage, join_stage, survive in self._surviving:
            if target_stage == stage_id and join_stage not in below:
                share *= survive
        return share

    def share_at_place(self, target: Target, anticipated: tuple[tuple[tuple, float], ...] = ()) -> float:
        """The share of ``target``'s rows that the summaries already chosen at the same place keep (the product
        of their surviving shares: independent keys), times what ``anticipated`` summaries will keep there. A
        second summary probes only what the first let through, so its Δ and probe cost are of those rows: Q8's
        ``o_orderkey`` summary on lineitem after the ``p_partkey`` one that keeps 1% of it."""
        place = _place(target)
        return self._place_shares.get(place, 1.0) * dict(anticipated).get(place, 1.0)

    def pruning(self, anticipated: tuple[tuple[tuple, float], ...] = ()) -> Pruning:
        return Pruning(after=self.share_after_pruning, at=lambda target: self.share_at_place(target, anticipated),
                       within=self.share_within)

    def _stages_up_to(self, stage_id: int) -> set[int]:
        """The stage and every stage whose output reaches it."""
        found, stack = set(), [stage_id]
        while stack:
            current = stack.pop()
            if current not in found:
                found.add(current)
                stack.extend(self.dag.dependency.get(current, []))
        return found

    def estimate(self, candidate: Candidate, built: BuiltInfo | None,
                 anticipated: tuple[tuple[tuple, float], ...] = ()) -> Estimate | None:
        """The benefit of an edge: its own, plus the largest saving of the places further on its path that it
        makes redundant (pruning supplier before a join also prunes the join's output, and what reads it).
        ``anticipated``: (place, share) that summaries already built will keep there before this one probes."""
        own = self._own_estimate(candidate, built, anticipated)
        if own is None:
            return None
        covered = [c for c in self.candidates if (c.producer, c.column) == (candidate.producer, candidate.column)
                   and candidate.target.key in c.covered_by]
        # the places further on hold what this place lets through: what anticipated summaries leave here
        left_here = dict(anticipated).get(_place(candidate.target), 1.0)
        further = [e.savings * left_here for c in covered
                   for e in [self._own_estimate(c, built, anticipated)] if e is not None]
        return own.with_downstream(max(further, default=0.0))

    def _own_estimate(self, candidate: Candidate, built: BuiltInfo | None,
                      anticipated: tuple[tuple[tuple, float], ...]) -> Estimate | None:
        """The estimator's figure for an edge at its own place, once per edge, state of its summary and pruning
        chosen so far (which changes what the producer and a probed stage output hold)."""
        if self.estimator is None:
            return None
        key = (candidate.producer, candidate.column, candidate.target.key, built, len(self._surviving), anticipated)
        if key not in self._estimates:
            self._estimates[key] = self.estimator(candidate, built, self.pruning(anticipated))
        return self._estimates[key]

    def creation_benefit(self, producer: int, column: str) -> float | None:
        """Algorithm 1's B for a summary not yet built: what its edges save together, less its one-time cost
        (building it, and a filtered table's pre-pass) counted once, not once per edge. An edge that a deeper
        edge of the same summary makes redundant is counted in that edge's downstream saving instead."""
        edges = [c for c in self.candidates if (c.producer, c.column) == (producer, column)]
        keys = {c.target.key for c in edges}
        value, one_time, known = 0.0, 0.0, False
        for candidate in edges:
            if any(key in keys for key in candidate.covered_by) or self._left_to_nearer(candidate):
                continue
            estimate = self._creation_estimate(candidate)
            if estimate is None:
                continue
            known = True
            one_time = max(one_time, estimate.one_time)
            value += max(estimate.total + estimate.one_time, 0.0)
        return value - one_time if known else None

    def _left_to_nearer(self, candidate: Candidate) -> bool:
        """Whether a stage nearer on the edge's path is to build a summary for the same place (a subset of the
        same keys, probed there first: ``usages``), so that this edge would not be probed. Q3's orders pre-pass
        builds nothing for lineitem where S1, orders joined with customer, writes its own ``o_orderkey`` summary.
        A nearer stage written only for its summary that is estimated to keep as much as this one does not count:
        this stage builds it (Q10's filtered orders, written for their ``o_custkey`` summary, build the
        ``o_orderkey`` one too, and their join with customer, which keeps every order, is not written for it)."""
        return any(other.producer in candidate.nearer and other.target.key == candidate.target.key
                   and other.column in self._planned_columns(other.producer)
                   and self._nearer_earns_its_write(other, candidate) for other in self.candidates)

    def _nearer_earns_its_write(self, nearer: Candidate, candidate: Candidate) -> bool:
        """Whether the nearer stage's summary is worth its stage's write over ``candidate``'s: it is written
        anyway, ``candidate``'s producer is not (a pre-pass, or a stage written for no other summary of its own),
        or the nearer one is estimated to keep fewer rows (or either is not estimated)."""
        if (self.materialization_cost(self.dag.stage(nearer.producer)) <= 0.0
                or self.dag.stage(candidate.producer).operator == "SCAN"
                or not self._written_for_others(candidate.producer, candidate.column)):
            return True
        mine, theirs = self.estimate(candidate, None), self.estimate(nearer, None)
        if mine is None or theirs is None:
            return True
        return theirs.survive < NEARER_KEEPS_AS_MUCH * mine.survive

    def _written_for_others(self, producer: int, column: str) -> bool:
        """Whether ``producer``'s output is written whatever becomes of its ``column`` summary: it is never fused,
        or the strategy builds another summary there with nearer stages always preferred."""
        if self.materialization_cost(self.dag.stage(producer)) <= 0.0:
            return True
        if self._asking_written:
            return False
        self._asking_written = True
        try:
            return bool(self._planned_columns(producer) - {column})
        finally:
            self._asking_written = False

    def _planned_columns(self, stage_id: int) -> frozenset[str]:
        """The columns a stage is to build summaries of, asked once per ``creations``: the question nests along a
        path (a nearer stage's own edges ask about stages nearer still), and asked afresh at each level it grows
        exponentially with the path's length (TPC-DS Q64's bushy plan)."""
        planned = self._planned_as_before if self._asking_written else self._planned
        if stage_id not in planned:
            stage = self.dag.stage(stage_id)
            planned[stage_id] = frozenset(column for column, _ in self.strategy.creation(self, stage))
        return planned[stage_id]

    def probed_when_planned(self, producer: int, column: str) -> bool:
        """Whether the whole query's plan (``plan_all``, as explain shows it: each summary priced on what the
        summaries chosen before it leave) probes ``producer.column`` anywhere. A summary pre-pass is a Spark job
        of its own, so it runs only for a summary that plan probes, not for one whose edges pay in the best case
        alone: Q21's orders pre-pass pays against l1's rows as they are before the Saudi suppliers' summary, chosen
        beside it, prunes them.
        Planned once per planner; inside that plan every pre-pass is decided on its best case."""
        if self._looking_ahead:
            return True
        if self._probed_when_planned is None:
            ahead = IpPlanner(self.dag, self.settings, self.expected_items, self.estimator, self.strategy)
            ahead._looking_ahead = True
            self._probed_when_planned = frozenset((use.producer, use.column) for decisions in ahead.plan_all()
                                                  for use in decisions.uses)
        return (producer, column) in self._probed_when_planned

    def best_edge(self, producer: int, column: str) -> Estimate | None:
        """The most beneficial edge a summary of ``producer.column`` would serve, before it is built."""
        estimates = [e for c in self.candidates if (c.producer, c.column) == (producer, column)
                     for e in [self._creation_estimate(c)] if e is not None]
        return max(estimates, key=lambda e: e.total, default=None)

    def _creation_estimate(self, candidate: Candidate) -> Estimate | None:
        """An edge of a summary not yet built, priced on what its place will hold once the summaries already
        built probe it there first: their edges to the same place that clear β and are estimated better (Algorithm
        2 takes the best first). Q8's orders pre-pass builds no ``o_orderkey`` summary for lineitem once the
        ``p_partkey`` one, built before it, is to keep 1% of lineitem."""
        alone = self.estimate(candidate, None)
        if alone is None or not self._built:
            return alone
        place = _place(candidate.target)
        share = 1.0
        for other in self.candidates:
            info = self._built.get((other.producer, other.column))
            if (info is None or _place(other.target) != place or (other.producer, other.column, other.target.key)
                    in self.used or (other.producer, other.column) == (candidate.producer, candidate.column)):
                continue
            estimate = self.estimate(other, info)
            if estimate is not None and estimate.total > self.settings.beta and estimate.total >= alone.total:
                share *= estimate.survive
        if share >= 1.0:
            return alone
        return self.estimate(candidate, None, ((place, share),))

    def bloom_size(self, stage: int, column: str) -> tuple[int, int | None]:
        if self.settings.bloom_size > 0:
            return self.settings.bloom_size * 8, None
        cap = min(self.settings.alpha, AUTO_BLOOM_CAP_BYTES)
        expected = self.expected_items(stage, column)
        if expected is None:
            return cap * 8, None
        return bloom_bits(expected, self.settings.bloom_fpp, cap), expected

    def materialization_cost(self, stage: Stage) -> float:
        """What writing ``stage``'s output costs beyond fusing it into its consumer: 0 where it is written anyway
        (``ip/staging.py``)."""
        if self.estimator is None or not may_fuse(self.dag, stage, self.settings):
            return 0.0
        return self.estimator.materialization_seconds(stage.id)

    def creations(self, stage: Stage) -> list[SummaryBuild]:
        """Algorithm 1: the summaries ``stage`` builds while it writes its output."""
        if not builds_summaries(stage, self.settings):
            return []
        self._planned, self._planned_as_before = {}, {}  # the estimates behind them change as stages run
        builds = []
        for column, reason in self.strategy.creation(self, stage):
            if self.strategy.kind == "bloom":
                bits, expected = self.bloom_size(stage.id, column)
                chosen = self.strategy.filter_bits(self, stage, column)
                if chosen is not None:
                    bits = chosen
                if bits // 8 > self.settings.alpha:
                    continue  # no later stage could load it
                bits = min(bits, loadable_bits(self.settings.alpha))  # sized at α: its header must fit too
                best = self.best_edge(stage.id, column) if self.estimator else None
                distinct = best.expected_keys if best is not None else None
                if distinct:  # an estimate of the keys themselves: size and hash functions as the estimator assumed
                    expected = max(int(distinct), 1)
                else:  # an upper bound: hash functions for the keys this size holds at the target rate
                    expected = min(expected or bits, bloom_items(bits, self.settings.bloom_fpp))
                expected = max(expected, least_items(bits))
                builds.append(SummaryBuild(stage.id, column, "bloom", bits, expected, reason,
                                           best.as_dict() if best is not None else None))
            else:
                builds.append(SummaryBuild(stage.id, column, self.strategy.kind, None, None, reason))
        return builds

    def usages(self, stage: Stage, built: dict[tuple[int, str], BuiltInfo]) -> tuple[list[SummaryUse],
                                                                                      list[Rejected]]:
        """Algorithm 2: the earlier summaries ``stage`` loads, and where it probes them."""
        uses, rejected = [], []
        mine = [c for c in self.candidates if c.target.stage == stage.id]
        # inputs first: pruning them makes pruning the same stage's output redundant; at one place the edge
        # estimated best first, as the others are then estimated on what it lets through
        # (a nearer producer's summary, a subset of the same keys, before its producers')
        for candidate in sorted(mine, key=lambda c: (c.target.place == "output", len(c.nearer),
                                                     -self._standalone(c, built))):
            deeper = [key for key in candidate.covered_by if (candidate.producer, candidate.column, key) in self.used]
            if deeper:
                rejected.append(Rejected(candidate, "redundant: the same summary already pruned this data "
                                                    "earlier on its path"))
                continue
            if any(producer in candidate.nearer and key == candidate.target.key for producer, _, key in self.used):
                rejected.append(Rejected(candidate, "redundant: a summary of a stage nearer on its path, a subset "
                                                    "of the same keys, already prunes it"))
                continue
            info = built.get((candidate.producer, candidate.column))
            reason = self.strategy.usage(self, candidate, info) if info is not None else None
            estimate = self.estimate(candidate, info) if self.estimator else None
            figures = estimate.as_dict() if estimate is not None else None
            if reason is None:
                rejected.append(Rejected(candidate, self.strategy.rejection(self, candidate, info), figures))
            else:
                uses.append(SummaryUse(candidate.producer, candidate.column, candidate.target,
                                       candidate.relation, reason, figures))
                self.used.add((candidate.producer, candidate.column, candidate.target.key))
                if estimate is not None:
                    self._surviving.append((candidate.target.stage, candidate.join_stage, estimate.survive))
                    place = _place(candidate.target)
                    self._place_shares[place] = self._place_shares.get(place, 1.0) * estimate.survive
        return uses, rejected

    def _standalone(self, candidate: Candidate, built: dict[tuple[int, str], BuiltInfo]) -> float:
        """An edge's estimated B before this stage's other edges are chosen (−∞ without an estimate)."""
        if self.estimator is None:
            return 0.0
        estimate = self.estimate(candidate, built.get((candidate.producer, candidate.column)))
        return estimate.total if estimate is not None else float("-inf")

    def has_edges(self, stage: Stage) -> bool:
        """Whether ``stage`` has an edge to decide on: a summary it could build or one it could probe."""
        return any(c.producer == stage.id or c.target.stage == stage.id for c in self.candidates)

    def decide(self, stage: Stage, built: dict[tuple[int, str], BuiltInfo]) -> StageDecisions:
        uses, rejected = self.usages(stage, built)
        self._built = built
        return StageDecisions(stage.id, self.creations(stage), uses, rejected,
                              self.share_after_pruning(stage.id), self.share_within(stage.id))

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


def _place(target: Target) -> tuple:
    """Where a summary probes, whatever its column: a stage input (its plan leaf) or the stage's output."""
    return (target.stage, target.place, target.node_id)
