"""Run a stage DAG on Spark: each stage in dependency order, its output written as parquet in the run's work
directory and read back by its consumers (the paper's job plan, with each job's T_r as a parquet write).

Each stage goes through the same steps (``STAGE_STEPS``), in order, until one of them finishes it:
decide its summaries, serve it from the stage-output cache, choose whether its output is written, fuse it into
its consumer or run its job, keep its output in the cache, record what it measured, and re-plan the stages not yet
run. The state the steps share is one ``DagRun``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial

from aipq import faults
from aipq.engine import jvm
from aipq.engine.adaptive_joins import fused_job_conf, runtime_broadcast_threshold
from aipq.engine.context import RunContext
from aipq.engine.dag_run import DagRun, RunOptions, StageStep
from aipq.engine.kept_rows import rows_to_keep
from aipq.engine.pass_job import MAX_NESTED_PASSES, PassJob, kept_rows_note
from aipq.engine.records import RunRecord, StageMetrics
from aipq.engine.session import sql_conf
from aipq.engine.stage_job import Fused, StageJob, output_is_read
from aipq.engine.work_dirs import remove_work_dir
from aipq.estimator.join_estimates import JoinEstimates, KnownTables, stage_estimate_figures
from aipq.ip import staging
from aipq.ip.decisions import StageDecisions, drops_output_rows, keeping_output_exact
from aipq.planner import reducers
from aipq.planner.logical import Join, top_limit
from aipq.planner.physical import measured_broadcasts
from aipq.planner.stages import Stage, StageDag, StageRead


def run_dag(context: RunContext, dag: StageDag, options: RunOptions | None = None) -> RunRecord:
    """Run ``dag``'s stages in order under ``context``'s settings; the record holds where its result is."""
    options = options or RunOptions()
    run = DagRun.start(context, dag, options)
    statistics = options.statistics
    try:
        _run_stages(run)
        _sum_shuffle_figures(run.context.spark, run.record.stages)
        if statistics is not None:
            statistics.settle()
    except BaseException:
        remove_work_dir(context.storage, run.record.work_dir)  # a failed run leaves no half-written outputs
        if statistics is not None:
            with contextlib.suppress(Exception):  # the run's own failure is the one to report
                statistics.settle()
        raise
    finally:
        with contextlib.suppress(Exception):  # freeing early is a courtesy: the JVM's collector frees them anyway
            run.runner.store.release()
        with contextlib.suppress(Exception):  # kept rows are cached blocks: freed now, the run failed or not
            run.runner.compiler.kept.release()
    record = run.record
    record.seconds = time.perf_counter() - run.started
    record.result_rows = record.stages[-1].rows_written
    if statistics is not None:
        record.statistics_seconds = statistics.seconds
        record.statistics_collected = statistics.collected_tables
    record.estimating = _estimates_of(run)
    return record


def _estimates_of(run: DagRun) -> Callable[[RunRecord], None] | None:
    """How the record's stages get their estimates when first asked (``RunRecord.fill_estimates``; nothing
    without a statistics repository)."""
    tables = _tables_known_before(run)
    return None if tables is None else partial(record_estimates, run.dag, tables)


def _tables_known_before(run: DagRun) -> KnownTables | None:
    """What the statistics repository knew when the run started (None without one): its estimates' source."""
    context = run.context
    if context.repository is None:
        return None
    return KnownTables(context.repository, context.storage, run.record.started_at)


def record_estimates(dag: StageDag, tables: KnownTables, record: RunRecord) -> None:
    """Each stage's estimated rows beside its actual rows, so that the q-error of any workload can be read from
    its runs (``--report``, ``Result.run``): as estimated before the run (the rows an earlier run of the same
    subplan recorded before this one started, else the tables' statistics), times the share of them its
    summaries were expected to keep."""
    measured = {m.stage_id: (m.materialized, m.rows_written) for m in record.stages}
    kept = {m.decisions.stage: m.decisions.rows_kept for m in record.stages if m.decisions is not None}
    figures = stage_estimate_figures(dag, tables, measured, kept)
    for metrics in record.stages:
        metrics.estimate = figures.get(metrics.stage_id, {})


def _sum_shuffle_figures(spark, stages: list[StageMetrics]) -> None:
    """Each stage's Spark I/O figures, read once the run's jobs are done: one wait for Spark's listener bus
    instead of one after every stage."""
    grouped = [metrics for metrics in stages if metrics.job_group]
    for metrics, figures in zip(grouped, jvm.job_groups_figures(spark, [m.job_group for m in grouped]),
                                strict=True):
        metrics.shuffle = figures






