"""Run a planned workflow: its statements in order, each planned again as it runs, what each committed recorded in
the file's journal (for ``--resume``), the last SELECT's rows the result."""

from __future__ import annotations

from collections.abc import Callable

from aipq import faults
from aipq.engine.dag_run import StageListener
from aipq.errors import ExecutionError
from aipq.workflow.journal import durable
from aipq.workflow.model import StepOutcome, Workflow, WorkflowRun
from aipq.workflow.planner import WorkflowPlanner
from aipq.workflow.query import execute, finish_stage_cache
from aipq.workflow.steps import run_step


def run_workflow(workflow: Workflow, listener: StageListener | None = None,
                 on_step: Callable[[StepOutcome], None] | None = None, analyze: bool = False,
                 result_format: str | None = None, finish_cache: bool = True, keep_frame: bool = False) -> WorkflowRun:
    """Run the steps in order; the last SELECT's rows are the result (written as ``result_format``, csv or
    json, straight away when given). The stage outputs the command kept go at the end, unless ``finish_cache``
    is False (a batch, whose later files read them too). ``keep_frame``: a single query handed to Spark whole keeps
    its result as a DataFrame instead of writing it (the Python API)."""
    context = workflow.context
    journal = workflow.journal
    if journal is not None and not workflow.resuming:
        journal.reset()  # from the start: an earlier run's commits do not count
    cache = context.stage_cache
    if cache is not None:
        cache.resuming = workflow.resuming
    try:
        ran = _run_steps(workflow, listener, on_step, analyze, result_format, keep_frame)
    except BaseException:
        if journal is None and finish_cache:  # nothing can resume it: its stage outputs go
            finish_stage_cache(context)
        raise
    if finish_cache:
        finish_stage_cache(context)
    return ran


def _run_steps(workflow: Workflow, listener: StageListener | None, on_step: Callable[[StepOutcome], None] | None,
               analyze: bool, result_format: str | None, keep_frame: bool = False) -> WorkflowRun:
    context, journal = workflow.context, workflow.journal
    if workflow.is_single_query:
        planned = workflow.steps[0].planned
        assert planned is not None
        return WorkflowRun(execute(planned, context, listener, analyze, result_format, keep_frame=keep_frame))
    run = WorkflowRun(None)
    planner = WorkflowPlanner.for_run(workflow)
    try:
        for checked in workflow.steps:
            step = checked.step
            faults.reached("statement")
            try:
                outcome = run_step(planner, step, run, listener, result_format, journal)
            except ExecutionError as error:
                error.message = f"statement {step.number} ({step.describe()}): {error.message}"
                raise
            if journal is not None and durable(step) and step.number not in workflow.resumed:
                journal.mark(step, "done")
            run.outcomes.append(outcome)
            if on_step is not None:
                on_step(outcome)
    except BaseException:
        run.close()
        raise
    if journal is not None:
        journal.clear()  # all done: nothing to resume
    return run
