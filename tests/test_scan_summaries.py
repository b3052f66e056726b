"""Filtered base tables as summary producers (SCAN stages): where they are admitted, that they run only when a
summary is built, and that their pruning never changes a row."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import LOCAL_FILES, assert_same_rows, local_bytes, oracle_rows

from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.dag_run import RunOptions
from aipq.engine.executor import run_dag
from aipq.engine.work_dirs import remove_work_dir
from aipq.estimator.shuffled_inputs import feeds_shuffle
from aipq.ip.candidates import find_candidates
from aipq.ip.staging import surely_written
from aipq.pipeline import plan_query
from aipq.planner.logical import Join, Scan
from aipq.planner.stages import StageRead
from aipq.tpch.queries import query_text

REPARTITION = {"broadcast_threshold": 0}


def scan_stages(dag):
    return [s for s in dag.stages if s.operator == "SCAN"]


def test_q9s_green_parts_summarize_their_keys_for_the_first_join(tpch):
    dag = plan_query(query_text(9), tpch, Settings(ip="adaptive", scan_reach=0, **REPARTITION), LOCAL_FILES).dag
    [scan] = scan_stages(dag)
    assert dag.stages[0] is scan  # before every stage that could use it
    assert scan.tables == ("default.part",) and scan.output_columns == ("p_partkey",)
    edges = [c for c in find_candidates(dag) if c.producer == scan.id]
    first_join = dag.stages[1]
    assert [(c.target.stage, c.target.label, c.target.column, c.relation) for c in edges] == [
        (first_join.id, "lineitem", "l_partkey", "filtered-scan")]


def test_a_scan_summary_reaches_past_a_stage_that_may_be_fused(tpch):
    """Q9: S1 (part ⋈ lineitem) holds a subset of the green parts' keys, so under hive staging partsupp is left to
    S1's summary. Adaptive staging may fuse S1 into its reader, and then S1 builds none: the part scan's summary
    prunes partsupp instead."""
    from aipq.ip.staging import surely_written

    settings = Settings(ip="adaptive", staging="adaptive", scan_reach=0, **REPARTITION)
    dag = plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag
    [scan] = scan_stages(dag)
    first_join = dag.stages[1]
    edges = {(c.target.label, c.target.column): c for c in find_candidates(dag, surely_written(dag, settings))
             if c.producer == scan.id}
    assert set(edges) == {("lineitem", "l_partkey"), ("partsupp", "ps_partkey")}
    assert first_join.id in edges[("partsupp", "ps_partkey")].nearer  # (and the join stages after it)
    assert edges[("lineitem", "l_partkey")].nearer == ()
    hive = replace(settings, staging="hive")
    assert [c.target.label for c in find_candidates(dag, surely_written(dag, hive)) if c.producer == scan.id] == [
        "lineitem"]


def test_a_nearer_stages_summary_makes_the_scans_redundant_where_both_are_built(tpch):
    """Q9 under ``adaptive`` with hive staging, where the estimator leaves S1 written: where a nearer stage's
    summary of the same keys (a subset) prunes partsupp, the part scan's is not probed there too."""
    from aipq.ip.decisions import BuiltInfo
    from aipq.ip.planner import IpPlanner

    settings = Settings(ip="adaptive", staging="adaptive", scan_reach=0, **REPARTITION)
    dag = plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag
    [scan] = scan_stages(dag)
    planner = IpPlanner(dag, settings, estimator=lambda candidate, built, pruning: _Figure(1.0, savings=1.0))
    edges = [c for c in planner.candidates if c.target.label == "partsupp" and c.column == "p_partkey"]
    reader = dag.stage(edges[0].target.stage)
    built = {(c.producer, c.column): BuiltInfo("bloom", 1024, 10) for c in edges}
    uses, rejected = planner.usages(reader, built)
    nearest = min(edges, key=lambda c: len(c.nearer))
    assert [(u.producer, u.target.label) for u in uses if u.column == "p_partkey"] == [(nearest.producer, "partsupp")]
    assert {r.candidate.producer for r in rejected if "nearer" in r.reason} >= {scan.id}


