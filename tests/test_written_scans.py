"""Large filtered scans cut into a MAP stage of their own (ip/written_scans.py): where they are cut, that their
summaries never reach an anti join's right side, and that the rows are DuckDB's whether the cut is written or
fused back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import LOCAL_FILES, assert_same_rows, local_bytes, oracle_rows

from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.executor import run_dag
from aipq.engine.work_dirs import remove_work_dir
from aipq.ip.candidates import find_candidates
from aipq.pipeline import plan_query
from aipq.planner.logical import Join, Scan
from aipq.planner.stages import StageRead
from aipq.tpch.queries import query_text

# --scan-summaries 1 B: the pre-pass bound is an eighth of lineitem, as at any scale where 64 MB is less
CUT = Settings(ip="adaptive", staging="adaptive", scan_summaries=1, broadcast_threshold=0)


def cut_stages(dag) -> list:
    return [s for s in dag.stages if s.operator == "MAP" and s is not dag.final]


def test_q21s_l1_is_a_stage_of_its_own_whose_keys_may_prune_l2_but_never_l3(tpch):
    dag = plan_query(query_text(21), tpch, CUT, LOCAL_FILES).dag
    [cut] = cut_stages(dag)
    assert isinstance(cut.plan, Scan) and cut.plan.alias == "l1" and cut.plan.filters
    [reader] = [s for s in dag.stages if any(isinstance(n, StageRead) and n.stage_id == cut.id
                                              for n in s.plan.walk())]
    assert {j.kind for j in reader.merged_joins()} == {"semi", "anti"}
    assert cut.consumer_keys == ("l_orderkey",)
    targets = {(c.target.label, c.target.column) for c in find_candidates(dag)
               if c.producer == cut.id and c.column == "l_orderkey"}
    assert ("lineitem l2", "l2_l_orderkey") in targets  # a semi join's right side
    assert not any(label == "lineitem l3" for label, _ in targets)  # an anti join's right side: never pruned


@pytest.mark.parametrize("settings", [replace(CUT, cut_scans="off"), replace(CUT, staging="hive"),
                                      replace(CUT, ip="hip"), replace(CUT, ip="off")],
                         ids=["cut-scans-off", "hive-staging", "hip", "off"])
def test_scans_are_cut_only_under_adaptive_staging_with_a_strategy_that_passes_scans_keys(tpch, settings):
    assert not cut_stages(plan_query(query_text(21), tpch, settings, LOCAL_FILES).dag)


def test_a_scan_small_enough_for_a_pre_pass_or_not_filtered_is_not_cut(tpch):
    """Q12's lineitem (filtered, the largest) is cut for orders; orders, unfiltered, is not. With the pre-pass
    bound above lineitem's size, lineitem gets a pre-pass instead."""
    [cut] = cut_stages(plan_query(query_text(12), tpch, CUT, LOCAL_FILES).dag)
    assert cut.plan.table.name == "lineitem"
    roomy = replace(CUT, scan_summaries=1 << 40)
    assert not cut_stages(plan_query(query_text(12), tpch, roomy, LOCAL_FILES).dag)


def broadcast_customer(tpch) -> Settings:
    """CUT, with customer's two columns (but not orders' four) within the broadcast threshold by their sizes."""
    half = local_bytes(tpch.lookup("customer").path) // 2
    return replace(CUT, broadcast_threshold=half, broadcast_sizes="estimated")


def test_a_join_input_that_joins_a_broadcast_table_is_cut_whole(tpch):
    """Q3's orders, joined map-side with the BUILDING customers, feeds the repartition join with lineitem: the
    pipeline is one MAP stage, so its written rows summarize the order keys that survive both filters."""
    dag = plan_query(query_text(3), tpch, broadcast_customer(tpch), LOCAL_FILES).dag
    pipelines = [s for s in cut_stages(dag) if isinstance(s.plan, Join)]
    [cut] = pipelines
    assert cut.plan.physical == "broadcast" and set(cut.tables) == {"default.customer", "default.orders"}
    assert cut.consumer_keys == ("o_orderkey",)
    targets = {(c.target.label, c.target.column) for c in find_candidates(dag) if c.producer == cut.id}
    assert ("lineitem", "l_orderkey") in targets


@pytest.mark.parametrize("query, broadcast", [(21, False), (12, False), (4, False), (3, True)],
                         ids=["21", "12", "4", "3-broadcast"])
def test_rows_are_duckdbs_with_the_cut_written(spark, tpch, home, duck, query, broadcast):
    """``always`` builds every summary it may, so each cut stage is written and its summary probes."""
    settings = replace(broadcast_customer(tpch) if broadcast else CUT, ip="always")
    context = RunContext(home, settings)
    dag = plan_query(query_text(query), tpch, settings, LOCAL_FILES).dag
    cut_ids = {s.id for s in cut_stages(dag)}
    assert cut_ids
    record = run_dag(context, dag)
    try:
        written = [m for m in record.stages if m.stage_id in cut_ids]
        assert written and all(m.rows_written > 0 and m.summaries for m in written)
        assert all((Path(record.work_dir) / f"stage-{m.stage_id}").exists() for m in written)
        rows = [tuple(r) for r in spark.read.parquet(str(record.result_path)).collect()]
        assert_same_rows(rows, oracle_rows(duck, query_text(query)), ordered=True)
    finally:
        remove_work_dir(context.storage, record.work_dir)
