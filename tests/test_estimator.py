"""The benefit model, equation by equation, against values computed by hand; Δ; and clear-cut decisions."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from conftest import LOCAL_FILES

from aipq.estimator import cost_model as model
from aipq.estimator.benefit import EdgeInputs, best_estimate, estimate
from aipq.estimator.delta import bloom_false_positive_rate, candidate_filter_bytes, pruned_pages, surviving_share
from aipq.estimator.parameters import PAGE_BYTES, Calibration, parse_memory, sort_buffer_pages

COSTS = model.UnitCosts(c_read=1, c_write=2, c_transfer=3, u_read=0.1, u_write=0.2, u_transfer=0.3)
JOB = model.JobShape(m=4, r=2, pages_per_map=100, sort_buffer_pages=10)
DELTA = 40


def test_sort_costs_equations_5_and_6():
    # M/B = 10, ⌈log_9 10⌉ + 1 = 3 passes; (M−Δ)/B = 6, ⌈log_9 6⌉ + 1 = 2 passes
    assert model.sort_cost_original(JOB, COSTS) == pytest.approx(100 * 3 * 3)
    assert model.sort_cost_ip(JOB, DELTA, COSTS) == pytest.approx(60 * 3 * 2)
    assert model.sort_benefit(JOB, DELTA, COSTS) == pytest.approx(900 - 360)  # eq. (2)


def test_sort_fits_in_the_buffer_and_nothing_left():
    small = model.JobShape(m=1, r=1, pages_per_map=5, sort_buffer_pages=10)
    assert model.sort_cost_original(small, COSTS) == pytest.approx(5 * 3 * 1)  # one pass in memory
    assert model.sort_cost_ip(small, 5, COSTS) == 0.0  # everything pruned: nothing to sort


def test_shuffle_costs_equations_7_and_8():
    assert model.shuffle_cost_original(JOB, COSTS) == pytest.approx(100 * 4 / 2 * 3)
    assert model.shuffle_cost_ip(JOB, DELTA, COSTS) == pytest.approx(60 * 4 / 2 * 3)
    assert model.shuffle_benefit(JOB, DELTA, COSTS) == pytest.approx(600 - 360)  # eq. (3)


def test_merge_costs_equations_9_to_12():
    # R = M m / r = 200 pages per reducer; ⌈log_9 4⌉ = 1 merge pass
    assert model.merge_cost_per_reducer(200, JOB, COSTS) == pytest.approx(200 * 3 * 1)  # eq. (9)
    assert model.merge_cost_per_reducer(200 - DELTA * 4 / 2, JOB, COSTS) == pytest.approx(120 * 3)  # eq. (10)
    assert model.merge_cost_original(JOB, COSTS) == pytest.approx(600)  # eq. (11)
    assert model.merge_cost_ip(JOB, DELTA, COSTS) == pytest.approx(360)  # eq. (12)
    assert model.merge_benefit(JOB, DELTA, COSTS) == pytest.approx(240)  # eq. (4)
    assert model.merge_cost_original(model.JobShape(1, 2, 100, 10), COSTS) == 0.0  # one map output: no merge


def test_summary_costs_equations_13_to_17():
    size, partials, nodes = 1000, 3, 2
    assert model.summary_store_cost(size, COSTS) == pytest.approx(0.5 * 1000)  # eq. (14)
    assert model.summary_merge_cost(size, partials, COSTS) == pytest.approx(0.4 * 1000 * 3 + 0.5 * 1000)  # (15)
    assert model.summary_copy_cost(size, nodes, COSTS) == pytest.approx(2 * 0.6 * 1000)  # eq. (16)
    assert model.summary_load_cost(size, COSTS) == pytest.approx(0.1 * 1000)  # eq. (17)
    assert model.summary_cost(size, partials, nodes, COSTS) == pytest.approx(500 + 1700 + 1200 + 100)  # eq. (13)


def test_total_benefit_equation_1():
    b = model.benefit(JOB, DELTA, COSTS, 1000, 3, 2)
    assert (b.sort, b.shuffle, b.merge, b.summary) == pytest.approx((540, 240, 240, 3500))
    assert b.total == pytest.approx(540 + 240 + 240 - 3500)


def test_spark_sort_and_merge_charge_only_what_spark_does():
    costs = model.UnitCosts(1, 2, 3, 0.1, 0.2, 0.3, c_sort=0.5)
    # M = 100 > B = 10: eq. (5) has 3 passes; Spark's shuffle write is the first, 2 spill passes remain
    assert model.spark_sort_cost(100, JOB, costs) == pytest.approx(100 * 3 * 2 + 100 * 0.5)
    assert model.spark_sort_cost(8, JOB, costs) == pytest.approx(8 * 0.5)  # fits B: sorted in memory only
    assert model.spark_sort_benefit(JOB, DELTA, costs) == pytest.approx((600 + 50) - (60 * 3 * 1 + 30))
    # R = 200 pages per reducer > B: eq. (9)'s one merge pass; R ≤ B: merged in memory, nothing on disk
    assert model.spark_merge_cost(200, JOB, costs) == pytest.approx(600)
    assert model.spark_merge_cost(10, JOB, costs) == 0.0
    fits = model.JobShape(m=4, r=2, pages_per_map=2, sort_buffer_pages=10)
    assert model.spark_merge_benefit(fits, 1, costs) == 0.0
    b = model.spark_benefit(fits, 1, costs, 1000, 3, 2)
    assert (b.sort, b.shuffle, b.merge) == pytest.approx((0.5, 1 * 4 / 2 * 3, 0.0))
    assert b.summary == pytest.approx(model.summary_cost(1000, 3, 2, costs))


def test_delta_from_key_overlap_and_false_positives():
    assert bloom_false_positive_rate(8 * 1000 * 10, 1000 * 8) == pytest.approx(0.6185 ** 10)
    assert bloom_false_positive_rate(0, 10) == 1.0 and bloom_false_positive_rate(100, 0) == 0.0
    # 1,000 of 100,000 probed keys match; 1 % false positives among the other 99 %
    assert surviving_share(100_000, 1_000, 0.01) == pytest.approx(0.01 + 0.99 * 0.01)
    assert pruned_pages(50, 0.25) == pytest.approx(37.5)
    sizes = candidate_filter_bytes(10_000, 64 * 1024)
    assert sizes[0] == 1024 and sizes[-1] == 64 * 1024 and 11982 in sizes  # 1 % rule: 9.585 bits per key


def test_spark_parameters():
    assert parse_memory("1g") == 1 << 30 and parse_memory("512m") == 512 << 20 and parse_memory("2048") == 2048
    assert sort_buffer_pages(1 << 30, 0.6, 2) == pytest.approx((1024 - 300) * 0.6 / 2)


CALIBRATION = Calibration(model.UnitCosts(0.004, 0.012, 0.010, 1e-9, 2e-9, 1.5e-9, 0.004), 25e-9, "test")


def edge(common_share: float, **changes) -> EdgeInputs:
    """A repartition join's large input (600 MB, 6 M rows, 5 splits, 1.5 M distinct keys) probed with a
    summary whose keys cover ``common_share`` of them."""
    values = dict(probed_bytes=600 * PAGE_BYTES, probed_rows=6e6, probed_splits=5, probed_distinct=1.5e6,
                  summary_distinct=1.5e6 * common_share, common_distinct=1.5e6 * common_share,
                  shuffle_partitions=8, sort_buffer_pages=217)
    values.update(changes)
    return EdgeInputs(**values)


def test_a_summary_that_prunes_99_percent_is_used():
    chosen = best_estimate(edge(0.01), CALIBRATION, alpha=4 << 20)
    assert chosen.total > 0.5 and chosen.survive < 0.03
    assert chosen.benefit.shuffle > 0 and chosen.benefit.sort > 0


def test_a_summary_that_prunes_1_percent_is_skipped():
    chosen = best_estimate(edge(0.99), CALIBRATION, alpha=4 << 20)
    assert chosen.total < 0  # the probe and the summary cost more than 1 % fewer rows save


def test_nothing_to_gain_where_no_shuffle_follows():
    mapside = best_estimate(edge(0.01, feeds_shuffle=False), CALIBRATION, alpha=4 << 20)
    assert mapside.total < 0 and mapside.benefit.shuffle == 0


def test_the_filter_size_trades_false_positives_against_its_cost():
    tiny = estimate(edge(0.01), 1024, CALIBRATION)  # 15,000 keys in 1 KB: most keys pass
    chosen = best_estimate(edge(0.01), CALIBRATION, alpha=4 << 20)
    assert tiny.false_positive_rate > 0.7 and chosen.false_positive_rate < 0.05
    assert chosen.total > tiny.total
    capped = best_estimate(edge(0.01), CALIBRATION, alpha=2048)
    assert capped.filter_bytes <= 2048


def test_pruning_a_sibling_output_also_saves_its_write_and_read():
    as_input = estimate(edge(0.05), 64 * 1024, CALIBRATION)
    as_output = estimate(edge(0.05, place="output"), 64 * 1024, CALIBRATION)
    # in each of the 5 map tasks, run one after another on one core
    saved = as_input.delta_pages * (CALIBRATION.costs.c_write + CALIBRATION.costs.c_read) * 5
    assert as_output.total == pytest.approx(as_input.total + saved)


def test_a_partition_columns_summary_also_saves_the_read_of_the_partitions_it_skips():
    by_rows = estimate(edge(0.05), 64 * 1024, CALIBRATION)
    by_partitions = estimate(edge(0.05, partition_pages=600.0), 64 * 1024, CALIBRATION)
    probe = 6e6 / 5 * CALIBRATION.probe_seconds_per_row * 5  # per row, in each of 5 map tasks on one core
    read = (1 - by_rows.survive) * 600 * CALIBRATION.costs.c_read
    assert by_partitions.total == pytest.approx(by_rows.total + probe + read)


def test_building_is_charged_before_the_summary_exists_and_sunk_after():
    before = estimate(edge(0.05, summary_rows=4e6, cores=2), 64 * 1024, CALIBRATION)
    after = estimate(edge(0.05, cores=2), 64 * 1024, CALIBRATION)
    charged = 4e6 / 2 * CALIBRATION.build_seconds_per_row
    assert before.total == pytest.approx(after.total - charged)
    # a producer writing 40 M rows for a summary that prunes little: not worth building
    assert best_estimate(edge(0.6, summary_rows=4e7, cores=2), CALIBRATION, alpha=4 << 20).total < 0


def test_the_margin_counts_a_share_of_the_savings_and_all_of_the_costs():
    """A close call (savings a little above the sure costs) pays at margin 0 and is skipped at 0.5, while a
    summary that prunes 99 % still pays."""
    full = estimate(edge(0.4, summary_rows=9e6, cores=2), 256 * 1024, CALIBRATION)
    costs = full.savings - full.total
    assert 1.0 < full.savings / costs < 1.5 and full.total > 0  # the case is a close call
    halved = estimate(edge(0.4, summary_rows=9e6, cores=2, savings_share=1 / 1.5), 256 * 1024, CALIBRATION)
    assert halved.total == pytest.approx(full.savings / 1.5 - costs) and halved.total < 0
    assert halved.as_dict()["savings_share"] == pytest.approx(0.6667, abs=1e-4)
    clear = best_estimate(edge(0.01, savings_share=1 / 1.5), CALIBRATION, alpha=4 << 20)
    assert clear.total > 0.5


def test_per_task_terms_become_the_stages_wall_time():
    """Eqs. (2)-(4) are one task's; the stage runs m map tasks and r reducers over its cores."""
    one_core = estimate(edge(0.05, probed_splits=8, cores=1), 64 * 1024, CALIBRATION)
    two_cores = estimate(edge(0.05, probed_splits=8, cores=2), 64 * 1024, CALIBRATION)
    job = one_core.job
    per_task = model.spark_benefit(job, one_core.delta_pages, CALIBRATION.costs, 64 * 1024, 1, 1)
    assert one_core.benefit.sort == pytest.approx(per_task.sort * 8)  # 8 map tasks, one at a time
    assert two_cores.benefit.sort == pytest.approx(per_task.sort * 4)
    assert two_cores.benefit.shuffle == pytest.approx(per_task.shuffle * 4)  # 8 reducers on 2 cores
    assert two_cores.benefit.summary == pytest.approx(per_task.summary)  # paid once
    # a single task takes its own time whatever the cores
    single = estimate(edge(0.05, probed_splits=1, shuffle_partitions=1, cores=2), 64 * 1024, CALIBRATION)
    alone = model.spark_benefit(single.job, single.delta_pages, CALIBRATION.costs, 64 * 1024, 1, 1)
    assert single.benefit.sort == pytest.approx(alone.sort) and single.benefit.shuffle == pytest.approx(alone.shuffle)


