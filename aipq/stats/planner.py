"""The statistics planner (the paper's section 3.3): which tables and columns a query needs statistics on, and
which of those the repository lacks, so that the run collects only those, in passing.

The estimator needs every input table's size, rows and splits, and per column the distinct-value count,
width and nulls of the columns that decide how many rows survive or how many groups there are: join keys, filter
columns, group-by keys and the columns under an aggregate that a HAVING compares. Comment and
address columns are never collected unless a user names them (``stats_columns``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from aipq.catalog import TableEntry
from aipq.files import FileSource
from aipq.planner.logical import Aggregate, Filter, Join, Node, Project, Scan
from aipq.planner.stages import StageDag
from aipq.stats.fingerprint import DataFiles, data_files
from aipq.stats.repository import ColumnStats, StatsRepository, TableStats


@dataclass
class TableNeed:
    """One input table: the columns the estimator wants, and those the repository lacks for its data now."""

    entry: TableEntry
    files: DataFiles
    columns: tuple[str, ...]
    missing: tuple[str, ...]
    known: TableStats | None  # what the repository holds for its data now
    scans: list[int] = field(default_factory=list)  # ids of the Scan nodes reading it

    @property
    def has_table_stats(self) -> bool:
        return self.known is not None

    @property
    def collect(self) -> bool:
        return bool(self.missing) or not self.has_table_stats

    def as_dict(self) -> dict:
        return {"table": self.entry.qualified_name, "path": self.entry.path, "columns": list(self.columns),
                "known": [c for c in self.columns if c not in self.missing], "collect": list(self.missing)
                if self.collect else [], "table_statistics": "known" if self.has_table_stats else "collect"}


def _names(expression: exp.Expression | None) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column)} if expression is not None else set()


def interesting_names(root: Node) -> set[str]:
    """Internal column names used as join keys, in filters or as group keys anywhere in the plan, followed back
    through renames and the expressions that compute them to the names the scans give them."""
    names: set[str] = set()
    renames: list[tuple[str, set[str]]] = []
    for node in root.walk():
        if isinstance(node, Join):
            names |= set(node.left_keys) | set(node.right_keys) | _names(node.residual)
        elif isinstance(node, Filter):
            names |= _names(node.condition)
        elif isinstance(node, Scan):
            for condition in node.filters:
                names |= _names(condition)
        elif isinstance(node, Project):  # through renames and expressions to the columns they read
            renames += [(alias, _names(e)) for alias, e in node.items]
        elif isinstance(node, Aggregate):  # group keys decide how many groups there are
            for alias, expression in node.groups:
                names |= {alias} | _names(expression)
                renames.append((alias, _names(expression)))
            # an aggregate a HAVING compares: its arguments' ranges decide how many groups pass
            renames += [(alias, _names(expression)) for alias, expression in node.aggregates]
    changed = True
    while changed:
        before = len(names)
        for alias, sources in renames:
            if alias in names:
                names |= sources
        changed = len(names) != before
    return names


def plan_statistics(dag: StageDag, repository: StatsRepository | None, files: FileSource,
                    extra_columns: tuple[str, ...] = ()) -> list[TableNeed]:
    """Per input table of the query (by data path), the statistics wanted and the ones missing."""
    names = interesting_names(dag.plan.root)
    extra = {c.lower() for c in extra_columns}
    needs: dict[str, TableNeed] = {}
    wanted: dict[str, set[str]] = {}
    for node in dag.plan.root.walk():
        if not isinstance(node, Scan):
            continue
        entry = node.table
        columns = wanted.setdefault(entry.path, set())
        for internal, source in node.columns + node.filter_only:
            qualified = {source.lower(), f"{entry.name}.{source}".lower(), f"{entry.qualified_name}.{source}".lower()}
            if internal in names or qualified & extra:
                columns.add(source)
        if entry.path not in needs:
            needs[entry.path] = TableNeed(entry, data_files(files, entry.path), (), (), None)
        needs[entry.path].scans.append(id(node))
    for path, need in needs.items():
        need.columns = tuple(sorted(wanted[path]))
        need.known = known = repository.table(path, need.files.fingerprint) \
            if repository and need.files.fingerprint else None
        need.missing = tuple(c for c in need.columns if known is None or c not in known.columns
                             or _lacks_sample(known.columns[c]))
    return list(needs.values())


def _lacks_sample(stats: ColumnStats) -> bool:
    """A text column collected before aipq sampled text columns' values (LIKE's estimates read them)."""
    return stats.data_type == "string" and stats.sample is None