def _run_stages(run: DagRun) -> None:
    """Every stage through the stage steps, under the run's Spark settings."""
    with sql_conf(run.context.spark, run.conf):
        while (step := run.next_stage()) is not None:
            for handle in STAGE_STEPS:
                if not handle(run, step):
                    break


# ---- the stage steps: each returns whether the stage goes on to the next -------------------------------------
def run_gathered_passes(run: DagRun, step: StageStep) -> bool:
    """Before the first stage that is not a summary pass, the passes gathered so far run as one job."""
    if run.passes is not None and run.passes.pending and not _may_be_pass(run, step.stage):
        _record_passes(run, run.passes)
    return True


def _record_passes(run: DagRun, passes: PassJob) -> None:
    store = run.runner.store
    for metrics in passes.run():
        stage = run.dag.stage(metrics.stage_id)
        run.written[stage.id] = metrics.rows_written
        run.bytes_written[stage.id] = 0
        if run.statistics is not None:
            # the keys' sketches that writing the output would have observed: the summaries' own, of the same rows
            sketches = {f"k{i}_hll": store.built[(stage.id, column)].sketch
                        for i, column in enumerate(stage.consumer_keys) if (stage.id, column) in store.built}
            run.statistics.stage_finished(stage, metrics.decisions, sketches, metrics.rows_written, 0)
        run.record.stages.append(metrics)
        run.options.listener.stage_finished(metrics)


def decide(run: DagRun, step: StageStep) -> bool:
    """The summaries the stage builds and uses (Algorithms 1-2); a summary pre-pass none wants is done."""
    stage, statistics, ip = step.stage, run.statistics, run.ip
    assert ip is not None
    if statistics is not None and ip.estimator is not None and ip.has_edges(stage):
        # the estimator reads table statistics from the repository: decide on what earlier stages collected; a
        # stage with no edge to decide on does not wait for the storing thread
        statistics.settle_tables()
    if stage.operator == "SCAN":
        for twin in run.finished_twins(stage):
            run.runner.store.alias(twin, stage.id)
    deciding = time.perf_counter()
    step.decisions = ip.decide(stage, run.runner.store.infos())
    step.decision_seconds = time.perf_counter() - deciding
    if stage.operator == "SCAN" and all(build.key in run.runner.store.built for build in step.decisions.builds):
        return False  # a summary pre-pass whose summaries no edge wants, or built before a re-plan
    step.inputs = run.fused_into.pop(stage.id, [])
    return True


def gather_pass(run: DagRun, step: StageStep) -> bool:
    """A summary pass waits to run in one job with the others (``run_gathered_passes``); a pre-pass that collects
    statistics or builds other summaries than Bloom filters runs alone, as any stage."""
    passes = run.passes
    if passes is None or not _may_be_pass(run, step.stage):
        return True
    assert step.decisions is not None
    if not _gathers(run, step.stage, step.decisions):
        if passes.pending:
            _record_passes(run, passes)
        return True
    keep = rows_to_keep(run.dag, step.stage, run.statistics, run.sizes, run.settings.transfer_keep)
    if passes.nested(step.decisions) > MAX_NESTED_PASSES or (keep is not None and passes.pending):
        _record_passes(run, passes)  # a pass that keeps rows probes the filters as built, not as subqueries
    passes.add(step.stage, step.decisions, step.decision_seconds, keep)
    if keep is not None:
        _record_passes(run, passes)  # its rows cached by an action of its own before any plan reads them
    return False


def serve_from_cache(run: DagRun, step: StageStep) -> bool:
    """A stage whose output the stage-output cache holds is read from there, with the summaries it builds."""
    cache, stage = run.options.cache, step.stage
    step.cache_key = cache.stage_key(run.dag, stage.id, run.settings) if cache is not None else None
    if step.cache_key is None:
        return True
    assert cache is not None and step.decisions is not None
    hit = cache.lookup(step.cache_key.key, run.options.reuse, run.runner.parquet_rows())
    if hit is None:
        return True
    run.paths[stage.id] = hit.path  # its rows as an earlier statement or run wrote them: exact, read as they are
    run.written[stage.id], run.bytes_written[stage.id] = hit.rows, hit.bytes
    whose = "this" if hit.command == cache.command else "an earlier"
    started = time.perf_counter()
    built = run.runner.summaries_of_output(stage, step.decisions, hit.path, step.group)
    run.record.stages.append(StageMetrics(
        stage.id, stage.operator, time.perf_counter() - started, hit.rows, hit.bytes, decisions=built,
        decision_seconds=step.decision_seconds, summaries=[run.runner.store.built[b.key] for b in built.builds],
        staging=f"reused from the stage-output cache ({hit.description} of {whose} command)", reused=True))
    return False


