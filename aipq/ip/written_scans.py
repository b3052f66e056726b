"""Filtered scans too large for a summary pre-pass, given a stage of their own so that their keys can prune the
other input of their join.

A filtered table's keys prune its join partner through a pre-pass (``ip/scan_summaries.py``) only when the table
is small enough to read twice. TPC-H Q21's l1 is lineitem after ``l_commitdate < l_receiptdate`` and the Saudi
suppliers' summary, a small share of lineitem's rows and order keys, joined with l2, all of lineitem, which is
shuffled whole. Reading lineitem a second time to summarize l1's keys costs as much as the query.

Cut l1 into a MAP stage of its own: its output is the filtered, probed rows, and writing them builds their
keys' summary as any stage output does (the paper's T_r), which then probes l2 before its shuffle (a semi join's
right side: admissible, ``ip/candidates.py``). The consumer reads the written rows, not the table again. Under
adaptive staging the stage is written only where it builds a summary, and ``adaptive`` builds one only where it
pays for the write (``Adaptive.creation``); otherwise the stage is fused back into its consumer, whose plan is
then the one without the cut. Hive staging writes every boundary, so the paper's plans are left as they are.

A join input that joins broadcast tables map-side is cut the same way, whatever its tables' sizes: a pre-pass
reads one table and does not see the join. TPC-H Q3 with the BUILDING customers broadcast into orders' scan: the
pipeline's written rows summarize the order keys that survive both filters, for lineitem.
"""

from __future__ import annotations

from collections import Counter

from aipq.config import Settings
from aipq.files import Sizes, table_bytes
from aipq.ip.candidates import PRUNING_JOINS
from aipq.ip.scan_summaries import SCAN_STRATEGIES, largest_table_bytes, may_read_twice, read_twice_bound
from aipq.planner.logical import Filter, Join, Node, Project, Scan


def scans_to_cut(root: Node, settings: Settings, sizes: Sizes) -> frozenset[int]:
    """Node ids of join inputs to cut into a MAP stage of their own: filtered map-side pipelines that feed a
    repartition inner or semi join whose other input is such a pipeline too (their keys may prune that input):
    a scan no pre-pass may read (``scan_summaries.may_read_twice``), or a scan joined map-side with broadcast
    tables, whose joins a pre-pass would not see. An input with several readers (a CTE read twice) is left
    alone: its stage would be written for its readers, pay or not."""
    if settings.ip not in SCAN_STRATEGIES or settings.staging != "adaptive" or settings.cut_scans == "off":
        return frozenset()
    largest = largest_table_bytes(root, sizes)
    bound = read_twice_bound(settings.scan_summaries, largest)
    readers = Counter(id(child) for node in root.walk() for child in node.children)
    found: set[int] = set()
    for node in root.walk():
        if not (isinstance(node, Join) and node.physical == "repartition" and node.kind in PRUNING_JOINS):
            continue
        left, right = _pipeline_below(node.left, readers), _pipeline_below(node.right, readers)
        if left is None or right is None:
            continue
        for top in (left, right) if node.kind == "inner" else (left,):
            if _worth_cutting(top, sizes, settings, bound, largest):
                found.add(id(top))
    return frozenset(found)


def _worth_cutting(top: Node, sizes: Sizes, settings: Settings, bound: int, largest: int) -> bool:
    """Whether a pipeline filters its rows and no pre-pass summarizes its keys as it would: a scan too large
    for one, or tables joined map-side, whose filters a pre-pass of one table does not see."""
    scans = [n for n in top.walk() if isinstance(n, Scan)]
    if not any(scan.filters for scan in scans) or any(table_bytes(sizes, s.table) is None for s in scans):
        return False
    if len(scans) > 1:
        return True
    return not may_read_twice(scans[0], sizes, bound, settings.scan_summaries, largest)


def _pipeline_below(node: Node, readers: Counter) -> Node | None:
    """The map-side pipeline a join input reads below its row-wise operators (a scan, or a broadcast join of
    such pipelines), none of its nodes read elsewhere, if it is one."""
    while isinstance(node, (Filter, Project)) and readers[id(node)] == 1:
        node = node.child
    for sub in node.walk():
        if readers[id(sub)] != 1 or not isinstance(sub, (Scan, Join, Filter, Project)):
            return None
        if isinstance(sub, Join) and sub.physical != "broadcast":
            return None
    return node
