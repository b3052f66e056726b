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
"""

from __future__ import annotations

from collections import Counter

from aipq.config import Settings
from aipq.files import Sizes, table_bytes
from aipq.ip.scan_summaries import SCAN_STRATEGIES, largest_table_bytes, may_read_twice, read_twice_bound
from aipq.planner.logical import Filter, Join, Node, Project, Scan


def scans_to_cut(root: Node, settings: Settings, sizes: Sizes) -> frozenset[int]:
    """Node ids of filtered scans that no pre-pass may read (``scan_summaries.may_read_twice``) and that feed a
    repartition inner or semi join whose other input is a scan: their keys may prune that input. A scan with
    several readers (a CTE read twice) is left alone: its stage would be written for its readers, pay or not."""
    if settings.ip not in SCAN_STRATEGIES or settings.staging != "adaptive" or settings.cut_scans == "off":
        return frozenset()
    largest = largest_table_bytes(root, sizes)
    bound = read_twice_bound(settings.scan_summaries, largest)
    readers = Counter(id(child) for node in root.walk() for child in node.children)
    found: set[int] = set()
    for node in root.walk():
        if not (isinstance(node, Join) and node.physical == "repartition" and node.kind in ("inner", "semi")):
            continue
        left, right = _scan_below(node.left, readers), _scan_below(node.right, readers)
        if left is None or right is None:
            continue
        for scan in (left, right) if node.kind == "inner" else (left,):
            known = table_bytes(sizes, scan.table) is not None
            if scan.filters and known and not may_read_twice(scan, sizes, bound, settings.scan_summaries, largest):
                found.add(id(scan))
    return frozenset(found)


def _scan_below(node: Node, readers: Counter) -> Scan | None:
    """The scan a join input reads through row-wise operators only, none of them read elsewhere, if it is one."""
    while isinstance(node, (Filter, Project)) and readers[id(node)] == 1:
        node = node.child
    return node if isinstance(node, Scan) and readers[id(node)] == 1 else None