def test_distinct_keys_left_after_pruning_rows_follow_cardenas():
    from aipq.estimator.cardinality import kept_distinct

    assert kept_distinct(1000, 1000, 0.1) == pytest.approx(100)  # unique keys: as many as rows kept
    # four rows a key: a key stays if any of its rows does, 1 − 0.9^4 = 34.4 %
    assert kept_distinct(1000, 4000, 0.1) == pytest.approx(1000 * (1 - 0.9 ** 4))
    assert kept_distinct(1000, 4000, 1.0) == 1000


class _Figure:
    """A positive estimate with only what the IP planner reads of one, keeping ``survive`` of the probed rows."""

    def __init__(self, survive: float, total: float = 1.0):
        self.total, self.one_time, self.savings, self.downstream = total, 0.0, max(total, 0.0), 0.0
        self.filter_bytes, self.expected_keys, self.survive = 1024, None, survive

    def with_downstream(self, saved):
        return self

    def as_dict(self):
        return {"B": self.total}


def test_pruning_chosen_below_a_stage_scales_what_its_subplan_wrote_before(tpch):
    """Q7: once nation n1's summary prunes supplier in S1, the outputs of S1 and of the stages above it up to
    nation's join are expected to hold that summary's surviving share of what the repository recorded for the
    unpruned subplan; from the join on, outputs are as they were."""
    from aipq.config import Settings
    from aipq.ip.decisions import BuiltInfo
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(ip="adaptive", staging="hive", broadcast_threshold=0)
    dag = plan_query(query_text(7), tpch, settings, LOCAL_FILES).dag
    n1 = next(s for s in dag.stages if s.operator == "SCAN" and "n_nationkey" in s.output_columns)

    handed = []

    def estimator(candidate, built, pruning):
        handed.append(pruning)
        return _Figure(0.08 if candidate.producer == n1.id else 1.0)

    planner = IpPlanner(dag, settings, estimator=estimator)
    built = {(n1.id, "n_nationkey"): BuiltInfo("bloom", 1024, 2)}
    first = dag.stage(1)
    assert planner.share_after_pruning(first.id) == 1.0
    uses = planner.decide(first, built).uses
    assert [(u.producer, u.target.label) for u in uses] == [(n1.id, "supplier")]
    join = next(c.join_stage for c in planner.candidates if c.producer == n1.id and c.target.label == "supplier")
    below_join = [s.id for s in dag.stages if s.id in dag.dependency.get(join, [])]
    assert join > first.id and below_join
    assert planner.share_after_pruning(first.id) == pytest.approx(0.08)
    assert planner.share_after_pruning(below_join[0]) == pytest.approx(0.08)
    # nation's join drops those rows anyway: from it on, outputs are what they were
    assert planner.share_after_pruning(join) == 1.0
    assert planner.share_after_pruning(dag.final.id) == 1.0
    assert planner.share_after_pruning(n1.id) == 1.0
    assert handed and handed[-1].after(first.id) == pytest.approx(0.08)  # the planner hands its pruning over


