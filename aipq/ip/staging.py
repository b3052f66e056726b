"""Which stage boundaries are materialized (``--staging``).

A stage boundary is where the paper's MapReduce jobs met: the producer's output written, then read back by its
consumer. On Spark a boundary can instead be fused: the consumer's job computes the producer's rows itself, an
exchange in one plan. Only a summary needs its producer's output complete before the consumer's scan is planned.

- ``hive``: every boundary is written (the paper's setting);
- ``adaptive``: a boundary is written where the stage builds a summary the estimator chose (which must pay for the
  write, ``Adaptive.creation``), or where several stages read the output (computing it once costs less than once
  per reader); every other stage is fused into its consumer;
- ``none``: every stage but the last is fused, and stage outputs build no summaries (a filtered table's summary
  pre-pass is a job of its own and still runs).
"""

from __future__ import annotations

from collections.abc import Callable

from aipq.config import Settings
from aipq.planner.stages import Stage, StageDag


def fixed_reason(dag: StageDag, stage: Stage, settings: Settings) -> str | None:
    """Why ``stage``'s output is written whatever its summaries: the staging mode, the result, a pre-pass, or
    several readers (adaptive staging). None when the staging may fuse it."""
    if stage is dag.final:
        return "the result"
    if stage.operator == "SCAN":
        return "a summary pre-pass (its own job)"
    if settings.staging == "hive":
        return "hive staging: every boundary is written"
    readers = dag.dataflow.get(stage.id, [])
    if settings.staging == "adaptive" and len(readers) > 1:
        return "read by " + " and ".join(f"S{r}" for r in readers)
    return None


def may_fuse(dag: StageDag, stage: Stage, settings: Settings) -> bool:
    return fixed_reason(dag, stage, settings) is None


def surely_written(dag: StageDag, settings: Settings) -> Callable[[int], bool]:
    """Whether a stage's output will be written, so that it can build a summary: the stages a nearer producer's
    edge may be left to (``ip/candidates.py``). Only the benefit estimator (``--ip adaptive``) fuses a stage that
    has summaries to build; the other strategies build every one they may, and write the stage for it."""
    if settings.ip != "adaptive":
        return lambda stage_id: True
    return lambda stage_id: not may_fuse(dag, dag.stage(stage_id), settings)


def builds_summaries(stage: Stage, settings: Settings) -> bool:
    """Whether a stage may build summaries at all: under ``none`` only a pre-pass does (nothing else writes)."""
    return settings.staging != "none" or stage.operator == "SCAN"


def materialized(dag: StageDag, stage: Stage, settings: Settings, builds: bool) -> tuple[bool, str]:
    """Whether the stage writes its output, and why (``builds``: it builds a summary in this run)."""
    reason = fixed_reason(dag, stage, settings)
    if reason is not None:
        return True, reason
    if builds:
        return True, "builds a summary in its write"
    consumer = next(iter(dag.dataflow.get(stage.id, [])), None)
    return False, f"fused into S{consumer}" if consumer is not None else "fused"
