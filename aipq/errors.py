"""Errors aipq reports to users.

Every error a user can cause or fix is an ``AipqError``: the CLI prints its message (and, for SQL, the
offending line with a caret) and exits with ``exit_code`` — 2 for bad input, 1 for a runtime failure.
Anything else is a bug and gets a traceback only under ``--debug``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class SourcePosition:
    """A 1-based line/column in a SQL text, with the text itself so the line can be shown."""

    line: int
    column: int
    sql: str
    length: int = 1

    def excerpt(self) -> str:
        lines = self.sql.splitlines() or [""]
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        caret = " " * max(self.column - 1, 0) + "^" * max(self.length, 1)
        return f"  {self.line:>4} | {text}\n       | {caret}"


class AipqError(Exception):
    """Base for errors shown to users without a traceback."""

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, *, hint: str | None = None, position: SourcePosition | None = None,
                 source_name: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.position = position
        self.source_name = source_name

    def render(self) -> str:
        where = ""
        if self.position is not None:
            name = self.source_name or "<sql>"
            where = f"{name}:{self.position.line}:{self.position.column}: "
        text = f"error: {where}{self.message}"
        if self.position is not None:
            text += "\n" + self.position.excerpt()
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class BadInputError(AipqError):
    """The user's input (SQL, arguments, files) is wrong; exit code 2."""

    exit_code = EXIT_BAD_INPUT


class SqlSyntaxError(BadInputError):
    pass


class UnknownNameError(BadInputError):
    """A table or column that does not exist."""


class UnsupportedSqlError(BadInputError):
    """Valid SQL that aipq cannot plan yet."""


class EnvironmentProblem(AipqError):
    """The machine lacks something aipq needs (Java, tpchgen-cli)."""


class ExecutionError(AipqError):
    """A stage failed on Spark."""


def warn(message: str) -> None:
    """A problem that does not stop the command (e.g. statistics that could not be collected), on stderr."""
    print(f"warning: {message}", file=sys.stderr, flush=True)
