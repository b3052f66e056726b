"""The files ``aipq run`` writes besides tables: ``--output`` and ``--report`` never name each other or the
statements' file being run, and the report says at every moment what the run did. It is replaced when the run
starts and as each statement completes (status ``running``, with the statements done: a run killed before it
ends never leaves an earlier run's report in its place), and at its end says ``succeeded``, or ``failed`` with
the error and the statements that completed."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from aipq.engine.context import RunContext
from aipq.engine.report import application
from aipq.engine.storage import Storage
from aipq.errors import EXIT_RUNTIME, AipqError, BadInputError
from aipq.workflow import StepOutcome, WorkflowRun


def check_distinct_files(files: Mapping[str, str | None]) -> None:
    """Refuse (before anything runs) two of ``files`` (by what names them: ``--output``, ``--report``, the
    statements' file) that are one file: the same path written relative and absolute, through a symbolic link,
    or a hard link to it. A run would otherwise write one over the other, or over the SQL it runs."""
    seen: list[tuple[str, str]] = []
    for flag, path in files.items():
        if path is None:
            continue
        for other_flag, other in seen:
            if Storage.same_local_file(path, other):
                raise BadInputError(f"{other_flag} and {flag} are the same file ({os.path.abspath(other)})",
                                    hint="give each its own path: aipq never writes one of them over another")
        seen.append((flag, path))


class RunReport:
    """The ``--report`` file of one run, written atomically at its start and at its end."""

    def __init__(self, path: str, source: str, context: RunContext):
        self.path, self.source, self.context = path, source, context
        self.outcomes: list[StepOutcome] = []  # the statements that completed, in order

    def started(self) -> None:
        self._write({"status": "running", "process": os.getpid()})

    def step_done(self, outcome: StepOutcome) -> None:
        """A statement completed: the report, still ``running``, lists it (a run killed later still tells it)."""
        self.outcomes.append(outcome)
        self.started()

    def succeeded(self, ran: WorkflowRun) -> None:
        self._write({"status": "succeeded", **ran.report(self.source)})

    def failed(self, error: BaseException) -> None:
        self._write({"status": "failed", "error": failure(error)})

    def _write(self, fields: dict) -> None:
        record = {"source": self.source, "statements": [o.as_dict() for o in self.outcomes], "result": None,
                  **fields, "spark": application(self.context.started_spark)}
        Storage.write_local_atomically(self.path, json.dumps(record, indent=1) + "\n")


def failure(error: BaseException) -> dict:
    """What failed, as the CLI shows it: the message, its hint and the exit code."""
    if isinstance(error, AipqError):
        return {"message": error.message, "hint": error.hint, "exit_code": error.exit_code}
    if isinstance(error, KeyboardInterrupt):
        return {"message": "interrupted", "hint": None, "exit_code": 130}
    if isinstance(error, SystemExit):
        return {"message": f"exited with {error.code}", "hint": None, "exit_code": error.code}
    return {"message": f"internal error: {type(error).__name__}: {error}", "hint": None, "exit_code": EXIT_RUNTIME}