def test_a_pre_pass_is_bounded_by_the_columns_it_reads_but_never_reads_the_largest_table(tpch):
    """TPC-H SF 10's sizes: Q2's part (66 MB of files, more than an eighth of partsupp's 453 MB) is read for
    p_partkey, p_mfgr, p_size and p_type, about 27 MB, within the 64 MB bound; partsupp, the largest, never is."""
    from aipq.ip.scan_summaries import filtered_scans

    sf10 = {"part": 68_987_773, "partsupp": 474_820_750, "supplier": 8_600_000, "nation": 3_394, "region": 1_797}
    dag = plan_query(query_text(2), tpch, Settings(ip="adaptive", **REPARTITION), LOCAL_FILES).dag

    def sizes(path: str) -> int | None:
        return next((size for name, size in sf10.items() if Path(path).name.startswith(name + ".")), None)

    def admitted(read_bound: int) -> set[str]:
        return {scan.table.name for scan in filtered_scans(dag, 64 << 20, sizes, read_bound)}

    assert admitted(0) == {"region"}
    assert admitted(64 << 20) == {"region", "part"}
    sf10["part"] = sf10["partsupp"]  # as large as the largest: not read twice, whatever its columns
    assert admitted(1 << 40) == {"region"}


def test_q21s_nation_filter_reaches_lineitem_through_supplier(tpch):
    """Q21 keeps one nation's suppliers; lineitem l1 joins supplier, not nation. supplier semi-joined with the
    filtered nation summarizes s_suppkey, which may prune l1 before the semi and anti joins shuffle it."""
    # --scan-summaries 1 B: the bound is an eighth of lineitem, as at any scale where 64 MB is less
    dag = plan_query(query_text(21), tpch, Settings(ip="adaptive", scan_summaries=1, **REPARTITION), LOCAL_FILES).dag
    [supplier] = [s for s in scan_stages(dag) if s.tables == ("default.supplier",)]
    semi = [n for n in supplier.plan.walk() if isinstance(n, Join)]
    assert [(j.kind, j.physical, j.left_keys, j.right_keys) for j in semi] == [
        ("semi", "broadcast", ("s_nationkey",), ("n_nationkey",))]
    nation = [n for n in supplier.plan.walk() if isinstance(n, Scan) and n.table.name == "nation"]
    assert nation[0].filters and id(nation[0]) not in dag.scan_sources  # a copy, not the query's own scan
    targets = {(c.target.label, c.target.column) for c in find_candidates(dag) if c.producer == supplier.id}
    assert ("lineitem l1", "l_suppkey") in targets
    # --scan-reach 0: filtered tables only
    none = plan_query(query_text(21), tpch, Settings(ip="adaptive", scan_summaries=1, scan_reach=0, **REPARTITION),
                      LOCAL_FILES).dag
    assert all(s.tables != ("default.supplier",) for s in scan_stages(none))


def test_a_filter_reaches_two_joins_away_and_no_further(tpch):
    """Q5: region's filter reaches nation (one join) and customer and supplier through nation (two); each
    pre-pass semi-joins its table with a copy of the reduced table it is reached from."""
    dag = plan_query(query_text(5), tpch, Settings(ip="adaptive", scan_summaries=1, scan_reach=2, **REPARTITION),
                     LOCAL_FILES).dag
    depth = {s.tables[0].split(".")[1]: sum(isinstance(n, Join) for n in s.plan.walk()) for s in scan_stages(dag)}
    assert depth["region"] == 0 and depth["nation"] == 1 and depth["customer"] == depth["supplier"] == 2
    one = plan_query(query_text(5), tpch, Settings(ip="adaptive", scan_summaries=1, scan_reach=1, **REPARTITION),
                     LOCAL_FILES).dag
    reached = {s.tables[0].split(".")[1] for s in scan_stages(one) if any(isinstance(n, Join) for n in s.plan.walk())}
    assert reached == {"nation"}


