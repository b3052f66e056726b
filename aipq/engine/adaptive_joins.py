"""Joins adapted while a job runs: inside a job of fused stages, Spark's AQE broadcasts a join input measured
small, and hashes one measured small per reduce task (sized here from the task's execution memory)."""

from __future__ import annotations

from aipq.config import Settings
from aipq.engine.stage_job import HASH_JOIN_SETTING


def runtime_broadcast_threshold(settings: Settings) -> int:
    """The most bytes of a join input measured while the query runs that is broadcast (0: none)."""
    return max(settings.broadcast_threshold, 0) if settings.runtime_broadcast == "on" else 0



def fused_job_conf(settings: Settings, hash_join_bytes: int) -> dict[str, str]:
    """Spark's adaptive execution inside a job that computes fused stages: partitions coalesced, skew split, a
    small intermediate result broadcast (within the broadcast threshold, with ``--runtime-broadcast on``) and a
    join input measured at most ``hash_join_bytes`` in every reduce task hashed instead of sorted (0: never)."""
    threshold = str(runtime_broadcast_threshold(settings) or -1)
    conf = {"spark.sql.adaptive.enabled": "true", "spark.sql.adaptive.autoBroadcastJoinThreshold": threshold}
    if hash_join_bytes > 0 and HASH_JOIN_SETTING not in settings.spark_conf:
        conf[HASH_JOIN_SETTING] = str(hash_join_bytes)
    return conf



HASH_JOIN_MEMORY_SHARE = 1 / 8  # a hash table takes several times its input's shuffled (compressed) bytes



HASH_JOIN_MOST_BYTES = 256 * (1 << 20)



def hash_join_bytes(settings: Settings, task_memory: float, advisory_bytes: int) -> int:
    """The most shuffled bytes of a join input, in each of its reduce tasks, that Spark's adaptive execution
    builds a hash table from (a shuffled hash join: neither side sorted), given the execution memory one task
    has; 0 with ``--hash-joins off`` or when that memory is too small. Spark only converts when this is at least
    its advisory partition size, the size it coalesces reduce tasks to."""
    if settings.hash_joins == "off":
        return 0
    most = int(min(task_memory * HASH_JOIN_MEMORY_SHARE, HASH_JOIN_MOST_BYTES))
    return most if most >= advisory_bytes else 0

