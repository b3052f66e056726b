"""Every knob aipq has, declared once with its default and meaning.

``aipq explain`` shows the values in force. Later issues add the information passing knobs (α, β, |F|,
target FPR, lg_k) here, next to the ones below.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

MB = 1024 * 1024


def default_home() -> Path:
    """The aipq home: ``$AIPQ_HOME`` if set, else ``~/.aipq``."""
    env = os.environ.get("AIPQ_HOME")
    return Path(env).expanduser() if env else Path.home() / ".aipq"


@dataclass(frozen=True)
class Knob:
    name: str
    default: object
    doc: str


KNOBS: tuple[Knob, ...] = (
    Knob("plan", "linear", "Join tree shape: 'linear' (left-deep, join order as written, like Hive) or 'bushy' "
         "(independent joins become sibling stages, the paper's Fig. 5b/5c)."),
    Knob("broadcast_threshold", 10 * MB, "A base table (with its map-side filters) whose files are at most this "
         "many bytes is joined map-side (broadcast) inside a stage; 0 or less: repartition joins only (the "
         "paper's Hive setting). Same default as Spark's spark.sql.autoBroadcastJoinThreshold."),
    Knob("shuffle_partitions", 8, "Reduce tasks per stage (spark.sql.shuffle.partitions). Spark's 200 is very "
         "slow on a 2-core machine."),
    Knob("dialect", "hive", "SQL dialect of the input (any sqlglot dialect; 'hive' and 'spark' are tested)."),
)


@dataclass(frozen=True)
class Settings:
    """The knob values for one invocation."""

    plan: str = "linear"
    broadcast_threshold: int = 10 * MB
    shuffle_partitions: int = 8
    dialect: str = "hive"
    spark_conf: dict[str, str] = field(default_factory=dict)
    master: str | None = None

    def knob_values(self) -> dict[str, object]:
        values = asdict(self)
        return {k.name: values[k.name] for k in KNOBS}


def _check_knobs_match_settings() -> None:
    names = {f.name for f in fields(Settings)}
    missing = [k.name for k in KNOBS if k.name not in names]
    assert not missing, f"knobs without a Settings field: {missing}"


_check_knobs_match_settings()
