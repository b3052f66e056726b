"""Physical join choice: map-side (broadcast) for small base-table inputs, repartition otherwise.

A join input qualifies for broadcast when it is a map-side pipeline over base tables only (scans, filters,
projections and broadcast joins among them) whose files total at most the threshold, or (``--broadcast-sizes
cautious``, the default) whose rows are estimated at most an eighth of it: its files scaled to the columns it
reads, as Spark's planner sizes them, and with statistics to the rows its filters keep (``estimated``: at most
the threshold itself). The
planner decides and the executor enforces it (Spark's own automatic broadcast is off in aipq's stages), so every
later component — the IP planner and the benefit estimator — knows each stage's physical join. Once a stage has
run, a join reading its output measured small is broadcast too (``measured_broadcasts``, Hive's conditional map
join).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aipq.files import table_bytes
from aipq.planner.logical import (
    Aggregate,
    Filter,
    Join,
    JoinBlock,
    Limit,
    Node,
    Project,
    Scan,
    Sort,
    Window,
    transform_up,
)

# Spark's DataType.defaultSize: the widths its planner scales a scan's file bytes by when columns are pruned.
_DEFAULT_WIDTHS = {"boolean": 1, "tinyint": 1, "byte": 1, "smallint": 2, "short": 2, "int": 4, "integer": 4,
                   "bigint": 8, "long": 8, "float": 4, "double": 8, "date": 4, "timestamp": 8, "timestamp_ntz": 8,
                   "string": 20, "binary": 100}
ROW_OVERHEAD = 8  # bytes Spark adds to each row's estimated width
# ``--broadcast-sizes cautious``: an input sized by its estimate is broadcast only when this many times the
# estimate fits the threshold, so that an estimate too low by up to this factor still broadcasts what fits.
ESTIMATE_MARGIN = 8

# Which inputs Spark can broadcast for each join kind (the build side must not be the preserved side).
BROADCASTABLE = {
    "inner": ("right", "left"),
    "cross": ("right", "left"),
    "left": ("right",),
    "semi": ("right",),
    "anti": ("right",),
    "right": ("left",),
    "full": (),
}


def pipeline_bytes(node: Node, sizes: Callable[[str], int | None],
                   read_bytes: Callable[[Node], int | None] | None = None) -> int | None:
    """Bytes read by a map-side pipeline, or None if it is not one (or sizes are unknown). Its inputs are base
    tables, and with ``read_bytes`` (the bytes of another leaf, such as an earlier stage's measured output, or
    None when unknown) other leaves too."""
    total = 0
    for sub in node.walk():
        if isinstance(sub, (Aggregate, Sort, Limit, JoinBlock, Window)):
            return None
        if isinstance(sub, Join) and sub.physical != "broadcast":
            return None
        if isinstance(sub, Scan):
            size = table_bytes(sizes, sub.table)
        elif read_bytes is not None and not sub.children:
            size = read_bytes(sub)
        else:
            continue
        if size is None:
            return None
        total += size
    return total


def default_width(data_type: str) -> int:
    """A column's width as Spark's planner estimates it without statistics (decimals: 8 bytes up to 18 digits)."""
    text = data_type.strip().lower()
    if text.startswith("decimal"):
        digits = text[text.find("(") + 1:].split(",")[0] if "(" in text else "10"
        return 8 if digits.strip().isdigit() and int(digits) <= 18 else 16
    if text.startswith(("char", "varchar")):
        return _DEFAULT_WIDTHS["string"]
    return _DEFAULT_WIDTHS.get(text, 100)


def read_share(scan: Scan, with_filter_columns: bool = False) -> float:
    """The share of a table's file bytes a scan's output makes up, as Spark's planner sizes a scan whose columns
    were pruned: the row width of the columns it outputs (and, ``with_filter_columns``, those its filters alone
    read: what parquet reads for it) over the table's."""
    types = {name.lower(): kind for name, kind in scan.table.columns}
    whole = ROW_OVERHEAD + sum(default_width(kind) for kind in types.values())
    columns = scan.columns + (scan.filter_only if with_filter_columns else ())
    read = ROW_OVERHEAD + sum(default_width(types.get(source.lower(), "string")) for _, source in columns)
    return min(1.0, read / whole)


def estimated_pipeline_bytes(node: Node, sizes: Callable[[str], int | None],
                             rows: Callable[[Node], float | None] | None = None, margin: float = 1.0) -> float | None:
    """The bytes of a map-side base-table pipeline's rows, estimated before it runs: each table's files scaled to
    the columns its scan outputs (as Spark's planner does) and, with row estimates from statistics, a single
    table's to the share of its rows the filters keep, that share taken ``margin`` times larger (at most all of
    them). None if it is not such a pipeline."""
    if pipeline_bytes(node, sizes) is None:
        return None
    scans = [sub for sub in node.walk() if isinstance(sub, Scan)]
    total = sum((table_bytes(sizes, scan.table) or 0) * read_share(scan) for scan in scans)
    if rows is not None and len(scans) == 1 and scans[0].filters:
        kept, whole = rows(node), rows(replace(scans[0], filters=()))
        if kept is not None and whole:
            total *= min(1.0, kept / whole * margin)
    return total


