"""Common subplans computed once (planner/shared.py): which subtrees match, that the shared one is a stage its
readers read, where the price says to share, and that the rows stay DuckDB's."""

from __future__ import annotations

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows, run_to_rows

from aipq.config import Settings
from aipq.ip import staging
from aipq.pipeline import plan_query
from aipq.planner.join_order import JoinCosting
from aipq.planner.logical import Node, Scan
from aipq.planner.shared import SharingCosting, share_subplans
from aipq.tpch.queries import query_text

ALWAYS = Settings(share_subplans="always")


def readers_of(dag, stage_id: int) -> list[int]:
    return dag.dataflow.get(stage_id, [])


def shared_stages(dag) -> list:
    return [s for s in dag.stages if len(readers_of(dag, s.id)) > 1]


def test_q11s_join_under_its_group_by_and_its_subquerys_total_is_one_stage_read_twice(tpch):
    dag = plan_query(query_text(11), tpch, ALWAYS, LOCAL_FILES).dag
    [shared] = shared_stages(dag)
    assert shared.operator == "MAP"
    assert set(shared.tables) == {"default.partsupp", "default.supplier", "default.nation"}
    assert {dag.stage(r).operator for r in readers_of(dag, shared.id)} == {"GROUP-BY"}
    assert staging.fixed_reason(dag, shared, ALWAYS).startswith("read by")
    assert sum(1 for s in dag.stages for n in s.plan.walk()
               if isinstance(n, Scan) and n.table.name == "partsupp") == 1
    assert dag.plan.shared_notes == ("default.nation ⋈ default.partsupp ⋈ default.supplier computed once for 2 "
                                     "readers",)


def test_nothing_is_shared_when_off_or_without_statistics_to_price_it(tpch):
    for settings in (Settings(share_subplans="off"), Settings(share_subplans="auto")):
        dag = plan_query(query_text(11), tpch, settings, LOCAL_FILES).dag
        assert not shared_stages(dag) and not dag.plan.shared_notes


TWO_TOTALS = """select count(*) as n,
    (select sum(l_quantity) from lineitem where l_shipmode = 'AIR') as air,
    (select avg(l_extendedprice) from lineitem where l_shipmode = 'AIR') as air_price,
    (select sum(l_quantity) from lineitem where l_shipmode = 'RAIL') as rail
  from nation"""


def test_subtrees_match_only_with_the_same_filters(tpch):
    """The two AIR totals are one aggregate (both its sums over one scan, with both columns); RAIL's filter
    differs and it keeps its own."""
    dag = plan_query(TWO_TOTALS, tpch, ALWAYS, LOCAL_FILES).dag
    scans = {n.filters[0].sql(): n for s in dag.stages for n in s.plan.walk()
             if isinstance(n, Scan) and n.table.name == "lineitem"}
    assert len(scans) == 2
    [air] = [scan for text, scan in scans.items() if "AIR" in text]
    assert {source for _, source in air.columns} == {"l_quantity", "l_extendedprice"}
    assert dag.plan.shared_notes == ("default.lineitem computed once for 2 readers",)


def test_a_nondeterministic_filter_is_never_shared(tpch):
    sql = TWO_TOTALS.replace("l_shipmode = 'AIR'", "rand() < 0.5")
    assert not plan_query(sql, tpch, ALWAYS, LOCAL_FILES).dag.plan.shared_notes


class FixedRows:
    """Row estimates for the price alone: each subplan ``output`` rows."""

    def __init__(self, output: float):
        self.output = output

    def rows(self, node: Node) -> float | None:
        return self.output


def costing(partsupp_bytes: float, output: float) -> SharingCosting:
    """partsupp's files ``partsupp_bytes``, supplier's and nation's none to speak of; a byte read costs 1 ns, and
    written and read back 3 ns."""
    sizes = lambda path: partsupp_bytes if "partsupp" in path else 0  # noqa: E731
    return SharingCosting(JoinCosting(FixedRows(output), sizes, 0, True, 0.0, 0.0, 0.15, read_byte_seconds=1e-9,
                                      written_byte_seconds=3e-9))


@pytest.mark.parametrize("partsupp_bytes, output, shared",
                         [(500e6, 3.2e5, True), (50e6, 3.2e4, False), (500e6, 40e6, False)],
                         ids=["large-and-selective", "small", "unselective"])
def test_a_subplan_is_shared_where_reading_its_tables_once_less_outweighs_writing_it(tpch, partsupp_bytes, output,
                                                                                      shared):
    """Saved: partsupp's four of five columns read once less (1 ns a byte); paid: a job (0.15 s) and the three
    columns of the output rows written once and read by the other reader (3 + 1 ns a byte)."""
    root = plan_query(query_text(11), tpch, Settings(share_subplans="off"), LOCAL_FILES).dag.plan.root
    notes: list[str] = []
    _, ids = share_subplans(root, costing(partsupp_bytes, output), notes)
    assert bool(ids) == shared and bool(notes) == shared


@pytest.mark.parametrize("number", [2, 8, 11, 15, 17, 18, 21])
def test_rows_are_duckdbs_with_every_match_shared(aipq, duck, tmp_path, number):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--share-subplans", "always", "--broadcast-threshold",
                         "10MB")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_rows_are_duckdbs_with_two_totals_shared_under_predicate_transfer(aipq, duck, tmp_path):
    actual = run_to_rows(aipq, tmp_path, "--sql", TWO_TOTALS, "--share-subplans", "always", "--ip", "transfer")
    assert_same_rows(actual, oracle_rows(duck, TWO_TOTALS), ordered=False)


def test_explain_names_what_is_shared(aipq):
    result = aipq("explain", "tpch:11", "--share-subplans", "always")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "shared: default.nation ⋈ default.partsupp ⋈ default.supplier computed once for 2 readers" in text


def test_the_knob_defaults_to_auto():
    assert Settings().share_subplans == "auto"
