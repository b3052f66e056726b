"""Workflows: a file of statements planned together (``planner``), then run in order (``run``), each kind of
statement by its handler (``steps``), resumable after a failure or a kill (``resume``)."""

from aipq.workflow.model import PlannedStep, StepOutcome, Workflow, WorkflowRun
from aipq.workflow.planner import plan_workflow
from aipq.workflow.run import run_workflow
from aipq.workflow.statements import QueryStep

__all__ = ["PlannedStep", "QueryStep", "StepOutcome", "Workflow", "WorkflowRun", "plan_workflow", "run_workflow"]
