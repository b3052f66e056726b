"""Staging (``--staging``): fused stage boundaries never change a result, and a boundary is written exactly where
the staging mode says (``ip/staging.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from conftest import ALL_QUERIES, LOCAL_FILES, REPARTITION_JOINS, analyzed, assert_same_rows, oracle_rows, run_to_rows

from aipq.config import Settings
from aipq.engine.adaptive_joins import hash_join_bytes
from aipq.estimator.edge_inputs import EdgeEstimator, SessionFacts
from aipq.estimator.parameters import DEFAULT_UNIT_COSTS, Calibration
from aipq.ip.planner import IpPlanner
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text

# the defaults (adaptive under adaptive staging) are test_tpch_results.py's left-deep runs; the quick lane runs
# `always` (stages written for their summaries, the rest fused), `off` fuses every stage as `none` does
STRATEGY_STAGINGS = [pytest.param(strategy, staging, marks=[pytest.mark.matrix] if strategy == "off" else [])
                     for strategy in ("off", "always", "adaptive")
                     for staging in ("adaptive", "none") if (strategy, staging) != ("adaptive", "adaptive")]
# the quick lane stages a few shapes (a chain, a correlated subquery, the widest join graph, self-joins under semi
# and anti joins); the matrix all 22, as test_tpch_results.py runs each of them under the defaults
STAGED_QUICK = (3, 9, 17, 21)
STAGED_QUERIES = [pytest.param(n, marks=() if n in STAGED_QUICK else pytest.mark.matrix) for n in ALL_QUERIES]


@pytest.mark.parametrize(("strategy", "staging"), STRATEGY_STAGINGS)
@pytest.mark.parametrize("broadcast", ["0", "10MB"])
@pytest.mark.parametrize("number", STAGED_QUERIES)
def test_tpch_rows_are_the_same_under_every_staging(aipq, duck, tmp_path, number, broadcast, strategy, staging):
    sql = query_text(number)
    actual = run_to_rows(aipq, tmp_path, f"tpch:{number}", "--staging", staging, "--ip", strategy,
                         "--broadcast-threshold", broadcast)
    assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())


def test_hive_staging_writes_every_stage_and_none_only_the_result(aipq):
    hive = analyzed(aipq, *REPARTITION_JOINS, "tpch:9", "--staging", "hive")
    assert all(s["measured"]["materialized"] for s in hive["stages"])
    none = analyzed(aipq, *REPARTITION_JOINS, "tpch:9", "--staging", "none")
    written = [s["id"] for s in none["stages"] if s["measured"]["materialized"]]
    assert written == [none["final_stage"]]
    fused = [s for s in none["stages"] if not s["measured"]["materialized"]]
    assert fused and all(s["measured"]["staging"].startswith("fused into S") for s in fused)


def test_adaptive_staging_writes_the_stages_that_build_summaries_and_they_still_prune(aipq):
    info = analyzed(aipq, *REPARTITION_JOINS, "tpch:9", "--staging", "adaptive", "--ip", "always")
    for stage in info["stages"]:
        builds = stage["information_passing"]["builds"]
        if stage["operator"] != "SCAN" and stage["id"] != info["final_stage"]:
            assert stage["measured"]["materialized"] == bool(builds), stage["name"]
    probes = [p for s in info["stages"] for p in s["measured"]["probes"] if p["rows_in"] is not None]
    assert probes and any(p["rows_out"] < p["rows_in"] for p in probes)
    # the probes of fused stages ran in their consumer's job, and were counted there
    fused_probes = [p for s in info["stages"] if not s["measured"]["materialized"] for p in s["measured"]["probes"]]
    assert all(p["rows_in"] is not None for p in fused_probes if not p["skipped"])


def test_none_staging_keeps_filtered_table_prepasses(aipq):
    info = analyzed(aipq, *REPARTITION_JOINS, "tpch:9", "--staging", "none", "--ip", "always", "--scan-reach", "0")
    stage_builds = [b for s in info["stages"] if s["operator"] != "SCAN"
                    for b in s["information_passing"]["builds"]]
    assert not stage_builds  # nothing but the result is written, so no stage output can build a summary
    assert any(s["operator"] == "SCAN" and s["information_passing"]["builds"] for s in info["stages"])
    # the pre-pass's summary probes lineitem in a fused stage: counted from the job that ran it
    fused_probes = [p for s in info["stages"] if not s["measured"]["materialized"] for p in s["measured"]["probes"]]
    assert fused_probes and all(p["rows_in"] is not None and p["rows_out"] < p["rows_in"] for p in fused_probes)


def test_explain_says_which_boundaries_are_written(aipq):
    result = aipq("explain", "tpch:3", "--staging", "adaptive", "--broadcast-threshold", "0")
    assert result.exit_code == 0, result.output
    assert "fused into S" in result.output and "output written: the result" in result.output


def test_staging_is_set_by_its_spark_style_name_in_a_workflow(aipq, tmp_path):
    script = tmp_path / "staged.sql"
    script.write_text("SET aipq.staging=none;\n" + query_text(3))
    result = aipq("explain", str(script), "--format", "json", "--broadcast-threshold", "0", "--ip", "off")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)["statements"][1]["plan"]
    assert plan["settings"]["staging"]["value"] == "none"
    assert [s["staging"]["materialized"] for s in plan["stages"]].count(True) == 1


def _decisions(tpch, staging: str, c_write: float):
    """Q9's IP decisions under ``staging`` with unit costs that make shuffling dear (so summaries pay) and
    writing a page cost ``c_write``."""
    settings = Settings(ip="adaptive", staging=staging, broadcast_threshold=0, scan_summaries=0)
    dag = plan_query(query_text(9), tpch, settings, LOCAL_FILES).dag
    costs = replace(DEFAULT_UNIT_COSTS, c_transfer=500.0, c_write=c_write)
    estimator = EdgeEstimator(dag, settings, None, Calibration(costs, 7e-8, "test"),
                              session=SessionFacts(files=LOCAL_FILES))
    return dag, IpPlanner(dag, settings, estimator=estimator).plan_all()


def _pruned(decisions) -> set[tuple]:
    return {(u.target.stage, u.target.place, u.target.label, u.target.column) for d in decisions for u in d.uses}


def test_adaptive_staging_builds_a_summary_only_where_it_pays_for_the_stage_write(tpch):
    dag, hive = _decisions(tpch, "hive", c_write=1000.0)
    built_hive = {b.stage for d in hive for b in d.builds}
    assert built_hive, "with dear shuffles some summary pays under hive staging"
    _, cheap = _decisions(tpch, "adaptive", c_write=0.0)
    # writing costs only a job: every place is still pruned, by a stage that is written anyway where one nearer
    # would have to be written for it (Q9's s_nationkey from the partsupp join, written for its l_orderkey
    # summary, not from the orders join after it)
    assert _pruned(cheap) == _pruned(hive)
    assert any("with its stage's write" in b.reason for d in cheap for b in d.builds)
    _, dear = _decisions(tpch, "adaptive", c_write=1000.0)
    # the same summaries are not worth writing their stage for, unless it is written anyway
    assert {b.stage for d in dear for b in d.builds} < built_hive


def test_analyze_shows_the_joins_spark_ran_in_fused_jobs(aipq):
    """--analyze reads the joins of the plan that ran (with AQE, its final plan): the final stage's job holds the
    joins of the stages fused into it."""
    info = analyzed(aipq, *REPARTITION_JOINS, "tpch:5", "--staging", "none")
    final = next(s for s in info["stages"] if s["id"] == info["final_stage"])
    joins = sum(final["measured"]["spark_joins"].values())
    planned = sum(len(s["reduce"].get("joins", [])) for s in info["stages"])
    assert joins >= planned > 1, final["measured"]["spark_joins"]
    hive = analyzed(aipq, *REPARTITION_JOINS, "tpch:5", "--staging", "hive")
    for stage in hive["stages"]:
        if stage["operator"] == "JOIN":
            assert stage["measured"]["spark_joins"].get("SortMergeJoin", 0) >= 1, stage["name"]


@pytest.mark.parametrize("hash_joins", ["auto", "off"])
def test_a_join_input_measured_small_per_task_is_hashed_not_sorted(aipq, duck, tmp_path, hash_joins):
    """Inside a job that computes fused stages, Spark's adaptive execution builds a hash table from a join input
    measured small in every reduce task (a shuffled hash join: no side sorted); ``--hash-joins off`` keeps
    sort-merge joins. The rows are the same either way."""
    args = ("tpch:5", "--staging", "none", "--hash-joins", hash_joins, "--broadcast-threshold", "0")
    info = json.loads(aipq("explain", *args, "--analyze", "--format", "json").output)
    ran = {name: count for s in info["stages"] for name, count in s["measured"]["spark_joins"].items()}
    assert (ran.get("ShuffledHashJoin", 0) >= 1) == (hash_joins == "auto"), ran
    if hash_joins == "off":
        assert ran.get("SortMergeJoin", 0) >= 1, ran
    assert_same_rows(run_to_rows(aipq, tmp_path, *args), oracle_rows(duck, query_text(5)), ordered=True)


def test_hash_joins_take_an_eighth_of_a_tasks_memory_and_never_less_than_sparks_advisory_size():
    mb = 1 << 20
    assert hash_join_bytes(Settings(), 1024 * mb, 64 * mb) == 128 * mb
    assert hash_join_bytes(Settings(), 8192 * mb, 64 * mb) == 256 * mb  # at most 256 MB
    assert hash_join_bytes(Settings(), 256 * mb, 64 * mb) == 0  # Spark would not convert below its advisory size
    assert hash_join_bytes(Settings(hash_joins="off"), 1024 * mb, 64 * mb) == 0


SMALL_AGGREGATE = "(SELECT o_custkey, COUNT(*) AS n FROM orders WHERE o_orderkey < 40 GROUP BY o_custkey) a"


def _broadcast_measures(info: dict) -> list[dict]:
    return [note for stage in info["stages"] for note in stage["measured"].get("measured_broadcasts", [])]


@pytest.mark.parametrize(("staging", "strategy"), [("hive", "off"), ("adaptive", "always")])
def test_a_stage_output_measured_small_is_broadcast_to_its_join(aipq, duck, tmp_path, staging, strategy):
    """Hive's conditional map join: a finished stage's output within the broadcast threshold is copied to the
    tasks of the join that reads it, which then shuffles neither input; the rows stay the same. (Adaptive staging
    writes the stages that build summaries.)"""
    args = ("tpch:18", "--staging", staging, "--ip", strategy, "--broadcast-threshold", "16KB")
    info = json.loads(aipq("explain", *args, "--analyze", "--format", "json").output)
    notes = _broadcast_measures(info)
    assert notes and all(0 < size <= 16 * 1024 for n in notes for size in n["stage_bytes"].values()), notes
    ran = sum(s["measured"]["spark_joins"].get("BroadcastHashJoin", 0) for s in info["stages"])
    assert ran >= len(notes), info["stages"]
    assert_same_rows(run_to_rows(aipq, tmp_path, *args), oracle_rows(duck, query_text(18)), ordered=True)
    planned = json.loads(aipq("explain", *args, "--runtime-broadcast", "off", "--analyze", "--format", "json").output)
    assert not _broadcast_measures(planned)


@pytest.mark.parametrize(("kind", "broadcast"), [("LEFT", False), ("FULL", False), ("RIGHT", True), ("", True)])
def test_a_small_stage_output_on_the_preserved_side_of_an_outer_join_is_not_broadcast(aipq, duck, tmp_path, kind,
                                                                                       broadcast):
    """Spark builds a broadcast hash table only from the side whose unmatched rows are dropped."""
    sql = (f"SELECT c_name, n FROM {SMALL_AGGREGATE} {kind} JOIN customer ON a.o_custkey = c_custkey "
           "WHERE c_nationkey < 5 OR c_nationkey IS NULL")
    args = ("--sql", sql, "--staging", "hive", "--ip", "off", "--broadcast-threshold", "16KB")
    info = json.loads(aipq("explain", *args, "--analyze", "--format", "json").output)
    assert bool(_broadcast_measures(info)) == broadcast, info["stages"]
    assert_same_rows(run_to_rows(aipq, tmp_path, *args), oracle_rows(duck, sql), ordered=False)


@dataclass(frozen=True)
class _FixedEdge:
    """An edge estimate as the IP planner reads it, keeping ``survive`` of its place."""

    survive: float
    total: float = 2.0
    one_time: float = 0.0
    filter_bytes: int = 1 << 20
    expected_keys: float | None = 1000.0

    @property
    def savings(self) -> float:
        return self.total

    def with_downstream(self, _saved: float) -> _FixedEdge:
        return self

    def as_dict(self) -> dict:
        return {}


class _FixedEstimator:
    """The benefit estimator's answers fixed per producer stage (its summary keeps ``survive[producer]``), and
    writing any stage that could be fused costs ``write_seconds``: the planner's own rules decide the rest."""

    def __init__(self, survive: dict[int, float], write_seconds: float, saves: float = 2.0):
        self.survive, self.write_seconds, self.saves = survive, write_seconds, saves
        self.priced: list[int] = []  # the stages whose write was priced

    def __call__(self, candidate, _built, pruning) -> _FixedEdge:
        """What the edge saves (``saves``) scales with what summaries built before it leave at its place."""
        return _FixedEdge(self.survive.get(candidate.producer, 0.5), total=self.saves * pruning.at(candidate.target))

    def materialization_seconds(self, stage_id: int) -> float:
        self.priced.append(stage_id)
        return self.write_seconds


