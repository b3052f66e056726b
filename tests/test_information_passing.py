"""Information passing never changes a result: every TPC-H query under every strategy and plan shape gives
DuckDB's rows, and summaries really prune."""

from __future__ import annotations

import json

import pytest
from conftest import ALL_QUERIES, LOCAL_FILES, REPARTITION_JOINS, analyzed, assert_same_rows, oracle_rows, run_to_rows

from aipq.tpch.queries import query_text

# left-deep plans under always are test_staging.py's runs under the default (adaptive) staging, and adaptive (the
# default) is test_tpch_results.py's
STRATEGY_PLANS = [(strategy, plan) for strategy in ("hip", "always", "oracle") for plan in ("linear", "bushy")
                  if plan == "bushy" or strategy != "always"]


@pytest.mark.parametrize(("strategy", "plan"), STRATEGY_PLANS)
@pytest.mark.parametrize("number", ALL_QUERIES)
def test_tpch_rows_are_the_same_under_every_strategy(aipq, duck, tmp_path, number, strategy, plan):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", strategy, "--plan", plan,
                         "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


@pytest.mark.parametrize("number", [3, 5, 9, 18, 21])
def test_broadcast_joins_with_summaries_keep_the_rows(aipq, duck, tmp_path, number):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--ip", "always", "--plan", "bushy")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def _probes(info: dict) -> list[dict]:
    return [p for s in info["stages"] for p in s["measured"]["probes"]]


def test_analyze_reports_pruning_shuffle_and_summaries_for_every_strategy(aipq):
    kept = {}
    for strategy in ("hip", "always", "oracle"):
        info = analyzed(aipq, *REPARTITION_JOINS, "tpch:3", "--ip", strategy)
        assert info["run"]["strategy"] == strategy
        probes = _probes(info)
        lineitem = [p for p in probes if p["target"] == "lineitem"]
        assert lineitem, f"{strategy}: Q3's orders summary prunes lineitem before the shuffle"
        probe = lineitem[0]
        assert probe["place"] == "input" and probe["relation"] == "child-to-parent"
        assert 0 < probe["rows_out"] < probe["rows_in"]
        kept[strategy] = probe["rows_out"]
        for stage in info["stages"]:
            measured = stage["measured"]
            assert measured["shuffle"]["shuffle_write_bytes"] >= 0 and measured["rows_written"] >= 0
            for summary in measured["summaries"]:
                assert summary["kind"] in ("bloom", "hash-list", "exact") and summary["items"] is not None
        if strategy == "always":
            summaries = [s for st in info["stages"] for s in st["measured"]["summaries"]]
            assert all(s["size_bytes"] > 0 and s["bits"] for s in summaries)
            assert probe["measured_fpr"] is not None and 0 <= probe["measured_fpr"] < 0.2
    # Exact key sets keep no more rows than a Bloom filter, which may only admit extra ones.
    assert kept["oracle"] <= kept["always"] and kept["oracle"] == kept["hip"]


def test_pruning_reduces_the_shuffle(aipq):
    off = analyzed(aipq, *REPARTITION_JOINS, "tpch:5", "--ip", "off")
    always = analyzed(aipq, *REPARTITION_JOINS, "tpch:5", "--ip", "always")

    def shuffled(info):
        return sum(s["measured"]["shuffle"]["shuffle_write_records"] for s in info["stages"])

    assert shuffled(always) < shuffled(off)
    assert not _probes(off)


def test_explain_shows_each_stage_decisions_with_reasons(aipq):
    result = aipq("explain", "tpch:5", "--ip", "always", "--plan", "bushy", "--broadcast-threshold", "0",
                  "--format", "json")
    assert result.exit_code == 0, result.output
    stages = json.loads(result.output)["stages"]
    builds = [b for s in stages for b in s["information_passing"]["builds"]]
    uses = [u for s in stages for u in s["information_passing"]["uses"]]
    assert builds and all(b["reason"] for b in builds)
    assert {u["relation"] for u in uses} >= {"child-to-parent", "sibling-to-sibling"}
    assert all(u["where"] and u["reason"] for u in uses)
    tree = aipq("explain", "tpch:5", "--ip", "hip", "--broadcast-threshold", "0")
    assert "builds hash-list summary" in tree.output and "uses S1" in tree.output