def test_a_summary_pruning_for_its_own_join_leaves_the_joins_output_as_it_was(tpch):
    """Q18: S1's l_orderkey summary prunes orders for S2's own join, so S2 writes what it wrote unpruned."""
    from aipq.config import Settings
    from aipq.ip.decisions import BuiltInfo
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(ip="always", staging="hive", broadcast_threshold=0)
    dag = plan_query(query_text(18), tpch, settings, LOCAL_FILES).dag

    planner = IpPlanner(dag, settings, estimator=lambda candidate, built, pruning: _Figure(1e-4))
    second = dag.stage(2)
    mine = [c for c in planner.candidates if c.target.stage == second.id and c.join_stage == second.id]
    assert mine
    built = {(c.producer, c.column): BuiltInfo("bloom", 1024, 57) for c in mine}
    assert planner.decide(second, built).uses
    assert planner.share_after_pruning(second.id) == 1.0


class _PlaceEstimator:
    """Edges to lineitem save ``saving`` seconds on the rows lineitem's input still holds, less 0.05 s; edges
    elsewhere lose a second. ``survive`` and ``saving`` by producer stage."""

    def __init__(self, figures: dict[int, tuple[float, float]]):
        self.figures = figures

    def __call__(self, candidate, built, pruning):
        if candidate.target.label != "lineitem" or candidate.producer not in self.figures:
            return _Figure(1.0, total=-1.0)
        survive, saving = self.figures[candidate.producer]
        return _Figure(survive, total=saving * pruning.at(candidate.target) - 0.05)