def choose_staging(run: DagRun, step: StageStep) -> bool:
    """Whether the stage's output is written (``ip/staging.py``; a stage a batch shares always is), whether it
    is exact, and which of its joins turn map-side from measured input sizes."""
    stage = step.stage
    assert step.decisions is not None
    shared = step.cache_key is not None and step.cache_key.key in run.options.shared
    if shared:  # another query of the batch reads it too: kept whole, then read from the cache
        step.decisions = keeping_output_exact(step.decisions)
    if drops_output_rows(step.decisions) or set(run.dag.dependency.get(stage.id, [])) & run.inexact:
        run.inexact.add(stage.id)
    step.written, step.why = staging.materialized(run.dag, stage, run.settings, bool(step.decisions.builds))
    if shared:
        step.written, step.why = True, "shared: another query of the batch computes the same subplan"
    step.broadcasts = measured_broadcasts(stage.plan, runtime_broadcast_threshold(run.settings), run.sizes,
                                          run.read_bytes)
    return True


def fuse(run: DagRun, step: StageStep) -> bool:
    """A stage whose output is not written is compiled inside its consumer's job, which counts its probes."""
    if step.written:
        return True
    stage, decisions = step.stage, step.decisions
    assert decisions is not None
    fused = Fused(stage, decisions, [])
    run.runner.compiler.fused[stage.id] = lambda: run.runner.plan(
        stage, decisions, fused.probes, step.group, run.statistics, True, step.broadcasts)
    consumer = next(iter(run.dag.dataflow.get(stage.id, [])))
    run.fused_into.setdefault(consumer, []).extend([fused, *step.inputs])
    run.record.stages.append(StageMetrics(
        stage.id, stage.operator, 0.0, 0, 0, probes=fused.probes, decisions=decisions,
        decision_seconds=step.decision_seconds, materialized=False, staging=step.why,
        measured_broadcasts=_broadcast_notes(stage, step.broadcasts, run.read_bytes)))
    return False


def run_job(run: DagRun, step: StageStep) -> bool:
    """The stage's own Spark job (with the stages fused into it), its reduce tasks sized by Hive's rule."""
    stage, dag, settings = step.stage, run.dag, run.settings
    assert step.decisions is not None
    run.options.listener.stage_started(stage, step.index, len(dag.stages), step.group)
    tasks = _reduce_tasks(run, stage)
    stage_conf = {"spark.sql.shuffle.partitions": str(tasks)} if tasks != settings.shuffle_partitions else {}
    if step.inputs:  # a job computing fused stages too: Spark adapts inside it
        stage_conf.update(fused_job_conf(settings, run.hash_join_bytes()))
    final = stage is dag.final
    job = StageJob(stage, step.decisions, run.paths[stage.id], step.group, is_final=final,
                   write=output_is_read(stage, step.decisions, run.options.analyze), fused=step.inputs,
                   text=(run.record.result_format, run.record.output_names) if final else None,
                   partition_by=dag.partition_by if final else (),
                   write_format=dag.write_format if final else "parquet", broadcasts=step.broadcasts,
                   collect=final and _collects_result(run, stage))
    with sql_conf(run.context.spark, stage_conf):
        step.metrics = run.runner.run_recovering(job, run.statistics)
    step.metrics.reduce_tasks = tasks
    if job.collected is not None:
        run.record.collected = job.collected
    return True


def _collects_result(run: DagRun, stage: Stage) -> bool:
    """Whether the final stage sends its rows to the driver instead of writing them: asked for (the Python API's
    result, ``RunOptions.collect_rows``), a plain parquet result, and at most that many rows by its LIMIT or its
    estimate. A larger result than the driver takes is written after all (``StageRunner.run_recovering``)."""
    most, dag = run.options.collect_rows, run.dag
    if not most or dag.partition_by or dag.write_format != "parquet" or run.record.result_format != "parquet":
        return False
    limit = top_limit(stage.plan)
    if limit is not None and limit <= most:
        return True
    tables = _tables_known_before(run)
    estimate = JoinEstimates(tables, dag).stage_estimate(stage.id) if tables is not None else None
    return estimate is not None and estimate <= most


