"""The queries a benchmark runs: TPC-H's (as written, or with the FROM list in its worst order), TPC-DS's."""

from __future__ import annotations

from dataclasses import dataclass

from aipq.engine.context import RunContext
from aipq.tpch.queries import NO_DATE_QUERIES, query_text, without_date_filters


@dataclass(frozen=True)
class BenchQuery:
    """One query of a benchmark: a label for tables and plots, its SQL, and the synthetic reference ratio."""

    label: str
    text: str
    ratio: float | None = None

    @property
    def name(self) -> str:
        """The query without its data parameter: ``query1`` for ``query1 @ 0.01``, ``Q3`` for ``Q3``."""
        return self.label.split(" @ ")[0]



def tpch_workload(numbers: list[int]) -> list[BenchQuery]:
    return [BenchQuery(f"Q{n}", query_text(n)) for n in numbers]



def reorder_workload(context: RunContext, numbers: list[int]) -> list[BenchQuery]:
    """Each query as written and in its worst connected order (``worst_order_tpch_query``), Q3 and Q10 also
    without their date predicates (ADP's variants), after collecting the statistics the repository lacks for the
    TPC-H tables (the bad order is chosen from them)."""
    from aipq.data import collect_missing_statistics, worst_order_tpch_query

    collect_missing_statistics(context, "aipq bench reopt")
    workload = []
    for number in numbers:
        workload += [BenchQuery(f"Q{number}", query_text(number)),
                     BenchQuery(f"Q{number} worst", worst_order_tpch_query(context, number))]
        if number in NO_DATE_QUERIES:
            workload.append(BenchQuery(f"Q{number} no dates", without_date_filters(number)))
    return workload



def tpcds_workload(numbers: list[int]) -> list[BenchQuery]:
    from aipq.tpcds.queries import query_text as tpcds_text

    return [BenchQuery(f"DS{n}", tpcds_text(n)) for n in numbers]

