"""The IP planner: before each stage is submitted, which summaries it builds (the paper's Algorithm 1,
SUMMARY_CREATION) and which earlier summaries it loads and where (Algorithm 2, SUMMARY_USAGE), with a reason
for each decision. The strategy (``ip/strategies.py``) chooses; the planner walks the stages, keeps what was
chosen and built so far, and asks the estimator (``ip/decisions.EdgeEstimator``) what each edge is worth."""

from __future__ import annotations

from collections.abc import Callable

from aipq.config import Settings
from aipq.ip.bloom_sizing import (
    AUTO_BLOOM_CAP_BYTES,
    bloom_bits,
    bloom_items,
    least_items,
    loadable_bits,
)
from aipq.ip.candidates import Candidate, Target, find_candidates
from aipq.ip.decisions import (
    BuiltInfo,
    EdgeEstimator,
    Estimate,
    Pruning,
    Rejected,
    StageDecisions,
    SummaryBuild,
    SummaryUse,
)
from aipq.ip.staging import builds_summaries, may_fuse, surely_written
from aipq.ip.strategies import STRATEGIES, PredicateTransfer, Strategy
from aipq.ip.transfer import transfer_candidates
from aipq.planner.stages import Stage, StageDag

# A nearer stage's summary keeping at least this share of what a farther one keeps prunes nothing worth a write.
NEARER_KEEPS_AS_MUCH = 0.9



class IpPlanner:
    def __init__(self, dag: StageDag, settings: Settings,
                 expected_items: Callable[[int, str], int | None] | None = None,
                 estimator: EdgeEstimator | None = None, strategy: Strategy | None = None):
        if strategy is None and settings.ip not in STRATEGIES:
            raise ValueError(f"unknown information passing strategy {settings.ip!r}")
        self.dag = dag
        self.settings = settings
        self.strategy = strategy or STRATEGIES[settings.ip]()
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

