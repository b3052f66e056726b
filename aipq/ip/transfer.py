"""Predicate transfer over the join graph (Yang, Zhao, Yu, Koutris, CIDR 2024): before any join runs, each
table's Bloom filters travel along the query's join graph, forward from the smallest table to the largest and
then backward, so that a filter on one table reaches every table it joins to, however many hops away.

In the stage DAG a transfer is a run of SCAN passes (``ip/scan_summaries.py``'s pre-pass, generalized): a pass
reads one table with its local filters, probes it with the summaries of its neighbours' passes that ran before
it, and builds a summary of each of its join keys while its rows go to Spark's ``noop`` sink. The stages that
then read a table probe it with its neighbours' last summaries.

Which table may prune which is the admissibility of ``ip/candidates.py``: an edge from table S's column s to
table T's column t exists when S's filtered scan could prune T's scan there (inner and semi joins, through key
equivalence classes; never into an outer join's preserved side or an anti join's right side). Chaining edges is
safe: a pass keeps every row of its table that reaches the result (by induction over the passes), so its
summary holds every key a result row needs.

The schedule, over the tables ordered by their estimated rows after local filters (a pass reads only a table
that a filtered scan's pre-pass may read, ``ip/scan_summaries.scan_summary_bound``: re-reading the largest
tables costs as much as the query, docs/decisions.md):

- forward: a table is passed when it is reduced (it has filters, or an earlier neighbour's pass is applied to
  it) and some neighbour can use its keys; its pass probes the passes of its earlier neighbours;
- backward, from the second largest down: a table is passed again when a later neighbour's pass carries a
  filter its own pass has not seen, probing the last pass of every neighbour (the larger ones' backward or
  forward pass, the smaller ones' forward pass);
- the reading stages: each scan probes the last pass of every neighbour.

A pass estimated to keep more than ``--transfer-survivors`` of its table's rows (35%) is not made: its filter
would let most keys through (RPT+'s rule, ``_PassKeys.worth_a_pass``).

A probe is placed only where the pass it reads carries some filter other than the probed table's own: without
one, it could remove only rows with no match at all, which a join of foreign keys does not have.

Each pass's filters are sized for the keys it is estimated to hold (``dag.transfer_keys``), not for its whole
table: a pass keeps at most its table's rows after its filters, and at most, for each probe, the keys of the
probing pass times the rows per key of the probed column. A filter sized for the table costs its size in every
plan that carries it (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from aipq.files import Sizes, table_bytes
from aipq.ip.candidates import PRUNING_JOINS, Candidate, CandidateFinder, Target, all_nodes
from aipq.ip.scan_stages import with_scan_stages
from aipq.planner.logical import Join, Node, Scan
from aipq.planner.stages import StageDag, Transfer

TRANSFER_STRATEGIES = ("transfer", "transfer-oracle")


@dataclass(frozen=True)
class Edge:
    """Table ``source``'s column ``column`` may prune table ``target``'s column ``target_column``."""

    source: int  # Scan node id
    column: str
    target: int
    target_column: str
    target_stage: int  # the stage that reads the target scan
    label: str
    join_stage: int
    join_keys: tuple[str, str]


class _Admissible(CandidateFinder):
    """Every admissible edge between tables: including those a map-side join in the same stage makes useless as
    a probe of the reading stage (a transfer still carries the keys on to other tables), and those a stage
    output on the path would serve instead (a transfer runs before any stage)."""

    prefer_nearest = False

    def joined_already(self, producer, target, stage, join) -> bool:
        return False


def joined_scans(dag: StageDag) -> list[Scan]:
    """Each scan of a stage that joins (inner or semi) and that the DAG reads in that one place only. A scan
    shared by two places (a CTE read twice) is left out: a pass pruned for one place would carry a filter that
    does not hold for the other on to further tables."""
    found: dict[int, Scan] = {}
    uses: dict[int, int] = {}
    for stage in dag.stages:
        nodes = list(all_nodes(stage.plan))
        joins = any(isinstance(n, Join) and n.kind in PRUNING_JOINS for n in nodes)
        for node in nodes:
            if isinstance(node, Scan):
                uses[id(node)] = uses.get(id(node), 0) + 1
                if joins:
                    found.setdefault(id(node), node)
    return [scan for node_id, scan in found.items() if uses[node_id] == 1]


def admissible_edges(dag: StageDag, scans: list[Scan]) -> list[Edge]:
    """The join graph's directed edges between ``scans``: which table's keys may prune which table."""
    first = max(s.id for s in dag.stages) + 1
    stage_of = {id(scan): first + i for i, scan in enumerate(scans)}
    node_of = {stage_id: node_id for node_id, stage_id in stage_of.items()}
    trial = with_scan_stages(dag, [(stage_of[id(scan)], scan, scan.output) for scan in scans])
    trial = replace(trial, scan_sources=stage_of)
    edges: dict[tuple, Edge] = {}
    for candidate in _Admissible(trial).candidates():
        target = candidate.target
        source = node_of.get(candidate.producer)
        if (source is None or target.place != "input" or target.node_id not in stage_of
                or target.node_id == source or target.stage in node_of):
            continue
        edge = Edge(source, candidate.column, target.node_id, target.column, target.stage, target.label,
                    candidate.join_stage, candidate.join_keys)
        edges.setdefault((source, edge.column, edge.target, edge.target_column), edge)
    return list(edges.values())


RowEstimate = Callable[[Node], float | None]
DistinctEstimate = Callable[[Node, str], float | None]


def add_transfers(dag: StageDag, rows: RowEstimate, sizes: Sizes, max_bytes: int,
                  distinct: DistinctEstimate = lambda node, column: None,
                  table_rows: Callable[[Scan], float | None] = lambda scan: None,
                  survivors: float = 1.0) -> StageDag:
    """``dag`` with predicate transfer's passes run first, and its schedule in ``dag.transfers``. Only tables of
    at most ``max_bytes`` are read by a pass (the bound of a filtered scan's pre-pass): a larger one is read
    once, by the stage that joins it, where it is probed with its neighbours' last summaries. A pass estimated
    to keep more than ``survivors`` of its table's rows (``table_rows``) is not made (``_PassKeys.worth_a_pass``)."""
    scans = joined_scans(dag)
    edges = admissible_edges(dag, scans)
    if not edges:
        return dag
    order = _size_order(scans, rows, sizes)
    reduced = {id(scan) for scan in scans if scan.filters or scan.all_partitions}
    passable = {id(scan) for scan in scans if within_bound(table_bytes(sizes, scan.table), max_bytes)}
    by_id = {id(scan): scan for scan in scans}
    schedule = _Schedule(order, edges, reduced, passable, max(s.id for s in dag.stages) + 1,
                         _PassKeys(by_id, rows, distinct, table_rows, survivors))
    schedule.plan()
    if not schedule.passes:
        return dag
    passes = [(stage_id, by_id[node_id], schedule.columns(node_id)) for stage_id, node_id, _ in schedule.passes]
    new = with_scan_stages(dag, passes)
    return replace(new, transfers=tuple(schedule.transfers),
                   transfer_passes={stage_id: phase for stage_id, _, phase in schedule.passes},
                   transfer_keys=schedule.sizing.by_stage, transfer_rows=schedule.sizing.rows_by_stage,
                   scan_sources={node_id: stage_id for node_id, stage_id in schedule.last.items()})


def within_bound(size: int | None, max_bytes: int) -> bool:
    """Whether a pass may read a table of ``size`` bytes (one of unknown size is not read twice)."""
    return size is not None and size <= max_bytes


def _size_order(scans: list[Scan], rows: Callable[[Node], float | None], sizes: Sizes) -> list[int]:
    """Scan node ids from the smallest estimated output to the largest (files' bytes where rows are unknown;
    the written order breaks ties)."""
    def size(index_scan: tuple[int, Scan]) -> tuple[float, int]:
        index, scan = index_scan
        estimate = rows(scan)
        return (estimate if estimate is not None else float(table_bytes(sizes, scan.table) or 0), index)

    return [id(scan) for _, scan in sorted(enumerate(scans), key=size)]


class _PassKeys:
    """The keys each pass is estimated to hold per column, as its filters are sized (an upper bound where the
    estimates hold; None where they are unknown)."""

    def __init__(self, scans: dict[int, Scan], rows: RowEstimate, distinct: DistinctEstimate,
                 table_rows: Callable[[Scan], float | None] = lambda scan: None, survivors: float = 1.0):
        self.scans = scans
        self.rows = rows
        self.distinct = distinct
        self.table_rows = table_rows
        self.survivors = survivors
        self.latest: dict[tuple[int, str], float] = {}  # (scan node id, column) → keys of its latest pass
        self.by_stage: dict[tuple[int, str], float] = {}  # (pass stage id, column) → keys
        self.rows_by_stage: dict[int, float] = {}  # pass stage id → rows it keeps

    def add(self, stage_id: int, node_id: int, probes: list[Edge], columns: tuple[str, ...]) -> None:
        scan = self.scans[node_id]
        kept = self.pass_rows(scan, probes)
        if kept is not None:
            self.rows_by_stage[stage_id] = kept
        for column in columns:
            distinct = self.distinct(scan, column)
            keys = min(kept, distinct) if kept is not None and distinct is not None else kept
            if keys is None:
                self.latest.pop((node_id, column), None)
                continue
            self.latest[(node_id, column)] = self.by_stage[(stage_id, column)] = max(keys, 1.0)

    def worth_a_pass(self, node_id: int, probes: list[Edge]) -> bool:
        """Whether a pass with ``probes`` is estimated to remove enough of its table's rows to be worth a build:
        Robust Predicate Transfer's RPT+ builds no filter where more than about 35% of the rows survive (its keys
        then remove little from the tables they reach). Unknown estimates make the pass."""
        scan = self.scans[node_id]
        kept, whole = self.pass_rows(scan, probes), self.table_rows(scan)
        return kept is None or not whole or kept <= self.survivors * whole

    def pass_rows(self, scan: Scan, probes: list[Edge]) -> float | None:
        """At most the table's rows after its filters, and at most what each probe lets through: the probing
        pass's keys times the rows per key of the probed column."""
        rows = kept = self.rows(scan)
        if rows is None:
            return None
        for edge in probes:
            keys = self.latest.get((edge.source, edge.column))
            distinct = self.distinct(scan, edge.target_column)
            if keys is not None and distinct:
                kept = min(kept, keys * max(rows / distinct, 1.0))
        return kept


class _Schedule:
    """Builds the forward and backward passes and their probes over tables in ``order``."""

    def __init__(self, order: list[int], edges: list[Edge], filtered: set[int], passable: set[int],
                 first_stage: int, sizing: _PassKeys):
        self.order = order
        self.passable = passable  # tables a pass may read (the others are only probed where they are read)
        self.rank = {node_id: i for i, node_id in enumerate(order)}
        self.edges = edges
        self.next_stage = first_stage
        self.passes: list[tuple[int, int, str]] = []  # (stage id, scan node id, phase)
        self.last: dict[int, int] = {}  # scan node id → its latest pass's stage id
        self.transfers: list[Transfer] = []
        self.filtered = filtered  # tables whose scans drop rows of their own
        self.knows: dict[int, frozenset[int]] = {}  # table → the filtered tables whose filters its last pass carries
        self.sizing = sizing

    def into(self, node_id: int) -> list[Edge]:
        return [e for e in self.edges if e.target == node_id]

    def out_of(self, node_id: int) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id]

    def plan(self) -> None:
        for node_id in self.order:
            self.forward(node_id)
        for node_id in reversed(self.order[:-1]):
            self.backward(node_id)
        self.reading_stages()

    def useful(self, edge: Edge) -> bool:
        """Whether the source's last pass carries a filter other than the target's own (a filter reduces a
        table only through keys that do not match; a pass reduced by the target's filter alone removes from
        the target only rows that filter removes anyway, or keys with no match at all)."""
        return edge.source in self.last and bool(self.knows[edge.source] - {edge.target})

    def forward(self, node_id: int) -> None:
        earlier = [e for e in self.into(node_id) if self.useful(e)]
        if node_id not in self.passable or not (node_id in self.filtered or earlier) or not self.out_of(node_id):
            return
        if self.sizing.worth_a_pass(node_id, earlier):
            self.add_pass(node_id, "forward", earlier)

    def backward(self, node_id: int) -> None:
        """A second pass when a larger neighbour's pass carries filters this table's pass has not seen."""
        later = [e for e in self.into(node_id) if self.useful(e) and self.rank[e.source] > self.rank[node_id]]
        news = frozenset().union(*(self.knows[e.source] for e in later))
        if (node_id not in self.passable or not later or news <= self.knows.get(node_id, frozenset())
                or not self.out_of(node_id)):
            return
        probes = [e for e in self.into(node_id) if self.useful(e)]
        if self.sizing.worth_a_pass(node_id, probes):
            self.add_pass(node_id, "backward", probes)

    def add_pass(self, node_id: int, phase: str, probes: list[Edge]) -> None:
        stage_id = self.next_stage
        self.next_stage += 1
        self.transfers += [self.transfer(e, stage_id) for e in probes]
        self.passes.append((stage_id, node_id, phase))
        own = frozenset({node_id}) if node_id in self.filtered else frozenset()
        self.knows[node_id] = own.union(self.knows.get(node_id, frozenset()), *(self.knows[e.source] for e in probes))
        self.last[node_id] = stage_id
        self.sizing.add(stage_id, node_id, probes, self.columns(node_id))

    def reading_stages(self) -> None:
        """Each scan in the stages that read it, probed with its neighbours' last summaries."""
        for edge in self.edges:
            if self.useful(edge):
                self.transfers.append(self.transfer(edge, edge.target_stage))

    def transfer(self, edge: Edge, stage_id: int) -> Transfer:
        return Transfer(self.last[edge.source], edge.column, stage_id, edge.target, edge.target_column, edge.label,
                        edge.join_stage, edge.join_keys)

    def columns(self, node_id: int) -> tuple[str, ...]:
        """The columns a table's pass writes: the keys its summaries are of."""
        return tuple(dict.fromkeys(e.column for e in self.out_of(node_id)))


def transfer_candidates(dag: StageDag) -> list[Candidate]:
    """The schedule's probes as the IP planner's candidates (relation ``transfer``)."""
    return [transfer_candidate(t) for t in dag.transfers]


def transfer_candidate(transfer: Transfer) -> Candidate:
    """One probe of the schedule as an IP candidate (relation ``transfer``)."""
    return Candidate(transfer.producer, transfer.column,
                     Target(transfer.stage, "input", transfer.target_column, transfer.node_id, transfer.label),
                     "transfer", transfer.join_stage, transfer.join_keys)
