"""Crash points, for the tests of ``aipq run --resume``: with ``AIPQ_KILL_AT=POINT`` or ``POINT@N`` in the
environment this process kills itself (SIGKILL, as ``kill -9`` does) the N-th time (first by default) it reaches
POINT. The points: ``statement`` (a workflow's statement about to run), ``stage-written`` (a stage's output
written, the run not yet told), ``between-stages`` (a stage recorded, the next not started) and ``table-commit``
(a table's new data moved into place, the catalog not yet told).

With ``AIPQ_PAUSE_AT=POINT[@N]`` and ``AIPQ_PAUSE_FILE=PATH`` the process instead creates PATH there and waits
until it is removed (a test then changes the world around it, e.g. stops the metastore).

Spark failures aipq recovers from, for their tests: with ``AIPQ_FAIL_AT=FAILURE[@N]``, ``failing(FAILURE)`` is
true the N-th time it is asked. The failures: ``broadcast`` (the driver runs out of memory building a broadcast
join's table, which takes a driver smaller than a test can start), ``hash-join`` (a reduce task runs out of
memory building a shuffled hash join's table) and ``result-size`` (a result sent to the driver passes
``spark.driver.maxResultSize``, which a running session cannot lower)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

POINTS = ("statement", "stage-written", "between-stages", "table-commit")
FAILURES = ("broadcast", "hash-join", "result-size")
_reached: dict[str, int] = {}


def _nth_time(variable: str, point: str) -> bool:
    wanted = os.environ.get(variable)
    if not wanted:
        return False
    name, _, nth = wanted.partition("@")
    if name != point:
        return False
    _reached[point] = _reached.get(point, 0) + 1
    return _reached[point] == int(nth or 1)


def reached(point: str) -> None:
    if _nth_time("AIPQ_KILL_AT", point):
        os.kill(os.getpid(), signal.SIGKILL)
    if _nth_time("AIPQ_PAUSE_AT", point):
        paused = Path(os.environ["AIPQ_PAUSE_FILE"])
        paused.touch()
        while paused.exists():
            time.sleep(0.1)


def failing(failure: str) -> bool:
    return _nth_time("AIPQ_FAIL_AT", failure)