@pytest.mark.parametrize("better", ["p_partkey", "o_orderkey"])
def test_a_second_summary_at_one_place_is_priced_on_what_the_first_lets_through(tpch, better):
    """Q8 with repartition joins: part's and orders' summaries both probe lineitem's input. Algorithm 2 takes
    the edge estimated better first and prices the other on the 1% of lineitem the first keeps; Algorithm 1
    builds no second summary whose only worthwhile place a better summary already built, or planned by the
    query's plan, will have pruned."""
    from aipq.config import Settings
    from aipq.ip.decisions import BuiltInfo
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(ip="adaptive", staging="hive", broadcast_threshold=0)
    dag = plan_query(query_text(8), tpch, settings, LOCAL_FILES).dag
    producer = {column: next(s for s in dag.stages if s.operator == "SCAN" and column in s.output_columns)
                for column in ("p_partkey", "o_orderkey")}
    worse = next(c for c in producer if c != better)
    figures = {producer[better].id: (0.01, 2.4), producer[worse].id: (0.2, 1.6)}
    estimator = _PlaceEstimator(figures)
    planner = IpPlanner(dag, settings, estimator=estimator)
    lineitem = next(c.target for c in planner.candidates if c.target.label == "lineitem")

    built = {(producer[better].id, better): BuiltInfo("bloom", 1024, 2)}
    planner.decide(producer[better], {})
    assert planner.decide(producer[worse], built).builds == []  # 1.6 s × 1% − 0.05 s ≤ β
    # nothing built yet, the query's plan still has the better summary first: no pre-pass for the worse one
    assert IpPlanner(dag, settings, estimator=_PlaceEstimator(figures)).decide(producer[worse], {}).builds == []
    alone = IpPlanner(dag, settings, estimator=_PlaceEstimator({producer[worse].id: figures[producer[worse].id]}))
    assert [b.column for b in alone.decide(producer[worse], {}).builds] == [worse]

    built[(producer[worse].id, worse)] = BuiltInfo("bloom", 1024, 2)
    decisions = planner.decide(dag.stage(lineitem.stage), built)
    assert [(u.column, u.target.label) for u in decisions.uses] == [(better, "lineitem")]
    assert planner.share_at_place(lineitem) == pytest.approx(0.01)
    rejected = next(r for r in decisions.rejected
                    if r.candidate.column == worse and r.candidate.target.label == "lineitem")
    assert rejected.estimate["B"] == pytest.approx(1.6 * 0.01 - 0.05)


