"""A canonical, data-aware name for a stage's subplan, so that a later query containing the same subplan (the
batch workloads of the paper) finds the size its output had.

The key covers the stage's operators and expressions and, through stage reads, every stage below it; tables
appear by data path. It does not cover the data itself: the repository keeps the fingerprints of the tables
read and ignores the entry once any of them changes.
"""

from __future__ import annotations

import dataclasses
import hashlib

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.planner.logical import Node, Scan
from aipq.planner.stages import StageDag, StageRead


def _canonical(node: object, dag: StageDag, memo: dict[int, str]) -> str:
    if isinstance(node, StageRead):
        if node.stage_id not in memo:
            memo[node.stage_id] = _canonical(dag.stage(node.stage_id).plan, dag, memo)
        return f"Read({memo[node.stage_id]};{','.join(node.columns)})"
    if isinstance(node, TableEntry):  # a partitioned table: the partitions read (pruning left) too
        return f"Table({node.path}{''.join(';' + path for path in node.data_paths()) if node.partitioned else ''})"
    if isinstance(node, exp.Expression):
        return node.sql(dialect="spark", normalize=True)
    if isinstance(node, (tuple, list)):
        return "[" + ",".join(_canonical(item, dag, memo) for item in node) + "]"
    if dataclasses.is_dataclass(node):
        parts = [f"{f.name}={_canonical(getattr(node, f.name), dag, memo)}" for f in dataclasses.fields(node)
                 if f.name != "alias"]  # an alias names a table in one query only
        return f"{type(node).__name__}({';'.join(parts)})"
    return repr(node)


def stage_plan_text(dag: StageDag, stage_id: int, memo: dict[int, str] | None = None) -> str:
    """The canonical text of a stage's subplan, stages below it included. ``memo`` keeps each stage's text for
    later calls on the same DAG (an estimator asks for several stages', which share the stages below them)."""
    memo = {} if memo is None else memo
    if stage_id not in memo:
        memo[stage_id] = _canonical(dag.stage(stage_id).plan, dag, memo)
    return memo[stage_id]


def stage_plan_key(dag: StageDag, stage_id: int, memo: dict[int, str] | None = None) -> str:
    return hashlib.sha256(stage_plan_text(dag, stage_id, memo).encode()).hexdigest()[:32]


def tables_under(dag: StageDag, stage_id: int) -> list[TableEntry]:
    """The base tables a stage's output derives from, through the stages it reads (a table once per set of
    partitions read)."""
    found: dict[tuple[str, tuple[str, ...]], TableEntry] = {}
    stack: list[Node] = [dag.stage(stage_id).plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Scan):
            found.setdefault((node.table.path, node.table.data_paths()), node.table)  # partitions read differ
        elif isinstance(node, StageRead):
            stack.append(dag.stage(node.stage_id).plan)
        else:
            stack.extend(node.children)
    return list(found.values())