def test_adaptive_prices_a_stages_write_only_for_the_summaries_it_would_build(tpch):
    """Pricing a stage's write estimates its output (a repository lookup by its subplan's text, its plan's
    cardinality): a query handed to Spark pays that in each run, so it is done only for a stage with summaries
    that may pay."""
    settings = Settings(ip="adaptive", staging="adaptive", broadcast_threshold=0, scan_summaries=0)
    dag = plan_query(query_text(10), tpch, settings, LOCAL_FILES).dag
    idle = _FixedEstimator({}, write_seconds=0.5, saves=0.0)
    assert not [b for d in IpPlanner(dag, settings, estimator=idle).plan_all() for b in d.builds]
    assert idle.priced == []
    paying = _FixedEstimator({}, write_seconds=0.5)
    builds = [b for d in IpPlanner(dag, settings, estimator=paying).plan_all() for b in d.builds]
    assert builds and {b.stage for b in builds} <= set(paying.priced)


@pytest.mark.parametrize(("nearer_keeps", "builder"), [(0.1, 1), (0.01, 2)])
def test_a_stage_written_for_one_summary_builds_the_next_rather_than_a_nearer_stage_written_for_it(
        tpch, nearer_keeps, builder):
    """Q10: the filtered orders (S1) are written for their ``o_custkey`` summary; their join with customer (S2)
    holds the same order keys. Where S2's ``o_orderkey`` summary would keep as much of lineitem as S1's, S1 builds
    it and S2 is not written for it; where S2's keeps far less, S2 builds it."""
    settings = Settings(ip="adaptive", staging="adaptive", broadcast_threshold=0, scan_summaries=0)
    dag = plan_query(query_text(10), tpch, settings, LOCAL_FILES).dag
    assert [s.operator for s in dag.stages][:2] == ["MAP", "JOIN"]
    estimator = _FixedEstimator({1: 0.1, 2: nearer_keeps}, write_seconds=0.5)
    builds = {(b.stage, b.column) for d in IpPlanner(dag, settings, estimator=estimator).plan_all()
              for b in d.builds}
    assert (1, "o_custkey") in builds
    assert {stage for stage, column in builds if column == "o_orderkey"} == {builder}
