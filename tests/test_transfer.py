"""Predicate transfer (--ip transfer): the schedule over the join graph, how explain shows it, and what a run
reports of it. That its pruning never changes a row is in test_tpch_results.py, test_tpcds.py and
test_ip_safety.py."""

from __future__ import annotations

import json
import re

import duckdb
import pytest
from conftest import LOCAL_FILES, assert_same_rows, oracle_rows

from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.pass_job import MAX_NESTED_PASSES
from aipq.estimator.join_estimates import KnownTables, stage_row_estimates
from aipq.ip.bloom_sizing import bloom_bits
from aipq.ip.planner import IpPlanner
from aipq.pipeline import plan_query
from aipq.tpch.queries import query_text


def passes(dag) -> list[tuple[str, str]]:
    """(table, phase) of each pass, in the order they run."""
    return [(s.tables[0].split(".")[-1], dag.transfer_passes[s.id]) for s in dag.stages if s.id in dag.transfer_passes]


def test_q5s_region_filter_travels_forward_to_lineitem_and_back(tpch):
    dag = plan_query(query_text(5), tpch, Settings(ip="transfer", broadcast_threshold=0), LOCAL_FILES).dag
    order = passes(dag)
    forward = [table for table, phase in order if phase == "forward"]
    backward = [table for table, phase in order if phase == "backward"]
    # smallest first: region holds the filter, lineitem is the largest and is passed once
    assert forward[0] == "region" and forward[-1] == "lineitem"
    assert "lineitem" not in backward and backward[-1] == "region"
    assert all(s.operator == "SCAN" for s in dag.stages[:len(order)])  # every pass before any join
    # each table's reading stage probes its neighbours' last passes
    last = {table: stage_id for stage_id, table in
            ((s.id, s.tables[0].split(".")[-1]) for s in dag.stages if s.id in dag.transfer_passes)}
    reading = {(t.label, t.producer) for t in dag.transfers if t.stage not in dag.transfer_passes}
    assert ("lineitem", last["orders"]) in reading and ("orders", last["lineitem"]) in reading


def test_a_pass_reads_only_tables_a_pre_pass_may_read(tpch):
    # --scan-summaries 1 B: the bound is an eighth of lineitem, which leaves lineitem and orders out of the passes
    settings = Settings(ip="transfer", broadcast_threshold=0, scan_summaries=1)
    dag = plan_query(query_text(5), tpch, settings, LOCAL_FILES).dag
    passed = {table for table, _ in passes(dag)}
    assert passed and not passed & {"lineitem", "orders"}
    assert {"region", "nation", "customer", "supplier"} >= passed
    # the large tables are still probed where they are read, with the small tables' last summaries
    probed = {t.label for t in dag.transfers if t.stage not in dag.transfer_passes}
    assert {"lineitem", "orders"} <= probed


def test_a_query_without_a_filter_or_a_join_has_no_schedule(tpch):
    one_table = plan_query(query_text(1), tpch, Settings(ip="transfer"), LOCAL_FILES).dag
    assert not one_table.transfer_passes and not one_table.transfers
    unfiltered = "select count(*) from orders join customer on o_custkey = c_custkey"
    assert not plan_query(unfiltered, tpch, Settings(ip="transfer"), LOCAL_FILES).dag.transfer_passes


def test_explain_shows_the_schedule_as_a_tree_json_and_dot(aipq):
    every = ("--transfer-survivors", "1")  # Q9's whole schedule, backward passes included
    tree = aipq("explain", "tpch:9", "--ip", "transfer", "--broadcast-threshold", "0", *every)
    assert tree.exit_code == 0, tree.output
    assert "predicate transfer" in tree.output and "forward: part" in tree.output and "backward:" in tree.output
    info = json.loads(aipq("explain", "tpch:9", "--ip", "transfer", "--format", "json", *every).output)
    schedule = info["transfer_schedule"]
    assert schedule["passes"][0]["table"] == "part" and schedule["passes"][0]["phase"] == "forward"
    assert any(p["probed_by"] for p in schedule["passes"][1:])
    dot = aipq("explain", "tpch:9", "--ip", "transfer", "--format", "dot", *every).output
    assert "style=dashed" in dot and "p_partkey → lineitem.l_partkey" in dot


