"""Crash points, for the tests of ``aipq run --resume``: with ``AIPQ_KILL_AT=POINT`` or ``POINT@N`` in the
environment this process kills itself (SIGKILL, as ``kill -9`` does) the N-th time (first by default) it reaches
POINT. The points: ``statement`` (a workflow's statement about to run), ``stage-written`` (a stage's output
written, the run not yet told), ``between-stages`` (a stage recorded, the next not started) and ``table-commit``
(a table's new data moved into place, the catalog not yet told)."""

from __future__ import annotations

import os
import signal

POINTS = ("statement", "stage-written", "between-stages", "table-commit")
_reached: dict[str, int] = {}


def reached(point: str) -> None:
    wanted = os.environ.get("AIPQ_KILL_AT")
    if not wanted:
        return
    name, _, nth = wanted.partition("@")
    if name != point:
        return
    _reached[point] = _reached.get(point, 0) + 1
    if _reached[point] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