def test_hip_passes_child_to_parent_only_and_respects_alpha(aipq):
    info = analyzed(aipq, *REPARTITION_JOINS, "tpch:5", "--ip", "hip", "--plan", "bushy")
    relations = {p["relation"] for p in _probes(info)}
    assert relations <= {"child-to-parent"}
    tiny = analyzed(aipq, *REPARTITION_JOINS, "tpch:3", "--ip", "hip", "--alpha", "1KB")
    assert not [p for p in _probes(tiny) if p["target"] == "lineitem"]
    rejected = [r for s in tiny["stages"] for r in s["information_passing"]["rejected"]]
    assert any("> α" in r["reason"] for r in rejected)


@pytest.mark.parametrize("size, kilobytes", [("512KB", 512), ("2MB", 2048)])
def test_fixed_bloom_size_is_honoured_and_its_probes_counted_at_any_size(aipq, size, kilobytes):
    info = analyzed(aipq, *REPARTITION_JOINS, "tpch:3", "--ip", "always", "--bloom-size", size)
    summaries = [s for st in info["stages"] for s in st["measured"]["summaries"]]
    assert summaries and all(s["bits"] == kilobytes * 1024 * 8 for s in summaries)
    # above the 1 MB cap of auto-sized filters too: probed from its broadcast and counted
    probes = [p for p in _probes(info) if not p["skipped"]]
    assert probes and all(p["rows_in"] is not None and p["rows_out"] <= p["rows_in"] for p in probes)


def test_summaries_pass_into_decorrelated_subqueries_below_their_grouping(aipq, tpch):
    from aipq.config import Settings
    from aipq.ip.candidates import find_candidates
    from aipq.pipeline import plan_query

    dag = plan_query(query_text(20), tpch, Settings(broadcast_threshold=0), LOCAL_FILES).dag
    grouped = {s.id for s in dag.stages if s.operator == "GROUP-BY"}
    into_subquery = [c for c in find_candidates(dag) if c.target.stage in grouped and c.target.label == "lineitem"]
    # Q20's correlated SUM over lineitem is grouped by (l_partkey, l_suppkey): partsupp's keys prune it.
    assert {c.target.column for c in into_subquery} == {"l_partkey", "l_suppkey"}


def test_filters_sized_from_a_loose_bound_keep_the_hash_count_of_their_target_rate(tpch):
    """Spark derives a filter's hash functions from the item count it is given: an upper bound far above the
    filter's capacity (all rows of lineitem for a capped filter) gave one hash function and ~10 % false
    positives instead of 1 %."""
    import math

    from aipq.config import Settings
    from aipq.ip.bloom_sizing import bloom_items
    from aipq.ip.planner import IpPlanner
    from aipq.pipeline import plan_query

    settings = Settings(ip="always", broadcast_threshold=0, alpha=64 * 1024, bloom_fpp=0.01)
    dag = plan_query(query_text(5), tpch, settings, LOCAL_FILES).dag
    planner = IpPlanner(dag, settings, expected_items=lambda stage, column: 6_000_000)
    builds = [b for stage in dag.stages for b in planner.creations(stage)]
    assert builds
    for build in builds:
        assert build.expected_items == bloom_items(build.bits, 0.01) < 6_000_000
        assert round(build.bits / build.expected_items * math.log(2)) == 7  # -log2(0.01) ≈ 6.6


SIBLING_OUTPUT = """
    with spend as (select o_custkey as k, sum(o_totalprice) as total from orders
                   where o_orderdate < '1993-01-01' group by o_custkey),
         named as (select c_custkey + 0 as k, max(c_name) as name from customer group by c_custkey + 0)
    select name, total from spend join named on spend.k = named.k
"""


def test_a_sibling_prunes_its_own_output_before_writing_it(aipq, duck, tmp_path):
    info = analyzed(aipq, *REPARTITION_JOINS, "--sql", SIBLING_OUTPUT, "--ip", "always")
    outputs = [p for p in _probes(info) if p["place"] == "output"]
    assert outputs and outputs[0]["relation"] == "sibling-to-sibling"
    assert outputs[0]["rows_out"] < outputs[0]["rows_in"]
    actual = run_to_rows(aipq, tmp_path, "--sql", SIBLING_OUTPUT, "--ip", "always", "--broadcast-threshold", "0")
    assert_same_rows(actual, oracle_rows(duck, SIBLING_OUTPUT), ordered=False)