def keep(run: DagRun, step: StageStep) -> bool:
    """An exact written output goes into the stage-output cache, with the Bloom filters built while writing it
    (an exact summary is the written output itself, read where it was written: such a stage stays put)."""
    stage, cache, metrics = step.stage, run.options.cache, step.metrics
    assert metrics is not None and step.decisions is not None
    if stage is run.dag.final and run.record.collected is not None:  # no files: the rows are in the driver
        return True
    exact_summary = any(build.kind == "exact" for build in step.decisions.builds)
    if cache is not None and step.cache_key is not None and stage.id not in run.inexact and not exact_summary:
        kept = cache.keep(step.cache_key, run.paths[stage.id], metrics.rows_written, metrics.bytes_written,
                          f"{stage.name} {stage.operator}")
        if kept is not None:
            run.paths[stage.id] = kept.path
            run.runner.store.offer(stage.id, kept.path)
    faults.reached("stage-written")
    return True


def record(run: DagRun, step: StageStep) -> bool:
    """What the stage measured, in the run's record (with --analyze, Spark's joins and the summaries' false
    positives too); the progress display is told."""
    stage, metrics, spark = step.stage, step.metrics, run.context.spark
    assert metrics is not None
    metrics.staging = step.why
    metrics.kept_rows = kept_rows_note(run.runner.compiler.kept.take_served(), False)
    metrics.measured_broadcasts = _broadcast_notes(stage, step.broadcasts, run.read_bytes)
    run.bytes_written[stage.id] = metrics.bytes_written
    probes = metrics.probes + [p for fused in step.inputs for p in fused.probes]
    if run.options.analyze:
        metrics.spark_joins = jvm.join_strategies(spark, step.group)
        for probe in probes:
            run.runner.store.measure_false_positives(probe)
    for probe in probes:
        probe.raw = None
    metrics.decision_seconds = step.decision_seconds
    run.written[stage.id] = metrics.rows_written
    run.record.stages.append(metrics)
    run.options.listener.stage_finished(metrics)
    faults.reached("between-stages")
    return True


def reoptimize(run: DagRun, step: StageStep) -> bool:
    """After a written stage, the reoptimizer may plan the stages not yet run again from what is now known."""
    stage, reoptimizer, statistics = step.stage, run.options.reoptimizer, run.statistics
    if reoptimizer is None or stage is run.dag.final or run.fused_into:  # not while fused stages wait for their job
        return True
    if statistics is not None:
        statistics.settle_tables()  # the statistics earlier stages collected inform the re-plan
    distinct = statistics.output_distinct() if statistics is not None else {}
    outcome = reoptimizer.after_stage(run.dag, stage, run.written[stage.id], frozenset(run.done), dict(run.written),
                                    distinct)
    if outcome is not None:
        dag, note = outcome
        if dag is None:
            run.record.replans.append(note)
        else:
            run.follow(dag, note)
    return True


STAGE_STEPS: tuple[Callable[[DagRun, StageStep], bool], ...] = (
    run_gathered_passes, decide, gather_pass, serve_from_cache, choose_staging, fuse, run_job, keep, record,
    reoptimize,
)




def _may_be_pass(run: DagRun, stage: Stage) -> bool:
    """Whether ``stage`` is a summary pass that may wait for the pass job: predicate transfer's, or a pre-pass."""
    return stage.id in run.dag.transfer_passes or (stage.operator == "SCAN" and not run.dag.transfer_passes)


def _gathers(run: DagRun, stage: Stage, decisions: StageDecisions) -> bool:
    """Whether a pass runs in the pass job: transfer's always; a pre-pass when it builds Bloom filters only and
    its scans collect no statistics (the job observes none)."""
    if stage.id in run.dag.transfer_passes:
        return True
    statistics = run.statistics
    return all(build.kind == "bloom" for build in decisions.builds) and (
        statistics is None or not statistics.would_observe(stage))


def _reduce_tasks(run: DagRun, stage: Stage) -> int:
    input_bytes = reducers.stage_input_bytes(stage, run.bytes_written.get, run.sizes)
    return reducers.reduce_tasks(run.settings, input_bytes, run.cores)


def _broadcast_notes(stage: Stage, broadcasts: dict[int, str], read_bytes) -> list[dict]:
    """For ``--analyze``, each join turned map-side once its input's size was measured: the join, the side
    broadcast and the bytes of the stage outputs it reads."""
    notes = []
    for node in stage.plan.walk():
        if isinstance(node, Join) and id(node) in broadcasts:
            side = node.left if broadcasts[id(node)] == "left" else node.right
            notes.append({"join": node.kind, "side": broadcasts[id(node)],
                          "stage_bytes": {leaf.stage_id: read_bytes(leaf) for leaf in side.walk()
                                          if isinstance(leaf, StageRead)}})
    return notes














