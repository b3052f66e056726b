"""What ``aipq.sql`` gives back: a DataFrame over the result, read lazily. Nothing is collected into Python until
``rows`` (or ``to_pandas``) is read, so a result used as a DataFrame — written, joined, counted — never passes
through the driver's Python process; except a result aipq's own plan expects to be small (at most
``workflow.query.COLLECTED_ROWS`` rows by its LIMIT or estimate), which its last job sends to the driver instead of
writing it as files for the caller's session to read back.

The result's files live in the run's work directory: they stay until ``close()`` (or the end of a ``with`` block)
or the end of the Python process, whichever comes first. They do not go when the Result is garbage-collected, since
DataFrames derived from ``dataframe`` may still read them. A process that is killed leaves them to the next run's
cleaning of work directories whose process is gone (``engine/work_dirs.py``)."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aipq.errors import EnvironmentProblem


class _OpenResults:
    """The release of every Result not yet closed, run when the process exits."""

    def __init__(self):
        self.lock = threading.Lock()
        self.releases: dict[int, Callable[[], None]] = {}
        atexit.register(self.release_all)

    def add(self, key: int, release: Callable[[], None]) -> None:
        with self.lock:
            self.releases[key] = release

    def pop(self, key: int) -> Callable[[], None] | None:
        with self.lock:
            return self.releases.pop(key, None)

    def release_all(self) -> None:
        for key in list(self.releases):
            release = self.pop(key)
            if release is not None:
                # at exit the session may be gone: the next run's cleaning of work directories does the rest
                with contextlib.suppress(Exception):
                    release()


_OPEN = _OpenResults()
_TOKENS = itertools.count()


@dataclass(frozen=True)
class Collected:
    """For a result whose query runs only when its rows are read (one handed to Spark whole, lazily): how a
    failure then is told (as aipq's error) and where the rows counted go (the run record)."""

    failure: Callable[[BaseException], Exception]
    counted: Callable[[int], None]


class Result:
    """The rows of a query's (or a workflow's last) SELECT as a Spark DataFrame, and what the run did.

    ``dataframe`` is the result on the caller's session, read from the result's files when it is acted on;
    ``rows`` collects it once, when first read (a small result of aipq's own plan comes back with the run as
    rows, its DataFrame made from them); ``run`` is the run record (stages with their rows, bytes, seconds,
    summaries and rows pruned). ``close()`` removes the result's files (``rows`` read before stays)."""

    def __init__(self, columns: tuple[str, ...], dataframe: Any, run: dict | Callable[[], dict],
                 release: Callable[[], None] | None = None, collected: Collected | None = None,
                 rows: list[tuple] | None = None):
        self.columns = columns
        self._frame = dataframe  # or, for rows already collected, how to make it: when first read
        self._run = run  # or how to make it: the stages' estimates are computed when it is first read
        self._collected = collected
        self._rows = rows
        self._closed = False
        self._token = next(_TOKENS)  # not id(self): a collected Result's id is reused, its release must not be
        if release is not None:
            _OPEN.add(self._token, release)

    @property
    def dataframe(self) -> Any:
        """The result as a DataFrame on the caller's session (for a result that came back as rows, made from
        them the first time it is read)."""
        if callable(self._frame):
            self._frame = self._frame()
        return self._frame

    @property
    def run(self) -> dict:
        """The run record, made the first time it is read (each stage's estimated rows cost a few milliseconds
        of planning work that a caller who never reads it should not wait for)."""
        if callable(self._run):
            self._run = self._run()
        return self._run

    @property
    def rows(self) -> list[tuple]:
        """The result's rows as tuples, collected into Python the first time they are read."""
        if self._rows is None:
            if self._closed:
                raise EnvironmentProblem("this Result was closed before its rows were read",
                                         hint="read Result.rows (or use Result.dataframe) before close()")
            self._rows = self._collect()
        return self._rows

    def _collect(self) -> list[tuple]:
        try:
            rows = [tuple(row) for row in self.dataframe.collect()]
        except Exception as error:  # noqa: BLE001 — a Spark failure of a query run only now, told as aipq tells it
            if self._collected is None:
                raise
            raise self._collected.failure(error) from error
        if self._collected is None:
            return rows
        self._collected.counted(len(rows))
        if not callable(self._run):  # the record was read before: it gains the count too
            self._run["result_rows"] = len(rows)
        return rows

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas
        except ImportError as error:
            raise EnvironmentProblem("Result.to_pandas needs pandas, which is not installed",
                                     hint="pip install pandas") from error
        return pandas.DataFrame(self.rows, columns=list(self.columns))

    def close(self) -> None:
        """Remove the result's files now: ``dataframe`` (and DataFrames made from it) can no longer be read."""
        self._closed = True
        release = _OPEN.pop(self._token)
        if release is not None:
            release()

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        counted = len(self._rows) if self._rows is not None else self.run.get("result_rows")
        rows = f"{'?' if counted is None else counted} row(s)"  # None: a handed-off DataFrame not yet collected
        return f"Result(columns={self.columns!r}, {rows})"
