"""Column pruning: every operator outputs only what something above it reads.

This matters most at stage boundaries, where outputs are written to parquet and read back: a stage writes
exactly the columns its consumers use. Shared subplans get the union of what their parents need.
"""

from __future__ import annotations

from dataclasses import replace

from aipq.planner.logical import (
    Aggregate,
    Filter,
    Generate,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    Scan,
    Sort,
    Union,
    Window,
    col,
    refs,
)


def _parents_first(root: Node) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()

    def visit(node: Node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for child in node.children:
            visit(child)
        order.append(node)

    visit(root)
    return list(reversed(order))


def _keep(output: tuple[str, ...], needed: set[str]) -> list[str]:
    """Needed outputs in order; never none, since a relation without columns cannot be written."""
    kept = [name for name in output if name in needed]
    return kept or list(output[:1])


def _child_needs(node: Node, needed: set[str]) -> list[set[str]]:
    if isinstance(node, Filter):
        return [needed | refs(node.condition)]
    if isinstance(node, Project):
        keep = set(_keep(node.output, needed))
        return [set().union(*(refs(e) for n, e in node.items if n in keep))]
    if isinstance(node, Sort):
        return [needed | {k.column for k in node.keys}]
    if isinstance(node, Limit):
        return [set(needed)]
    if isinstance(node, Window):
        kept = [e for n, e in node.items if n in needed]
        return [(needed & set(node.child.output)).union(*(refs(e) for e in kept))]
    if isinstance(node, Aggregate):
        kept = [e for n, e in node.aggregates if n in needed]
        return [set().union(*(refs(e) for _, e in node.groups), *(refs(e) for e in kept))]
    if isinstance(node, Join):
        extra = set(node.left_keys) | set(node.right_keys) | refs(node.residual)
        return [(needed | extra) & set(c.output) for c in node.children]
    if isinstance(node, JoinBlock):
        extra = set().union(*(refs(c) for c in node.conditions))
        return [(needed | extra) & set(c.output) for c in node.children]
    if isinstance(node, Generate):
        return [(needed & set(node.child.output)) | refs(node.generator)]
    if isinstance(node, Union):
        positions = _union_positions(node, needed)
        return [{child.output[i] for i in positions} for child in node.inputs]
    return []


def _union_positions(node: Union, needed: set[str]) -> list[int]:
    kept = set(_keep(node.output, needed))
    return [i for i, name in enumerate(node.output) if name in kept]


def prune_columns(root: Node) -> Node:
    needed: dict[int, set[str]] = {id(root): set(root.output)}
    for node in _parents_first(root):
        for child, child_needed in zip(node.children, _child_needs(node, needed.get(id(node), set()))):
            needed.setdefault(id(child), set()).update(child_needed)

    memo: dict[int, Node] = {}

    def rebuild(node: Node) -> Node:
        if id(node) in memo:
            return memo[id(node)]
        want = needed.get(id(node), set(node.output))
        children = tuple(rebuild(c) for c in node.children)
        if isinstance(node, Scan):
            keep = set(_keep(node.output, want))
            filter_reads = set().union(*(refs(f) for f in node.filters)) - keep
            every = dict(node.columns + node.filter_only)
            new: Node = replace(
                node,
                columns=tuple((n, s) for n, s in node.columns if n in keep),
                filter_only=tuple((n, every[n]) for n in sorted(filter_reads)),
            )
        elif isinstance(node, Project):
            keep = set(_keep(node.output, want))
            new = Project(children[0], tuple((n, e) for n, e in node.items if n in keep))
        elif isinstance(node, Aggregate):
            aggregates = tuple((n, e) for n, e in node.aggregates if n in want)
            if not node.groups and not aggregates:
                aggregates = node.aggregates[:1]
            new = replace(node, child=children[0], aggregates=aggregates)
        elif isinstance(node, Join):
            new = replace(node, left=children[0], right=children[1])
            new = _trim(new, want)
        elif isinstance(node, JoinBlock):
            new = _trim(JoinBlock(children, node.conditions), want)
        elif isinstance(node, Window):
            items = tuple((n, e) for n, e in node.items if n in want)
            new = Window(children[0], items) if items else children[0]
        elif isinstance(node, Union):
            positions = _union_positions(node, want)
            inputs = tuple(_exactly(child, [original.output[i] for i in positions])
                           for child, original in zip(children, node.inputs))
            new = Union(inputs, tuple(node.names[i] for i in positions))
        elif not node.children:  # literal rows keep their columns
            new = node
        else:
            new = replace(node, child=children[0])
        memo[id(node)] = new
        return new

    return rebuild(root)


def _exactly(node: Node, names: list[str]) -> Node:
    """A union input must output exactly the kept positions, in order."""
    if list(node.output) == names:
        return node
    return Project(node, tuple((n, col(n)) for n in names))


def _trim(node: Node, want: set[str]) -> Node:
    keep = _keep(node.output, want)
    if len(keep) == len(node.output):
        return node
    return Project(node, tuple((n, col(n)) for n in keep))
