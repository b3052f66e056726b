"""How many reduce tasks a stage runs: a fixed count, or Hive's rule from the size of what the stage reads.

Hive sizes each MapReduce job's reduce phase from its input: ceil(input bytes /
``hive.exec.reducers.bytes.per.reducer``), at most ``hive.exec.reducers.max``. aipq does the same per stage
when ``reducer_bytes`` is set, with ``shuffle_partitions`` as the most and the session's cores as the fewest (a
reduce phase with fewer tasks than cores leaves a core idle). The input is the files the stage reads: its base
tables' files, as Hive counts them, and the outputs of the stages it reads, measured once they are written.

Why: a fixed count is a compromise between large and small stages, which no count suits at once
(docs/decisions.md, "One reduce task per 64 MB a stage reads").
"""

from __future__ import annotations

import math
from collections.abc import Callable

from aipq.config import Settings
from aipq.files import table_bytes
from aipq.planner.logical import Scan
from aipq.planner.stages import Stage, StageRead


def stage_input_bytes(stage: Stage, stage_bytes: Callable[[int], int | None],
                      sizes: Callable[[str], int | None]) -> int | None:
    """Bytes of the files ``stage`` reads: its base tables' (``sizes`` of a path) and its input stages' outputs
    (``stage_bytes``, None while one is not written yet); None when a size is unknown."""
    total = 0
    for node in stage.plan.walk():
        if isinstance(node, Scan):
            size = table_bytes(sizes, node.table)
        elif isinstance(node, StageRead):
            size = stage_bytes(node.stage_id)
        else:
            continue
        if size is None:
            return None
        total += size
    return total


def reduce_tasks(settings: Settings, input_bytes: int | None, cores: int) -> int:
    """A stage's reduce tasks: ``shuffle_partitions``, or with ``reducer_bytes`` set Hive's
    ceil(input bytes / reducer_bytes) between ``cores`` and ``shuffle_partitions`` (the most, also when the
    input's size is unknown)."""
    most = settings.shuffle_partitions
    if settings.reducer_bytes <= 0 or input_bytes is None:
        return most
    return max(min(cores, most), min(most, math.ceil(input_bytes / settings.reducer_bytes)))