def test_scan_summaries_belong_to_the_strategies_that_pass_them(tpch):
    for settings in (Settings(ip="off", **REPARTITION), Settings(ip="hip", **REPARTITION),
                     Settings(ip="always", scan_summaries=0, **REPARTITION)):
        assert not scan_stages(plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag)
    # a table larger than the limit, and more than an eighth of the query's largest, is not read twice
    tiny = Settings(ip="always", scan_summaries=1024, scan_reach=0, **REPARTITION)
    close = SizedFiles({"part": 100_000, "lineitem": 700_000})
    assert not scan_stages(plan_query(query_text(9), tpch, tiny, close).dag)
    # the bound grows with the data: part at a sixtieth of lineitem (66 MB against 2.4 GB at SF 10) is read twice
    [scan] = scan_stages(plan_query(query_text(9), tpch, tiny, SizedFiles({"part": 66_000, "lineitem": 2_400_000})).dag)
    assert scan.tables == ("default.part",)


class SizedFiles:
    """Every table a given size (bytes by table name; 10 bytes for the others)."""

    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes

    def data_files(self, uri: str):
        from aipq.files import FileInfo

        size = next((b for name, b in self.sizes.items() if f"/{name}." in uri or uri.endswith(f"/{name}")), 10)
        return [FileInfo(uri, "", size, 0)]


def test_a_broadcast_join_below_the_shuffle_prunes_by_itself(tpch):
    """With part joined map-side to lineitem, part's summary on lineitem would repeat that join's work; on
    partsupp, which meets them only at the stage's shuffle, it still prunes before it. part ⋈ lineitem is cut
    into a MAP stage of its own (``ip/written_scans.py``) that adaptive staging may fuse back, so part's pre-pass
    stays a producer for partsupp beside it."""
    part = local_bytes(tpch.lookup("part").path)
    assert part < local_bytes(tpch.lookup("partsupp").path) < local_bytes(tpch.lookup("lineitem").path)
    settings = Settings(ip="adaptive", broadcast_threshold=part, scan_reach=0)
    dag = plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag
    [scan] = scan_stages(dag)
    targets = {c.target.label for c in find_candidates(dag, surely_written(dag, settings)) if c.producer == scan.id}
    assert "lineitem" not in targets and "partsupp" in targets


def test_a_stage_read_feeds_its_stages_shuffle(tpch):
    """The estimator prices a probe of an earlier stage's output by the shuffle it saves: the stage's reduce
    node must be the one in its plan (it once was the uncut node, and no stage input seemed shuffled)."""
    dag = plan_query(query_text(18), tpch, Settings(**REPARTITION), LOCAL_FILES).dag
    reads = [(s, n) for s in dag.stages if s.operator == "JOIN" for n in s.plan.walk() if isinstance(n, StageRead)]
    assert reads
    for stage, read in reads:
        assert any(n is stage.reduce_node for n in stage.plan.walk())
        assert feeds_shuffle(stage, id(read))


