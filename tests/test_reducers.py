"""Hive-style reduce tasks per stage (``--reducer-bytes``): the rule, that Spark runs what it chose, that the
estimator prices the same r, and that no row changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import LOCAL_FILES, assert_same_rows, local_bytes, oracle_rows

from aipq.config import MB, Settings
from aipq.engine.context import RunContext
from aipq.engine.executor import run_dag
from aipq.engine.work_dirs import remove_work_dir
from aipq.pipeline import plan_query
from aipq.planner.reducers import reduce_tasks, stage_input_bytes
from aipq.tpch.queries import query_text

REPARTITION = {"broadcast_threshold": 0}


@pytest.mark.parametrize(("per_reducer", "input_bytes", "expected"), [
    (0, 10 * MB, 8),  # off: the fixed count
    (64 * MB, None, 8),  # a size not known yet: the most
    (64 * MB, 1, 2),  # tiny: one per core
    (64 * MB, 64 * MB, 2),  # one reducer's worth, still one per core
    (64 * MB, 3 * 64 * MB + 1, 4),  # Hive rounds up: ceil(192 MB + 1 B / 64 MB)
    (64 * MB, 10_000 * MB, 8),  # capped at the most
])
def test_reduce_tasks_is_hives_rule_between_the_cores_and_the_most(per_reducer, input_bytes, expected):
    settings = Settings(shuffle_partitions=8, reducer_bytes=per_reducer)
    assert reduce_tasks(settings, input_bytes, cores=2) == expected


def test_the_fewest_is_never_above_the_most():
    assert reduce_tasks(Settings(shuffle_partitions=1, reducer_bytes=MB), 1, cores=2) == 1


def test_a_stages_input_is_its_tables_files_and_its_input_stages_outputs(tpch):
    dag = plan_query(query_text(3), tpch, Settings(**REPARTITION), LOCAL_FILES).dag
    first, second = dag.stages[0], next(s for s in dag.stages if s.input_stages)
    assert stage_input_bytes(first, lambda stage: None, local_bytes) > 0  # base tables only: known before anything ran
    assert stage_input_bytes(second, lambda stage: None, local_bytes) is None  # its input stage has not run
    with_tables = stage_input_bytes(second, lambda stage: 0, local_bytes)
    assert stage_input_bytes(second, lambda stage: 1000, local_bytes) == with_tables + 1000 * len(second.input_stages)


@pytest.mark.parametrize(("per_reducer", "tasks"), [(1, 8), (1024 * MB, 2)])
def test_spark_runs_the_chosen_reduce_tasks_and_the_rows_stay_the_same(spark, tpch, home, duck, per_reducer,
                                                                       tasks):
    settings = Settings(ip="adaptive", staging="hive", reducer_bytes=per_reducer, **REPARTITION)
    context = RunContext(home, settings)
    record = run_dag(context, plan_query(query_text(3), tpch, settings, LOCAL_FILES).dag)
    try:
        assert [m.reduce_tasks for m in record.stages] == [tasks] * len(record.stages)
        join = next(m for m in record.stages if m.operator == "JOIN")
        # a reduce task writes one file when its partition has rows, and the first join's thousands of rows
        # reach every partition
        files = list((Path(record.work_dir) / f"stage-{join.stage_id}").glob("part-*"))
        assert len(files) == tasks
        rows = [tuple(r) for r in spark.read.parquet(str(record.result_path)).collect()]
        assert_same_rows(rows, oracle_rows(duck, query_text(3)), ordered=True)
    finally:
        remove_work_dir(context.storage, record.work_dir)


def test_the_estimator_prices_the_reduce_tasks_the_stage_will_run(aipq):
    def estimated_r(*args: str) -> set[int]:
        result = aipq("explain", "tpch:3", "--ip", "adaptive", "--broadcast-threshold", "0", "--format", "json",
                      *args)
        assert result.exit_code == 0, result.output
        info = json.loads(result.output)
        return {decision["estimate"]["r"] for stage in info["stages"]
                for decisions in stage["information_passing"].values() for decision in decisions
                if decision.get("estimate")}

    assert estimated_r("--reducer-bytes", "0") == {8}
    # before the run, the stages that read only tables have known inputs: one reduce task per core for them
    assert 2 in estimated_r("--reducer-bytes", "1GB")
    assert 2 in estimated_r()  # the default is one per 64 MB


def test_cli_and_workflow_take_hives_setting_and_reject_a_bad_one(aipq, tmp_path):
    result = aipq("explain", "tpch:3", "--reducer-bytes", "-1")
    assert result.exit_code != 0 and "--reducer-bytes" in result.output
    workflow = tmp_path / "reducers.sql"
    workflow.write_text("SET hive.exec.reducers.bytes.per.reducer=1073741824;\n"
                        "SELECT o_orderpriority, count(*) AS n FROM orders GROUP BY o_orderpriority;\n")
    explained = aipq("explain", str(workflow))
    assert explained.exit_code == 0, explained.output
    assert "ignored" not in explained.output and "one per 1.0 GB" in explained.output
    workflow.write_text("SET hive.exec.reducers.bytes.per.reducer=lots;\nSELECT 1;\n")
    bad = aipq("run", str(workflow))
    assert bad.exit_code != 0 and "hive.exec.reducers.bytes.per.reducer" in bad.output


def _last_execution_id(spark) -> int:
    """The id of the session's latest SQL execution (-1: none yet)."""
    store = spark._jsparkSession.sharedState().statusStore()
    count = store.executionsCount()
    return store.executionsList(count - 1, 1).apply(0).executionId() if count else -1


def _physical_plans_since(spark, last_id: int) -> list[str]:
    """The physical plans of the SQL executions the session ran after execution ``last_id`` (looked up by id: the
    status store keeps a bounded number of executions, so counts stop growing in a long test session)."""
    store = spark._jsparkSession.sharedState().statusStore()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    count = store.executionsCount()
    recent = store.executionsList(max(0, count - 200), min(count, 200))
    executions = [recent.apply(i) for i in range(recent.size())]
    return [e.physicalPlanDescription() for e in executions if e.executionId() > last_id]


@pytest.mark.parametrize("sql", [
    "SELECT l_orderkey, l_linenumber, l_extendedprice FROM lineitem "
    "ORDER BY l_extendedprice DESC, l_orderkey, l_linenumber",
    "SELECT l_suppkey, count(*) AS n FROM lineitem GROUP BY l_suppkey ORDER BY n DESC, l_suppkey",
])
def test_the_result_is_sorted_in_one_task_without_range_partitioning_and_keeps_its_order(spark, tpch, home, duck,
                                                                                          sql):
    """A result is written as one ordered file: its rows are gathered into one partition and sorted there,
    where Spark would sample them in a job of its own to range-partition them over every reduce task."""
    settings = Settings(ip="adaptive", staging="hive", reducer_bytes=1, **REPARTITION)  # eight reduce tasks
    context = RunContext(home, settings)
    first = _last_execution_id(spark)
    record = run_dag(context, plan_query(sql, tpch, settings, LOCAL_FILES).dag)
    try:
        plans = _physical_plans_since(spark, first)
        assert any("SinglePartition" in plan for plan in plans)
        assert not any("rangepartitioning" in plan for plan in plans)
        assert len(list(Path(record.result_path).glob("part-*"))) == 1  # one file, without a coalesce on top
        rows = [tuple(r) for r in spark.read.parquet(str(record.result_path)).collect()]
        assert_same_rows(rows, oracle_rows(duck, sql), ordered=True)
    finally:
        remove_work_dir(context.storage, record.work_dir)