def test_a_filter_for_a_handful_of_keys_uses_a_bounded_number_of_hash_functions():
    from aipq.ip.bloom_sizing import MAX_HASH_FUNCTIONS, least_items

    bits = 1 << 16
    assert round(bits / least_items(bits) * math.log(2)) <= MAX_HASH_FUNCTIONS


def test_only_stages_with_an_edge_to_decide_on_wait_for_the_estimators_statistics(tpch):
    """The executor waits for the statistics thread only before a stage that builds or probes some summary:
    under adaptive, Q18's final sort has no edge, its first join does."""
    from aipq.config import Settings
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(ip="adaptive", staging="hive", broadcast_threshold=0)
    dag = plan_query(query_text(18), tpch, settings, LOCAL_FILES).dag
    planner = IpPlanner(dag, settings)
    with_edges = {s.id for s in dag.stages if planner.has_edges(s)}
    assert dag.stage(1).id in with_edges and dag.final.id not in with_edges
    assert with_edges == {c.producer for c in planner.candidates} | {c.target.stage for c in planner.candidates}
    assert not any(IpPlanner(dag, Settings(ip="off", broadcast_threshold=0)).has_edges(s) for s in dag.stages)


def test_a_bloom_filter_sized_at_alpha_still_loads_with_its_header(tpch):
    # a filter of exactly α bytes of bits serializes to α plus Spark's header: no stage could load it
    from aipq.config import Settings
    from aipq.ip.bloom_sizing import BLOOM_HEADER_BYTES
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    alpha = 4096
    settings = Settings(ip="always", staging="hive", broadcast_threshold=0, alpha=alpha, bloom_size=alpha)
    dag = plan_query(query_text(3), tpch, settings, LOCAL_FILES).dag
    planner = IpPlanner(dag, settings)
    builds = [b for s in dag.stages for b in planner.creations(s)]
    assert builds and all(b.bits // 8 + BLOOM_HEADER_BYTES <= alpha for b in builds), builds


def test_a_summary_holds_the_probed_keys_in_the_share_it_holds_of_their_span():
    """TPC-DS Q72's dates: inventory's 261 weekly dates lie within 1,830 of date_dim's 73,049 keys; a summary
    of 371 dates keeps about a fifth of them (containment took it to keep all). A fact whose keys cover their
    dimension, or bounds unknown, give containment."""
    from aipq.estimator.overlap import KeyRange, common_keys, span_keys

    date_dim = KeyRange(73_049, 2_415_022, 2_488_070)
    inventory = KeyRange(261, 2_450_815, 2_452_635)
    span = span_keys(date_dim, inventory)
    assert span == pytest.approx(1_821, rel=1e-3)
    assert common_keys(371, 261, span) == pytest.approx(261 * 371 / span)
    assert common_keys(5_000, 261, span) == 261  # a summary holding the whole span holds every probed key
    customer = KeyRange(150_000, 1, 150_000)
    orders_customers = KeyRange(100_000, 1, 149_999)
    assert common_keys(30_000, 100_000, span_keys(customer, orders_customers)) == pytest.approx(20_000, rel=1e-3)
    assert common_keys(30_000, 100_000, None) == 30_000
    assert span_keys(customer, KeyRange(10, 200_000, 300_000)) == 10  # disjoint ranges: the probed keys alone


@pytest.mark.parametrize("runtime_broadcast", ["on", "off"])
def test_a_join_that_broadcasts_the_summarys_own_source_at_run_time_does_what_the_summary_would(tpch,
                                                                                                 runtime_broadcast):
    """Q18 with repartition joins planned: S1 (the orders whose lineitems total over 300, 57 rows written) is the
    other input of orders' join in S2. Broadcast at run time (Hive's conditional map join, Spark's adaptive
    execution), that join drops orders' unmatched rows where they are read, as S1's summary would; with runtime
    broadcast off, orders' rows are shuffled for the join and only the summary prunes them first."""
    from aipq.config import Settings
    from aipq.estimator.edge_inputs import EdgeEstimator, RunState
    from aipq.ip.candidates import find_candidates
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(ip="always", staging="hive", broadcast_threshold=10 << 20, runtime_broadcast=runtime_broadcast)
    dag = plan_query(query_text(18), tpch, replace(settings, broadcast_threshold=0), LOCAL_FILES).dag
    estimator = EdgeEstimator(dag, settings, None, CALIBRATION, RunState({1: 57}, {1: "/nowhere/S1"}))
    edges = [c for c in find_candidates(dag) if c.producer == 1 and c.target.label == "orders"]
    assert edges
    assert estimator.joined_map_side_at_run(edges[0].target, 1) is (runtime_broadcast == "on")
    assert not estimator.joined_map_side_at_run(edges[0].target, 2), "another stage's summary: not the same"
