"""Strategy ``adaptive`` end to end: decisions on clear cases of the paper's synthetic data, estimates shown by
explain for every candidate edge, and the same rows as ``off``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows

from aipq.bench import synthetic
from aipq.bench.decisions import affected_stages
from aipq.config import Settings
from aipq.engine.context import RunContext

ROWS = 100_000


@pytest.fixture(scope="module")
def ratios(home, spark):
    for ratio in (0.01, 0.99):
        synthetic.generate(RunContext(home), ratio, ROWS)


def tablec_decisions(info: dict) -> list[tuple[str, dict]]:
    """(decision, estimate) of every edge into Query1's last join's scan of tablec."""
    found = []
    for stage in info["stages"]:
        ip = stage["information_passing"]
        for kind in ("uses", "rejected"):
            found += [(kind, edge) for edge in ip[kind] if edge["target"].endswith("tablec c")]
    return found


@pytest.mark.parametrize("ratio, expected", [(0.01, "uses"), (0.99, "rejected")])
def test_a_summary_that_prunes_99_percent_is_used_and_one_that_prunes_1_percent_is_not(aipq, ratios, ratio,
                                                                                        expected):
    sql = synthetic.query_text("query1", ratio)
    result = aipq("explain", "--sql", sql, "--ip", "adaptive", "--staging", "hive", "--broadcast-threshold",
                  "0", "--analyze", "--format", "json")
    assert result.exit_code == 0, result.output
    decisions = tablec_decisions(json.loads(result.output))
    assert decisions and all(kind == expected for kind, _ in decisions), decisions
    estimate = decisions[0][1]["estimate"]
    assert {"B", "B_sort", "B_shuffle", "B_merge", "C_summary", "sources"} <= set(estimate)
    assert (estimate["B"] > 0) == (expected == "uses")
    assert estimate["sources"]["summary keys"].startswith("measured")


def test_explain_estimates_every_candidate_edge_before_the_run(aipq):
    result = aipq("explain", "tpch:5", "--ip", "adaptive", "--broadcast-threshold", "0", "--format", "json")
    info = json.loads(result.output)
    edges = [e for s in info["stages"] for kind in ("uses", "rejected") for e in s["information_passing"][kind]]
    assert edges and all(e["estimate"] is not None for e in edges if "redundant" not in e["reason"])
    tree = aipq("explain", "tpch:5", "--ip", "adaptive", "--broadcast-threshold", "0")
    assert "B_shuffle" in tree.output and "C_summary" in tree.output and "unit costs: defaults" in tree.output


def test_adaptive_with_every_edge_allowed_gives_the_same_rows(aipq, duck, tmp_path):
    """β far below zero lets the estimator's whole path run on every edge (sizes, sketches, Δ) on Q9."""
    from conftest import run_to_rows

    from aipq.tpch.queries import query_text

    sql = query_text(9)
    actual = run_to_rows(aipq, tmp_path, "tpch:9", "--ip", "adaptive", "--beta", "-1000", "--plan", "bushy",
                         "--broadcast-threshold", "0", "--transfer-choice", "off")
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=True)


def test_calibrate_stores_unit_costs_that_explain_then_uses(tmp_path, spark):
    from conftest import Aipq

    runner = Aipq(tmp_path / "home")
    assert runner("tpch", "gen", "--sf", "0.01").exit_code == 0
    result = runner("calibrate", "--mb", "4", "--runs", "1")
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "home" / "calibration.json").read_text())
    assert all(stored[k] > 0 for k in ("c_read", "c_write", "c_transfer", "u_read", "u_write", "u_transfer",
                                       "probe_seconds_per_row", "build_seconds_per_row"))
    tree = runner("explain", "tpch:5", "--ip", "adaptive", "--broadcast-threshold", "0")
    assert "unit costs: calibrated on" in tree.output