def _smallest_broadcastable(node: Join, inputs: dict[str, float | None], threshold: int) -> str | None:
    """The side to copy to every task: the smaller of the inputs within ``threshold`` that the join kind can
    build a broadcast hash table from."""
    candidates = [(inputs[side], side) for side in BROADCASTABLE[node.kind]
                  if inputs[side] is not None and inputs[side] <= threshold]
    return min(candidates)[1] if candidates else None


def at_most_one_row(node: Node) -> bool:
    """An aggregate without grouping (a scalar subquery's value), possibly filtered or projected."""
    while isinstance(node, (Project, Filter, Limit)):
        if isinstance(node, Limit) and node.count <= 1:
            return True
        node = node.children[0]
    return isinstance(node, Aggregate) and not node.groups


def broadcast_size(node: Node, sizes: Callable[[str], int | None], rows: Callable[[Node], float | None] | None,
                   how: str) -> float | None:
    """The bytes a join input is sized at against the broadcast threshold (``--broadcast-sizes``): its files,
    its estimated rows (``estimated_pipeline_bytes``), or ``cautious``: the same estimate with the share of rows
    its filters keep taken ``ESTIMATE_MARGIN`` times larger against estimation error (never above its files, as
    no share exceeds one). The columns' share of the files is Spark's own sizing and takes no margin: an
    unfiltered table whose columns read fit is broadcast as ``spark.sql`` broadcasts it (TPC-H Q8's customer); a
    filtered scan estimated far below the threshold is broadcast although its table's files are not."""
    if how == "files":
        return pipeline_bytes(node, sizes)
    return estimated_pipeline_bytes(node, sizes, rows, ESTIMATE_MARGIN if how == "cautious" else 1.0)


def choose_physical_joins(root: Node, broadcast_threshold: int, sizes: Callable[[str], int | None],
                          rows: Callable[[Node], float | None] | None = None, how: str = "files") -> Node:
    """Broadcast small base-table pipelines, sized as ``how`` says (``broadcast_size``; ``rows``: row estimates
    from statistics); always broadcast a one-row input (there is no key to repartition a scalar subquery's value
    on, and copying one row costs nothing)."""
    def size(node: Node) -> float | None:
        return broadcast_size(node, sizes, rows, how)

    def choose(node: Node) -> Node:
        if not isinstance(node, Join):
            return node
        for side in BROADCASTABLE[node.kind]:
            if at_most_one_row(node.left if side == "left" else node.right):
                return replace(node, physical="broadcast", broadcast_side=side)
        if broadcast_threshold <= 0:
            return node
        inputs = {"left": size(node.left), "right": size(node.right)}
        side = _smallest_broadcastable(node, inputs, broadcast_threshold) \
            or _semi_join_preserved_side(node, inputs, broadcast_threshold)
        return replace(node, physical="broadcast", broadcast_side=side) if side else node

    return transform_up(root, choose)


def _semi_join_preserved_side(node: Join, inputs: dict[str, float | None], threshold: int) -> str | None:
    """'left' for an equi semi join whose preserved input fits within ``threshold`` while the other, a base-table
    pipeline, does not: the preserved rows are copied to every task with a row id, the large input joined to them
    where it is read, and each row id kept once (``engine/compile.StageCompiler.join``). Spark cannot build a
    left semi join from its left side, and would shuffle the large input (TPC-H Q4's lineitem, for a quarter's
    orders)."""
    left, right = inputs["left"], inputs["right"]
    if node.kind != "semi" or not node.left_keys or left is None or right is None:
        return None
    return "left" if left <= threshold < right else None


def measured_broadcasts(root: Node, broadcast_threshold: int, sizes: Callable[[str], int | None],
                        read_bytes: Callable[[Node], int | None]) -> dict[int, str]:
    """Repartition joins of a stage's plan that can run map-side now that the stage outputs they read are
    measured (Hive's conditional map join): id of the join → the side to broadcast, an input of earlier stages'
    outputs (``read_bytes``) and small base tables within the threshold."""
    if broadcast_threshold <= 0:
        return {}
    chosen: dict[int, str] = {}
    for node in root.walk():
        if isinstance(node, Join) and node.physical != "broadcast":
            inputs = {"left": pipeline_bytes(node.left, sizes, read_bytes),
                      "right": pipeline_bytes(node.right, sizes, read_bytes)}
            side = _smallest_broadcastable(node, inputs, broadcast_threshold)
            if side:
                chosen[id(node)] = side
    return chosen
