"""Batches (issue 43, after Krishnamurthy et al.'s precision sharing): several SQL files run as one command
(``aipq run a.sql b.sql …`` or a directory), planned together before any runs. A stage whose subplan over the same
table files appears more than once in the batch's queries is computed once: written whole (no other stage's
summary prunes it, so every reader gets all of its rows) and read by the others from the command's stage-output
cache. A table several files read is read once for all of them (``engine/shared_scans.py``). Each query's rows
are the ones it gives alone, written to a file of its own."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aipq.engine.context import RunContext
from aipq.engine.records import RunRecord
from aipq.engine.shared_scans import plan_shared_scans, start_shared_scans, stop_shared_scans
from aipq.engine.sink import write_output
from aipq.engine.stage_cache import StageCache
from aipq.errors import AipqError, BadInputError
from aipq.planner.stages import StageDag
from aipq.workflow import Workflow, plan_workflow, run_workflow
from aipq.workflow.query import execute, finish_stage_cache
from aipq.workflow.source import SqlSource, load_sql


@dataclass
class BatchQuery:
    name: str  # its output file's name, without the extension
    workflow: Workflow


@dataclass
class BatchOutcome:
    name: str
    rows: int | None  # of its last SELECT (None: the file has none)
    seconds: float
    stages_run: int = 0
    stages_reused: int = 0  # read from an output another query (or an earlier statement) of the batch wrote
    output: str | None = None
    shuffle_write_bytes: int = 0
    input_bytes: int = 0  # read from tables and stage outputs (a shared scan's cache counts as read)
    summaries_taken: int = 0  # Bloom filters the stages it read from the cache came with (not built again)


@dataclass
class Batch:
    queries: list[BatchQuery]
    shared: frozenset[str]  # cache keys of the stages more than one place in the batch computes
    context: RunContext
    scans: dict = field(default_factory=dict)  # tables several files read: ``engine/shared_scans.py``
    outcomes: list[BatchOutcome] = field(default_factory=list)


def is_batch(sources: tuple[str, ...]) -> bool:
    """Whether ``aipq run``'s arguments make a batch: several, or a directory."""
    return len(sources) > 1 or (len(sources) == 1 and Path(sources[0]).is_dir())


def batch_sources(sources: list[str]) -> list[SqlSource]:
    """The files of a batch: each argument a file, ``tpch:N``/``tpcds:N``, or a directory of ``*.sql`` files (in
    name order)."""
    found: list[SqlSource] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files = sorted(path.glob("*.sql"))
            if not files:
                raise BadInputError(f"the directory {source} holds no .sql file")
            found += [load_sql(str(file), None) for file in files]
        else:
            found.append(load_sql(source, None))
    return found


def output_names(sources: list[SqlSource]) -> list[str]:
    """A distinct file name per query: the file's stem (``tpch-q3`` for ``tpch:3``), numbered when repeated."""
    names: list[str] = []
    for source in sources:
        base = Path(source.name).stem if ":" not in source.name else source.name.replace(":", "-")
        name, count = base, 1
        while name in names:
            count += 1
            name = f"{base}-{count}"
        names.append(name)
    return names


def plan_batch(sources: list[SqlSource], context: RunContext, allow_overwrite: bool = False) -> Batch:
    """Every file planned before any runs (a file cannot read a table another file of the batch creates), and
    the stages computed more than once found."""
    queries = [BatchQuery(name, plan_workflow(source, context, allow_overwrite))
               for name, source in zip(output_names(sources), sources)]
    cache = context.stage_cache
    shared = shared_keys(queries, cache, context) if cache is not None else frozenset()
    scans = (plan_shared_scans([step.planned.dag for query in queries for step in query.workflow.queries])
             if context.settings.shared_scans == "on" else {})
    return Batch(queries, shared, context, scans)


def shared_keys(queries: list[BatchQuery], cache: StageCache, context: RunContext) -> frozenset[str]:
    """The cache keys of stages that appear more than once among the batch's queries (workflows' statements are
    planned again as they run, so only single-query files count)."""
    counts: Counter[str] = Counter()
    for query in queries:
        for step in query.workflow.queries:
            counts.update(_stage_keys(step.planned.dag, cache, context))
    return frozenset(key for key, count in counts.items() if count > 1)