def test_a_scan_summary_prunes_before_the_shuffle_and_keeps_every_row(aipq, duck):
    result = aipq("explain", "tpch:9", "--ip", "always", "--broadcast-threshold", "0", "--scan-reach", "0",
                  "--analyze", "--format", "json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    [scan] = [s for s in info["stages"] if s["operator"] == "SCAN"]
    assert [b["column"] for b in scan["measured"]["summaries"]] == ["p_partkey"]
    probes = [p for s in info["stages"] for p in s["measured"]["probes"] if p["relation"] == "filtered-scan"]
    assert [p["target"] for p in probes] == ["lineitem"]
    assert probes[0]["rows_out"] < probes[0]["rows_in"] / 5  # ~5 % of parts are green

    run = aipq("run", "tpch:9", "--ip", "adaptive", "--broadcast-threshold", "0", "--format", "json", "--quiet")
    assert run.exit_code == 0, run.output
    rows = [tuple(json.loads(line).values()) for line in run.output.splitlines()]
    assert_same_rows(rows, oracle_rows(duck, query_text(9)), ordered=True)


def test_a_scan_stage_builds_its_summary_without_writing_its_rows(spark, tpch, home, duck):
    """No stage reads a pre-pass's rows: they go to Spark's noop sink, and its summary still prunes."""
    settings = Settings(ip="always", scan_reach=0, **REPARTITION)
    context = RunContext(home, settings)
    record = run_dag(context, plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag)
    try:
        [scan] = [m for m in record.stages if m.operator == "SCAN"]
        assert scan.rows_written > 0 and scan.bytes_written == 0
        assert not (Path(record.work_dir) / f"stage-{scan.stage_id}").exists()
        assert [(s.column, s.items > 0) for s in scan.summaries] == [("p_partkey", True)]
        rows = [tuple(r) for r in spark.read.parquet(str(record.result_path)).collect()]
        assert_same_rows(rows, oracle_rows(duck, query_text(9)), ordered=True)
    finally:
        remove_work_dir(context.storage, record.work_dir)


@pytest.mark.slow  # two runs of Q7 with every summary built
def test_pre_passes_run_together_in_one_spark_job(spark, tpch, home, duck):
    """Q7's pre-passes (its two nations, and the tables they reach) run as one Spark job, not one job each; each
    still reports its rows and summaries, and the rows are DuckDB's. --analyze runs each alone, to measure it."""
    settings = Settings(ip="always", **REPARTITION)
    context = RunContext(home, settings)
    dag = plan_query(query_text(7), tpch, settings, LOCAL_FILES).dag
    assert len(scan_stages(dag)) > 1
    for analyze in (False, True):
        record = run_dag(context, dag, RunOptions(analyze=analyze))
        try:
            scans = [m for m in record.stages if m.operator == "SCAN"]
            assert len(scans) == len(scan_stages(dag))
            assert all(m.rows_written > 0 and m.summaries for m in scans)
            together = [m for m in scans if m.staging.startswith("summary passes")]
            assert len(together) == (0 if analyze else len(scans))
            if not analyze:
                assert len([m for m in scans if m.seconds > 0]) == 1  # the job's time, on its first pass
            rows = [tuple(r) for r in spark.read.parquet(str(record.result_path)).collect()]
            assert_same_rows(rows, oracle_rows(duck, query_text(7)), ordered=True)
        finally:
            remove_work_dir(context.storage, record.work_dir)


def test_analyze_leaves_out_a_scan_stage_that_did_not_run(aipq):
    """adaptive skips a SCAN stage whose summary it does not build (here: β above any benefit)."""
    args = ("tpch:3", "--ip", "adaptive", "--broadcast-threshold", "0", "--beta", "1000", "--format", "json")
    planned = json.loads(aipq("explain", *args).output)
    assert any(s["operator"] == "SCAN" for s in planned["stages"])
    result = aipq("explain", *args, "--analyze")
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["stages"] and all(s["operator"] != "SCAN" and "measured" in s for s in info["stages"])


class _Figure:
    """An estimate with only what the planner reads of one."""

    def __init__(self, total: float, one_time: float = 0.0, savings: float = 0.0, downstream: float = 0.0):
        self.total, self.one_time, self.savings, self.downstream = total, one_time, savings, downstream
        self.filter_bytes, self.expected_keys, self.survive = 1024, None, 1.0

    def with_downstream(self, saved: float):
        return _Figure(self.total + saved, self.one_time, self.savings, saved) if saved > 0 else self

    def as_dict(self) -> dict:
        return {"B": self.total}


class _OrdersEstimator:
    """Q21's orders summary saves ``saves`` at lineitem l1 and l2, once built ``when_built`` instead; before it
    is built each edge carries the pre-pass and build cost (0.5 s). Every other edge loses; every stage is
    written anyway."""

    def __init__(self, orders: int, saves: float, when_built: float):
        self.orders, self.saves, self.when_built = orders, saves, when_built

    def __call__(self, candidate, built, pruning):
        if candidate.producer != self.orders:
            return _Figure(-1.0)
        if candidate.target.label not in ("lineitem l1", "lineitem l2"):
            return _Figure(-0.5 if built is None else -0.01)
        if built is not None:  # its one-time costs are spent
            return _Figure(self.when_built, savings=self.when_built)
        return _Figure(self.saves - 0.5, one_time=0.5, savings=self.saves)

    def materialization_seconds(self, _stage_id: int) -> float:
        return 0.0


def _q21_orders_pass(tpch):
    settings = Settings(ip="adaptive", **REPARTITION)
    dag = plan_query(query_text(21), tpch, settings, LOCAL_FILES).dag
    return settings, dag, next(s for s in dag.stages if s.operator == "SCAN" and s.tables == ("default.orders",))


def test_a_summary_pays_when_its_edges_pay_together_with_its_cost_counted_once(tpch):
    """Q21: the orders summary prunes lineitem l1 and l2 in the same stage; each edge alone carries the whole
    pre-pass and build cost (0.5 s here) and loses, together they save 0.6 s for it."""
    from aipq.ip.planner import IpPlanner

    settings, dag, orders = _q21_orders_pass(tpch)
    planner = IpPlanner(dag, settings, estimator=_OrdersEstimator(orders.id, saves=0.3, when_built=0.3))
    assert planner.best_edge(orders.id, "o_orderkey").total < 0
    assert planner.creation_benefit(orders.id, "o_orderkey") == pytest.approx(0.1)
    assert [b.column for b in planner.creations(orders)] == ["o_orderkey"]


def test_a_summary_pre_pass_runs_only_for_a_summary_the_query_s_plan_probes(tpch):
    """Q21: the orders summary's edges pay in the best case before it is built (as above), but once the plan's
    other summaries are chosen none of them clears β (here: each saves 0.01 s once built), so the plan probes it
    nowhere and its pre-pass, a Spark job of its own, does not run."""
    from aipq.ip.planner import IpPlanner

    settings, dag, orders = _q21_orders_pass(tpch)
    planner = IpPlanner(dag, settings, estimator=_OrdersEstimator(orders.id, saves=0.3, when_built=0.01))
    assert planner.creation_benefit(orders.id, "o_orderkey") == pytest.approx(0.1)
    assert not planner.probed_when_planned(orders.id, "o_orderkey")
    assert planner.creations(orders) == []
    assert all(not d.builds for d in planner.plan_all() if d.stage == orders.id)


def test_pruning_an_input_counts_what_it_saves_at_the_places_it_makes_redundant(tpch):
    """Q11: nation's summary on supplier, before S1's join, also prunes S1's output; the output alone would be
    probed after the join of all of partsupp."""
    from aipq.ip.planner import IpPlanner

    settings = Settings(ip="adaptive", scan_reach=0, **REPARTITION)
    dag = plan_query(query_text(11), tpch, settings, LOCAL_FILES).dag
    candidates = [c for c in find_candidates(dag) if c.target.label in ("supplier", "S1 output")
                  and dag.stage(c.producer).operator == "SCAN" and c.target.stage == 1]
    supplier = next(c for c in candidates if c.target.label == "supplier")
    output = next(c for c in candidates if c.target.label == "S1 output")
    assert supplier.target.key in output.covered_by

    def estimator(candidate, built, pruning):
        return _Figure(0.4, savings=0.6) if candidate == output else _Figure(0.01, savings=0.05)

    planner = IpPlanner(dag, settings, estimator=estimator)
    assert planner.estimate(supplier, None).total == pytest.approx(0.61)
    # the output, in turn, makes S2's probe of what it wrote redundant
    assert planner.estimate(output, None).total == pytest.approx(0.4 + 0.05)