def test_analyze_reports_the_rows_each_transfer_removed(aipq, tmp_path):
    out = tmp_path / "q9.parquet"
    result = aipq("run", "tpch:9", "--ip", "transfer", "--broadcast-threshold", "0", "--analyze",
                  "--output", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert "predicate transfer" in result.output
    # part's 'green' filter prunes lineitem in its pass, and what lineitem keeps prunes orders
    assert "on lineitem.l_partkey:" in result.output and "on orders.o_orderkey:" in result.output
    assert "kept)" in result.output


def test_pass_filters_are_sized_for_the_keys_the_pass_keeps(home, tpch, tpch_statistics):
    costing = RunContext(home).join_costing()
    dag = plan_query(query_text(2), tpch, Settings(ip="transfer"), LOCAL_FILES, costing=costing).dag
    tables = {s.id: s.tables[0].split(".")[-1] for s in dag.stages if s.id in dag.transfer_passes}
    partsupp = [keys for (stage_id, _), keys in dag.transfer_keys.items() if tables[stage_id] == "partsupp"]
    # part's filter keeps a few hundredths of a percent of parts, 4 partsupp rows each: sized for those keys,
    # not for the table's 80 rows per part of SF 1 or its rows at this scale
    rows = RunContext(home).repository.table(tpch.lookup("partsupp").path).rows
    assert partsupp and max(partsupp) < rows / 20
    planner = IpPlanner(dag, Settings(ip="transfer"))
    sized = [planner.strategy.filter_bits(planner, dag.stage(stage_id), column)
             for stage_id, column in dag.transfer_keys]
    assert all(bits is not None and bits <= bloom_bits(rows, 0.03, 1 << 20) for bits in sized)


def test_the_passes_run_as_one_spark_job_and_report_each_pass(aipq, tmp_path):
    report = tmp_path / "q2.json"
    result = aipq("run", "tpch:2", "--ip", "transfer", "--output", str(tmp_path / "q2.parquet"), "--force",
                  "--report", str(report))
    assert result.exit_code == 0, result.output
    stages = json.loads(report.read_text())["result"]["stages"]
    passes = [s for s in stages.values() if s["staging"].startswith("summary passes")]
    # Q2's 17 passes nest too deep for one plan (MAX_NESTED_PASSES): a few jobs, each timed on its first pass
    assert len(passes) > MAX_NESTED_PASSES
    timed = [s for s in passes if s["seconds"] > 0]
    assert 1 < len(timed) < len(passes) // 2
    assert all(s["summaries"] and s["rows_written"] >= 0 for s in passes)
    assert not any(s["kept_rows"] for s in stages.values())  # tables under --transfer-keep's 10MB: read again
    # a pass probed inside the job counts what it kept: nation keeps Europe's 5 of 25
    assert any(p["rows_in"] == 25 and p["rows_out"] == 5 for s in passes for p in s["probes"])


TPCH_PREFIXES = {"r": "region", "n": "nation", "c": "customer", "s": "supplier", "o": "orders", "l": "lineitem",
                 "p": "part", "ps": "partsupp"}


def file_scans(spark, job_groups: list[str]) -> dict[str, int]:
    """Rows each TPC-H table's file scans read in the SQL executions that ran jobs of ``job_groups``, from
    Spark's SQL status store. A scan counts in the execution whose tasks read its files: a cached relation's plan
    is listed under every plan that reads the cache (once per place), its metrics filled only where the cache
    was, so each scan (accumulator) counts once per execution."""
    java = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters.asJava
    tracker = spark.sparkContext.statusTracker()
    jobs = {job for group in job_groups for job in tracker.getJobIdsForGroup(group)}
    store = spark._jsparkSession.sharedState().statusStore()
    read: dict[tuple[int, int], tuple[str, int]] = {}  # (execution, accumulator) → (table folder, rows)
    for execution in java(store.executionsList()):
        if not jobs & {int(j) for j in java(execution.jobs().keySet())}:
            continue
        values = {int(k): v for k, v in java(store.executionMetrics(execution.executionId())).items()}
        for node in java(store.planGraph(execution.executionId()).allNodes()):
            if not node.name().startswith("Scan parquet"):
                continue
            # the location is cut short in the description: TPC-H's column prefix names the table
            table = TPCH_PREFIXES[re.match(r"FileScan \w+ \[(\w+?)_", node.desc()).group(1)]
            for metric in java(node.metrics()):
                value = values.get(metric.accumulatorId())
                if metric.name() == "number of output rows" and value:
                    rows = int(str(value).replace(",", ""))
                    read[(execution.executionId(), metric.accumulatorId())] = (table, rows)
    scanned: dict[str, int] = {}
    for table, rows in read.values():
        scanned[table] = scanned.get(table, 0) + rows
    return scanned


@pytest.mark.slow  # every pass keeps its rows and runs as an action of its own: 30 s at the tests' scale
def test_a_passed_table_is_read_once_its_join_stage_reads_the_rows_its_pass_kept(aipq, duck, spark, tmp_path,
                                                                                  tpch_statistics):
    out, report = tmp_path / "q5.parquet", tmp_path / "q5.json"
    # the test's tables are small: every pass keeps its rows
    result = aipq("run", "tpch:5", "--ip", "transfer", "--transfer-keep", "0", "--broadcast-threshold", "0",
                  "--output", str(out), "--force", "--report", str(report))
    assert result.exit_code == 0, result.output
    sql = query_text(5)
    actual = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    assert_same_rows(actual, oracle_rows(duck, sql), ordered=True)
    run = json.loads(report.read_text())["result"]
    stages = run["stages"]
    passes = {int(s) for s, m in stages.items() if m["staging"].startswith("summary passes")}
    keeping = {s for s in passes if "kept its rows" in stages[str(s)]["kept_rows"]}
    reading = [m for s, m in stages.items() if int(s) not in passes and m["kept_rows"].startswith("read the rows")]
    assert keeping and reading
    # a backward pass reads the forward pass's rows of its table, not the table again
    assert any(stages[str(s)]["kept_rows"].startswith("read the rows") for s in passes)
    groups = [f"aipq-{run['run_id']}-S{s}" for s in stages] + [f"aipq-{run['run_id']}-passes"]
    scanned = file_scans(spark, groups)
    for table in ("region", "nation", "customer", "supplier", "orders", "lineitem"):
        # each table's files read once in the run: by its (forward) pass, or by its join stage
        rows = duck.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        assert scanned.get(table, 0) <= rows, (table, scanned)
    assert scanned.get("orders", 0) > 0, scanned


def pass_tables(home, tpch, number: int, survivors: float) -> list[tuple[str, str]]:
    """Each transfer pass of TPC-H query ``number`` as (table, phase), planned with ``--transfer-survivors``."""
    settings = Settings(ip="transfer", transfer_survivors=survivors)
    dag = plan_query(query_text(number), tpch, settings, LOCAL_FILES, costing=RunContext(home).join_costing()).dag
    return [(dag.stage(stage_id).tables[0].split(".")[-1], phase)
            for stage_id, phase in sorted(dag.transfer_passes.items())]


def test_a_pass_that_would_keep_most_of_its_table_is_not_made(home, tpch, tpch_statistics):
    every = pass_tables(home, tpch, 10, 1.0)
    chosen = pass_tables(home, tpch, 10, Settings().transfer_survivors)
    # Q10: a quarter's orders are a few percent of orders, but the customers who placed them are most customers
    assert ("orders", "forward") in chosen and ("customer", "forward") in every
    assert ("customer", "forward") not in chosen and set(chosen) < set(every)
    assert pass_tables(home, tpch, 10, 0.0) == []  # every estimate known: no pass keeps nothing


def test_a_passs_estimated_rows_count_the_probes_it_runs_with(home, tpch, duck, tpch_statistics):
    """A pass's rows as recorded beside its actual rows are what its filters and probes are estimated to keep,
    not its table's: Q2's partsupp passes, probed with part's and supplier's keys, keep a few percent of it."""
    settings = Settings(ip="transfer", transfer_survivors=1.0)
    context = RunContext(home)
    dag = plan_query(query_text(2), tpch, settings, LOCAL_FILES, costing=context.join_costing()).dag
    estimates = stage_row_estimates(dag, KnownTables(context.repository, context.storage))
    partsupp = [stage_id for stage_id in dag.transfer_passes if dag.stage(stage_id).tables[0].endswith("partsupp")]
    rows = duck.execute("SELECT count(*) FROM partsupp").fetchone()[0]
    assert partsupp and all(estimates[stage_id] < 0.05 * rows for stage_id in partsupp)
