"""What a workflow is once planned, and what running it gives: its steps with the settings each runs under,
the outcome of each, and the result of its last SELECT."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aipq.catalog import TableEntry
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.records import RunRecord
from aipq.engine.report import run_dict
from aipq.pipeline import PlannedQuery
from aipq.workflow.journal import Journal
from aipq.workflow.query import QueryRun
from aipq.workflow.source import SqlSource
from aipq.workflow.statements import QueryStep, Step

CREATED_BY = "aipq.created_by"


@dataclass
class PlannedStep:
    step: Step
    settings: Settings
    planned: PlannedQuery | None = None
    skip_reason: str | None = None  # e.g. CREATE TABLE IF NOT EXISTS of an existing table


@dataclass
class Workflow:
    """A planned workflow with what it was planned against, so that running it needs nothing more."""

    source: SqlSource
    steps: list[PlannedStep]
    context: RunContext
    allow_overwrite: bool = False
    journal: Journal | None = None  # what this run commits is recorded there (a workflow file's run)
    resumed: frozenset[int] = frozenset()  # statements an interrupted run committed (``--resume``)
    resuming: bool = False
    redone: frozenset[int] = frozenset()  # statements the interrupted run committed that run again (edited, or after)

    @property
    def queries(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.planned is not None]

    @property
    def is_single_query(self) -> bool:
        return len(self.steps) == 1 and isinstance(self.steps[0].step, QueryStep)


@dataclass
class StepOutcome:
    step: Step
    message: str
    seconds: float = 0.0
    record: RunRecord | None = None  # the run of the query it ran
    written: dict | None = None  # a table write's table, mode and rows

    @property
    def run(self) -> dict | None:
        """The run of its query as plain data (``engine/report.run_dict``), made when asked: its stages'
        estimates are computed then."""
        return run_dict(self.record) if self.record is not None else None

    def as_dict(self) -> dict:
        return {"number": self.step.number, "statement": self.step.describe(), "message": self.message,
                "seconds": round(self.seconds, 3), "run": self.run, "written": self.written}


@dataclass
class WorkflowRun:
    result: QueryRun | None
    outcomes: list[StepOutcome] = field(default_factory=list)

    def close(self) -> None:
        if self.result is not None:
            self.result.close()

    def report(self, source: str) -> dict:
        """What a scheduler logs and checks (``aipq run --report``): each statement's outcome, with the run of its
        query (per stage its rows, bytes, seconds, summaries and rows pruned) and the table it wrote, and the
        run of the last SELECT."""
        return {"source": source, "statements": [outcome.as_dict() for outcome in self.outcomes],
                "result": run_dict(self.result.record) if self.result is not None else None}


def creator_id(source: SqlSource) -> str | None:
    """Tables a workflow file created in an earlier run count as its own (rerunning it needs no flag)."""
    if source.identity is not None:
        return f"workflow:{source.identity}"
    path = Path(source.name)
    return f"workflow:{path.resolve()}" if path.is_file() else None


def created_by(entry: TableEntry) -> str | None:
    return dict(entry.options).get(CREATED_BY)