@pytest.mark.slow
def test_bench_decisions_reports_accuracy(aipq, tmp_path):
    out = tmp_path / "decisions"
    result = aipq("bench", "decisions", "--sf", "0.01", "--queries", "3", "--repeat", "1",
                  "--joins", "repartition", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["edges"] and 0 <= data["accuracy"] <= 1
    edge = data["edges"][0]
    assert {"estimated_benefit", "decision", "seconds_with", "seconds_without", "measured_benefit"} <= set(edge)
    assert {e["joins"] for e in data["edges"]} == {"repartition"}
    assert edge["stages"] and edge["seconds_without"] <= edge["query_seconds_without"]
    assert len(edge["runs_with"]) == len(edge["runs_without"]) == 1
    assert edge["verdict"] in {"yes", "no", "noise", "unclear"}
    assert 0 <= data["accuracy"] <= data["accuracy_where_clear"] <= 1
    assert data["runs_rerun_for_steal"] >= 0 and data["steal_seconds"] >= 0
    report = (out / "report.md").read_text()
    assert "decision accuracy over" in report and "runs run again because the hypervisor" in report


def test_a_wrong_decision_counts_only_when_its_runs_separate():
    from aipq.bench.decisions import EdgeDecision, accuracy

    def edge(used: bool, with_edge: list[float], without: list[float]) -> EdgeDecision:
        return EdgeDecision("Q", 1, "k", "t", (), "child-to-parent", 0.1 if used else -0.1, used, None,
                            with_edge=with_edge, without=without, query_with=with_edge, query_without=without)

    skipped_but_faster = edge(False, [2.0, 2.1, 2.2], [2.5, 2.6, 2.7])  # every run with it faster
    skipped_noisy = edge(False, [2.0, 2.6, 2.2], [2.5, 2.1, 2.7])  # faster in the median, runs overlap
    used_and_faster = edge(True, [1.0, 1.1, 1.2], [2.0, 2.1, 2.2])
    assert [e.verdict(0.03) for e in (skipped_but_faster, skipped_noisy, used_and_faster)] == \
        ["no", "unclear", "yes"]
    share = accuracy([skipped_but_faster, skipped_noisy, used_and_faster], 0.03)
    assert share.by_sign == share.within_noise == 1 / 3
    assert share.where_clear == 2 / 3


def test_an_edge_is_timed_over_its_producer_its_target_and_what_follows():
    # Q8's shape: S1 → S2 → S3 → S4, and S5 (a sibling branch) → S4
    dag = SimpleNamespace(dataflow={1: [2], 2: [3], 3: [4], 5: [4]})  # producer → consumers
    assert affected_stages(dag, 2, 3) == {2, 3, 4}  # S1 and S5 do the same work either way
    assert affected_stages(dag, 5, 3) == {5, 3, 4}  # a sibling's summary pruning S3's input


def test_a_measured_edge_is_found_again_in_every_new_plan_of_the_query(tpch):
    """bench decisions plans the query again for every run: the edge it measures must be recognized there."""
    from aipq.bench.decisions import EdgeSet
    from aipq.ip.candidates import find_candidates
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    settings = Settings(broadcast_threshold=0)
    first = find_candidates(plan_query(query_text(3), tpch, settings, LOCAL_FILES).dag)
    edge = next(c for c in first if c.target.label.startswith("lineitem"))
    measured = EdgeSet({(edge.producer, edge.column, edge.target.stable_key)}, {(edge.producer, edge.column): 4096})
    again = plan_query(query_text(3), tpch, settings, LOCAL_FILES).dag
    chosen = [c for c in find_candidates(again) if measured.usage(None, c, None) is not None]
    assert [(c.producer, c.column, c.target.stable_key) for c in chosen] == [
        (edge.producer, edge.column, edge.target.stable_key)]
    producer = again.stage(edge.producer)
    assert [column for column, _ in measured.creation(None, producer)] == [edge.column]
    assert measured.filter_bits(None, producer, edge.column) == 4096 * 8
    others = [s for s in again.stages if s.id != edge.producer]
    assert all(not measured.creation(None, s) for s in others)


def test_edges_are_measured_among_adaptives_own_at_the_sizes_adaptive_chose():
    """The plan each edge's reversal is timed against: adaptive's used edges; the summaries keep the size adaptive
    built them at, and a summary only skipped edges need gets the size of its best edge's estimate."""
    from aipq.bench.decisions import EdgeDecision, adaptive_edges

    used = EdgeDecision("Q", 1, "k", "t", ("a",), "child-to-parent", 0.5, True, 1000)
    skipped = EdgeDecision("Q", 2, "j", "u", ("b",), "child-to-parent", -0.1, False, 2000)
    worse = EdgeDecision("Q", 2, "j", "v", ("c",), "transitive", -0.3, False, 8000)  # the same summary elsewhere
    record = SimpleNamespace(stages=[SimpleNamespace(summaries=[SimpleNamespace(stage=1, column="k", bits=8 * 512)])])
    chosen, sizes = adaptive_edges(record, [used, skipped, worse])
    assert chosen == {used.key}
    assert sizes == {(1, "k"): 512, (2, "j"): 2000}


def _estimates(plan: dict) -> dict[tuple, dict]:
    found = {}
    for stage in plan["stages"]:
        passing = stage.get("information_passing") or {}
        for kind in ("builds", "uses", "rejected"):
            for item in passing.get(kind, []):
                if item.get("estimate"):
                    key = (stage["id"], kind, item.get("column") or item.get("summary"), item.get("target"))
                    found[key] = item["estimate"]
    return found


def test_a_margin_discounts_every_edges_savings_in_explain(aipq):
    """--margin 0.5: each edge's savings terms count two thirds, its costs all, it takes no edge that the
    paper's check skips, and explain says so."""
    args = ("explain", "tpch:3", "--ip", "adaptive", "--broadcast-threshold", "0")
    plain = _estimates(json.loads(aipq(*args, "--format", "json").output))
    cautious = _estimates(json.loads(aipq(*args, "--margin", "0.5", "--format", "json").output))
    taken = {key for key in cautious if key[1] != "rejected"}
    assert taken <= plain.keys()  # a margin only ever skips more
    compared = 0
    for key in plain.keys() & cautious.keys():
        estimate, other = plain[key], cautious[key]
        assert estimate["savings_share"] == 1.0 and other["savings_share"] == pytest.approx(2 / 3, abs=1e-4)
        if other["filter_bytes"] != estimate["filter_bytes"]:
            continue  # the margin may pick another filter size, with other savings and costs
        compared += 1
        assert other["B_shuffle"] == pytest.approx(estimate["B_shuffle"] * 2 / 3, abs=1e-5), key
        costs = estimate["savings"] - estimate["B"]
        assert other["B"] == pytest.approx(other["savings"] - costs, abs=1e-5), key
    assert compared
    assert "of their estimate (--margin)" in aipq(*args, "--margin", "0.5").output
    assert "of their estimate (--margin)" not in aipq(*args).output
