"""Common subplans computed once (Hive's SharedWorkOptimizer): two subtrees of one query that read the same
tables with the same filters, joins and groups become one subplan, read by both through a renaming projection
as a CTE read twice is. TPC-H Q11 joins partsupp, supplier and the German nation under its GROUP BY and again
under the scalar subquery's total; shared, partsupp is read once and its German rows are written for both.

Two subtrees match when their signatures are equal: the operator, its parameters and its children's
signatures, with every column named by where it comes from (a table column by its side in the subtree's joins
and its name in the table, a computed column by its expression) instead of by its internal name. Which columns
a scan reads, which items a projection computes and which aggregates a GROUP BY computes are left out of it:
the shared subplan computes the union, and each reader picks its own.

The stage cutter makes a shared subplan one stage (``planner/stages.cut_stages``: a GROUP BY or repartition
join with several parents is one already; a map-side pipeline is cut for it), and adaptive staging writes a
stage that several stages read (``ip/staging.py``). So it is shared only where that pays (``SharingCosting``):
the bytes of its tables' columns read once less, against a job of its own and its output written once and read
by each reader.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from aipq.files import table_bytes
from aipq.planner.join_order import JoinCosting
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    Node,
    Project,
    Scan,
    col,
    replace_children,
)
from aipq.planner.normalize import nondeterministic

Tokens = dict[str, str]  # internal column name → where it comes from, relative to a node
COLUMN_BYTES = 8  # a written column's value, as the estimator prices a stage output's row (its FIXED_WIDTH)


@dataclass(frozen=True)
class SharingCosting:
    join: JoinCosting | None  # None: no statistics to price with (nothing is shared)
    always: bool = False  # share every match, paying or not (``--share-subplans always``)


@dataclass(frozen=True)
class Signed:
    signature: str  # interned: equal for subtrees that compute the same rows
    tokens: Tokens
    size: int  # nodes in the subtree
    reads_table: bool


def share_subplans(root: Node, costing: SharingCosting, notes: list[str]) -> tuple[Node, frozenset[int]]:
    """``root`` with each paying set of matching subtrees replaced by reads of one shared subplan, and the node
    ids of the shared subplans; what was shared is appended to ``notes``."""
    signer = _Signer()
    signer.visit(root)
    signed = signer.signed
    replacements: dict[int, Node] = {}
    shared: set[int] = set()
    covered: set[int] = set()
    for group in _matches(root, signed):
        group = _apart([node for node in group if id(node) not in covered])
        if len(group) < 2 or not _pays(group, costing):
            continue
        merged, maps = _merge(group, signed)
        for node, names in zip(group, maps):
            replacements[id(node)] = Project(merged, tuple((name, col(names[name])) for name in node.output))
            covered.update(id(sub) for sub in node.walk())
        shared.add(id(merged))
        notes.append(f"{_describe(merged)} computed once for {len(group)} readers")
    if not replacements:
        return root, frozenset()
    return _replaced(root, replacements), frozenset(shared)


# ---- signatures ----------------------------------------------------------------------------------------------
class _Signer:
    """The signature of every subtree of one plan. Tokens and signatures are interned as short names, so that
    each stays the size of one operator's parameters however deep the plan (spelled out, a column's token would
    repeat the expressions of every projection it passed through)."""

    def __init__(self) -> None:
        self.names: dict[object, str] = {}
        self.signed: dict[int, Signed | None] = {}

    def intern(self, value: object) -> str:
        return self.names.setdefault(value, f"#{len(self.names)}")

    def visit(self, node: Node) -> Signed | None:
        if id(node) not in self.signed:
            children = [self.visit(child) for child in node.children]
            self.signed[id(node)] = None if any(c is None for c in children) else self.sign(node, children)
        return self.signed[id(node)]

    def sign(self, node: Node, children: list[Signed]) -> Signed | None:
        size = 1 + sum(c.size for c in children)
        if isinstance(node, Scan):
            tokens = {name: source for name, source in node.columns + node.filter_only}
            filters = _canonical_all(node.filters, tokens)
            if filters is None:
                return None
            return Signed(self.intern(("scan", node.table, tuple(sorted(filters)), node.all_partitions)), tokens,
                          size, True)
        if isinstance(node, Filter):
            condition = _canonical(node.condition, children[0].tokens)
            if condition is None:
                return None
            return replace(children[0], signature=self.intern(("filter", condition, children[0].signature)),
                           size=size)
        if isinstance(node, Join):
            return self.sign_join(node, children[0], children[1], size)
        if isinstance(node, Project):
            items = _canonical_all([e for _, e in node.items], children[0].tokens)
            if items is None:
                return None
            tokens = {name: self.intern(("p", text)) for (name, _), text in zip(node.items, items)}
            return Signed(self.intern(("project", children[0].signature)), tokens, size, children[0].reads_table)
        if isinstance(node, Aggregate):
            return self.sign_aggregate(node, children[0], size)
        return None  # windows, unions, sorts, limits, values, stage reads: not shared

    def sign_join(self, join: Join, left: Signed, right: Signed, size: int) -> Signed | None:
        tokens = {name: self.intern(("L", token)) for name, token in left.tokens.items()}
        tokens.update({name: self.intern(("R", token)) for name, token in right.tokens.items()})
        if any(key not in tokens for key in join.left_keys + join.right_keys):
            return None
        keys = tuple((tokens[lk], tokens[rk]) for lk, rk in zip(join.left_keys, join.right_keys))
        residual = _canonical(join.residual, tokens) if join.residual is not None else ""
        if residual is None:
            return None
        signature = ("join", join.kind, join.physical, join.broadcast_side, join.null_safe, keys, residual,
                     left.signature, right.signature)
        return Signed(self.intern(signature), tokens, size, left.reads_table or right.reads_table)

    def sign_aggregate(self, aggregate: Aggregate, child: Signed, size: int) -> Signed | None:
        groups = _canonical_all([e for _, e in aggregate.groups], child.tokens)
        aggregates = _canonical_all([e for _, e in aggregate.aggregates], child.tokens)
        if groups is None or aggregates is None:
            return None
        tokens = {name: self.intern(("g", text)) for (name, _), text in zip(aggregate.groups, groups)}
        tokens.update({name: self.intern(("a", text)) for (name, _), text in zip(aggregate.aggregates, aggregates)})
        sets = None if aggregate.grouping_sets is None else tuple(
            tuple(tokens[name] for name in grouping_set) for grouping_set in aggregate.grouping_sets)
        signature = self.intern(("aggregate", tuple(groups), sets, child.signature))
        return Signed(signature, tokens, size, child.reads_table)


def _canonical(expression: exp.Expression, tokens: Tokens) -> str | None:
    """The expression's text with each column named by its token; None if it reads a column from outside or is
    not deterministic (two evaluations of ``rand()`` differ)."""
    if nondeterministic(expression):
        return None
    if any(c.name not in tokens for c in expression.find_all(exp.Column)):
        return None
    return _renamed(expression, tokens).sql(dialect="spark", copy=False)  # a copy of its own: no second one


def _canonical_all(expressions, tokens: Tokens) -> list[str] | None:
    texts = [_canonical(e, tokens) for e in expressions]
    return None if any(t is None for t in texts) else texts  # type: ignore[return-value]


# ---- matches and their price -------------------------------------------------------------------------------
def _matches(root: Node, signed: dict[int, Signed | None]) -> list[list[Node]]:
    """Sets of distinct subtrees with equal signatures that read a table, largest subtrees first."""
    by_signature: dict[str, list[Node]] = {}
    for node in root.walk():
        sign = signed.get(id(node))
        if sign is not None and sign.reads_table:
            by_signature.setdefault(sign.signature, []).append(node)
    groups = [nodes for nodes in by_signature.values() if len(nodes) > 1]
    return sorted(groups, key=lambda nodes: -signed[id(nodes[0])].size)  # type: ignore[union-attr]


def _apart(group: list[Node]) -> list[Node]:
    """The subtrees of a match that share no node with an earlier one: two reads of one CTE are one subplan
    already, and sharing them again would read nothing less."""
    kept: list[Node] = []
    seen: set[int] = set()
    for node in group:
        ids = {id(sub) for sub in node.walk()}
        if not ids & seen:
            kept.append(node)
            seen |= ids
    return kept


def _pays(group: list[Node], costing: SharingCosting) -> bool:
    """The bytes of its tables' columns read once per extra reader, against a job of its own and the subplan's
    output written once and read by each reader (``JoinCosting``'s unit costs per byte)."""
    if costing.always:
        return True
    join = costing.join
    if join is None:
        return False
    first = group[0]
    rows = join.estimates.rows(first)
    scanned = [_scan_bytes(scan, join) for scan in first.walk() if isinstance(scan, Scan)]
    if rows is None or any(size is None for size in scanned):
        return False
    readers = len(group)
    output = rows * COLUMN_BYTES * max(len(node.output) for node in group)
    saved = (readers - 1) * sum(scanned) * join.read_byte_seconds  # type: ignore[arg-type]
    paid = join.stage_seconds + output * (join.written_byte_seconds + (readers - 1) * join.read_byte_seconds)
    return saved > paid


def _scan_bytes(scan: Scan, join: JoinCosting) -> float | None:
    """The bytes of the columns a scan reads: its table's files in the share of its columns (parquet and ORC
    read a column's pages alone)."""
    size = table_bytes(join.sizes, scan.table)
    if size is None:
        return None
    return size * min(len(scan.columns) + len(scan.filter_only), len(scan.table.columns)) / max(
        len(scan.table.columns), 1)


# ---- the shared subplan ------------------------------------------------------------------------------------
def _merge(nodes: list[Node], signed: dict[int, Signed | None]) -> tuple[Node, list[dict[str, str]]]:
    """One subplan computing what each of ``nodes`` (equal signatures) computes, and per node a map from its
    output names to the subplan's. The first node's names are kept; the others' extra columns keep theirs."""
    first = nodes[0]
    if isinstance(first, Scan):
        return _merge_scans(nodes)  # type: ignore[arg-type]
    merged_children = [_merge([node.children[i] for node in nodes], signed) for i in range(len(first.children))]
    children = tuple(child for child, _ in merged_children)
    below = [{k: v for _, maps in merged_children for k, v in maps[j].items()} for j in range(len(nodes))]
    if isinstance(first, Project):
        items, maps = _union_items(nodes, [n.items for n in nodes], below, signed)  # type: ignore[attr-defined]
        return Project(children[0], items), maps
    if isinstance(first, Aggregate):
        aggregates, maps = _union_items(nodes, [n.aggregates for n in nodes], below, signed)  # type: ignore
        for j, node in enumerate(nodes):
            maps[j].update(_by_token(node, first, signed, [n for n, _ in node.groups]))  # type: ignore
        return replace(first, child=children[0], aggregates=aggregates), maps
    return replace_children(first, children), below


def _merge_scans(scans: list[Scan]) -> tuple[Scan, list[dict[str, str]]]:
    first = scans[0]
    by_source = {source: name for name, source in first.columns}
    columns, filter_only = list(first.columns), dict(first.filter_only)
    only_names = {source: name for name, source in first.filter_only}
    maps = []
    for scan in scans:
        names = {}
        for name, source in scan.columns:
            if source not in by_source:
                kept = only_names.pop(source, name)  # read for a filter only: now output too
                filter_only.pop(kept, None)
                by_source[source] = kept
                columns.append((kept, source))
            names[name] = by_source[source]
        maps.append(names)
    return replace(first, columns=tuple(columns), filter_only=tuple(filter_only.items())), maps


def _union_items(nodes: list[Node], item_lists: list[tuple[tuple[str, exp.Expression], ...]],
                 below: list[dict[str, str]], signed: dict[int, Signed | None]):
    """The first node's items and every other node's items it lacks (rewritten over the merged child's names),
    and per node its item names' map onto them."""
    merged = list(item_lists[0])
    by_token: dict[str, str] = {}
    maps: list[dict[str, str]] = []
    for j, (node, items) in enumerate(zip(nodes, item_lists)):
        tokens = signed[id(node)].tokens  # type: ignore[union-attr]
        names = {}
        for name, expression in items:
            token = tokens[name]
            if token not in by_token:
                by_token[token] = name
                if j > 0:
                    merged.append((name, _renamed(expression, below[j])))
            names[name] = by_token[token]
        maps.append(names)
    return tuple(merged), maps


def _by_token(node: Node, first: Node, signed: dict[int, Signed | None], names: list[str]) -> dict[str, str]:
    tokens, first_tokens = signed[id(node)].tokens, signed[id(first)].tokens  # type: ignore[union-attr]
    first_by_token = {token: name for name, token in first_tokens.items()}
    return {name: first_by_token[tokens[name]] for name in names}


def _renamed(expression: exp.Expression, names: dict[str, str]) -> exp.Expression:
    def rename(node: exp.Expression) -> exp.Expression:
        return col(names[node.name]) if isinstance(node, exp.Column) and node.name in names else node

    return expression.copy().transform(rename, copy=False)


def _replaced(root: Node, replacements: dict[int, Node]) -> Node:
    memo: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) in replacements:
            return replacements[id(node)]
        if id(node) not in memo:
            children = tuple(visit(child) for child in node.children)
            changed = any(a is not b for a, b in zip(children, node.children))
            memo[id(node)] = replace_children(node, children) if changed else node
        return memo[id(node)]

    return visit(root)


def _describe(node: Node) -> str:
    tables = sorted({scan.table.qualified_name for scan in node.walk() if isinstance(scan, Scan)})
    return " ⋈ ".join(tables)