def _stage_keys(dag: StageDag, cache: StageCache, context: RunContext) -> list[str]:
    keys = (cache.stage_key(dag, stage.id, context.settings) for stage in dag.stages)
    return [key.key for key in keys if key is not None]


def check_targets(batch: Batch, output_dir: str, fmt: str, force: bool) -> dict[str, str]:
    """Each query's output file in ``output_dir``, refused before anything runs when one exists (without
    ``force``)."""
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise BadInputError(f"--output-dir {output_dir} is a file, not a folder")
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInputError(f"--output-dir {output_dir} cannot be created: {error.strerror or error}",
                            hint="choose a folder you can write to") from error
    storage = batch.context.storage
    statements = [Path(q.workflow.source.name) for q in batch.queries if Path(q.workflow.source.name).is_file()]
    try:
        for query in batch.queries:  # before the existence check: --force never writes over a statements' file
            clash = next((s for s in statements if storage.same_local_file(str(folder / f"{query.name}.{fmt}"),
                                                                            str(s))), None)
            if clash is not None:
                raise BadInputError(f"--output-dir's file for {query.name} is the statements' file {clash}",
                                    hint="give the batch another --output-dir, or another --format")
        return {query.name: storage.check_local_target(str(folder / f"{query.name}.{fmt}"), force, "--output-dir")
                for query in batch.queries}
    except BadInputError:
        if made:  # a refused batch leaves no folder of its own behind
            folder.rmdir()
        raise


def run_batch(batch: Batch, targets: dict[str, str], fmt: str, on_query=None, listener=None) -> list[BatchOutcome]:
    """Run the queries in order, each writing its result to its target; the command's cached outputs go at the
    end (unless ``--reuse``), or when one fails."""
    context = batch.context
    start_shared_scans(context.spark, batch.scans)
    try:
        for position, query in enumerate(batch.queries):
            started = time.perf_counter()
            try:
                outcome = _run_query(query, batch, targets[query.name], fmt, listener)
            except AipqError as error:
                _name_failing_file(error, query, batch.queries[position + 1:])
                raise
            outcome.seconds = time.perf_counter() - started
            batch.outcomes.append(outcome)
            if on_query is not None:
                on_query(outcome)
    finally:
        stop_shared_scans(batch.scans)
        finish_stage_cache(context)
    return batch.outcomes


def _name_failing_file(error: AipqError, query: BatchQuery, skipped: list[BatchQuery]) -> None:
    """A query's failure said as the batch's: which file failed and which files did not run."""
    if error.position is None:  # a message with a position names its file already
        error.message = f"{query.workflow.source.name}: {error.message}"
    if skipped:
        names = ", ".join(q.workflow.source.name for q in skipped)
        error.message += f" (not run: {names})"


def _run_query(query: BatchQuery, batch: Batch, target: str, fmt: str, listener) -> BatchOutcome:
    context, workflow = batch.context, query.workflow
    if workflow.is_single_query:
        planned = workflow.steps[0].planned
        assert planned is not None
        ran = execute(planned, context, listener, shared=batch.shared, shared_scans=batch.scans)
    else:
        ran = run_workflow(workflow, listener, finish_cache=False).result
    if ran is None:
        return BatchOutcome(query.name, None, 0.0)
    try:
        write_output(ran.spark, context.storage, ran.record.result, target, fmt)
        run, reused = _stage_counts(ran.record)
        stages = ran.record.stages
        return BatchOutcome(query.name, ran.record.result_rows, 0.0, run, reused, target,
                            sum(m.shuffle.shuffle_write_bytes for m in stages),
                            sum(m.shuffle.input_bytes for m in stages),
                            sum(summary.offered for m in stages for summary in m.summaries))
    finally:
        ran.close()


def _stage_counts(record: RunRecord) -> tuple[int, int]:
    """Stages the query ran (written or fused) and stages it read from the cache."""
    reused = sum(1 for m in record.stages if m.reused)
    return len(record.stages) - reused, reused
