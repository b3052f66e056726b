"""Every knob aipq has, declared once with its default and meaning.

``aipq explain`` shows the values in force.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

MB = 1024 * 1024
# β's default, seconds. The paper leaves β to the user; 0 would act on any positive estimate. Edges estimated
# under 0.02 s are below what the estimate resolves: measured one at a time (`aipq bench decisions`,
# docs/bench/decisions*), the four such edges of the TPC-H set (Q2's S1.ps_suppkey and S8._agg, Q8's o_custkey on
# customer under both join settings) changed their stages by -0.38 to +0.11 s, -0.11 s on average over 7
# measurements, 5 of them losses; those estimated at 0.03-0.05 s (Q18's o_custkey, Q21's l_orderkey) gained
# +0.17 s on average over 5.
DEFAULT_BETA_SECONDS = 0.02
# One reduce task per 64 MB a stage reads (Hive's hive.exec.reducers.bytes.per.reducer), not a fixed count:
# TPC-H SF 1 queries ran 6-27% faster under `off` than with 8 tasks in every stage, because stages after the
# first read a few MB (docs/benchmarks.md, "Reduce tasks"). Hive's own default is 256 MB; at 64 MB a stage that
# reads SF 1's lineitem (221 MB of parquet) runs 4, and one that also reads orders 5.
DEFAULT_REDUCER_BYTES = 64 * MB


def size_bytes(text: str) -> int | None:
    """``text`` as a number of bytes (``512KB``, ``10MB``, ``1g``, ``-1``: Spark's and Hive's forms), or None."""
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([kmg]?)b?\s*", text.lower())
    if not match:
        return None
    factor = {"": 1, "k": 1024, "m": MB, "g": 1024 * MB}[match.group(2)]
    return int(float(match.group(1)) * factor)


def home_writable(home: Path) -> bool:
    """Whether aipq may write in its home (a read-only home still serves explain, table list and runs without
    statistics)."""
    return os.access(home, os.W_OK | os.X_OK)


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
    Knob("shuffle_partitions", 8, "The most reduce tasks a stage runs (spark.sql.shuffle.partitions); every "
         "stage runs this many when reducer_bytes is 0. Spark's 200 is very slow on a 2-core machine."),
    Knob("reducer_bytes", DEFAULT_REDUCER_BYTES, "Hive's hive.exec.reducers.bytes.per.reducer: when above 0, "
         "each stage runs ceil(bytes of the files it reads / this) reduce tasks, at least the session's cores and "
         "at most shuffle_partitions; 0: every stage runs shuffle_partitions."),
    Knob("dialect", "hive", "SQL dialect of the input (any sqlglot dialect; 'hive' and 'spark' are tested)."),
    Knob("ip", "off", "Information passing strategy: 'off' (Hive: no summaries), 'hip' (the paper's HIP baseline: "
         "lists of key hashes, child-to-parent, used when under alpha), 'always' (every admissible Bloom filter "
         "summary built and used, under alpha), 'oracle' (the same edges with exact key sets), 'adaptive' (the "
         "paper's IP: built and used where the benefit estimator's B exceeds beta, sized for the largest B)."),
    Knob("alpha", 4 * MB, "α: a summary larger than this many bytes is not loaded by later stages (the paper's "
         "heap-safety threshold; its experiments used 512 KB and 4 MB)."),
    Knob("beta", DEFAULT_BETA_SECONDS, "β: the least estimated benefit (seconds) for which a summary is built or "
         "used; read by the benefit estimator (strategy 'adaptive'), ignored by the strategies without estimation."),
    Knob("margin", 0.0, "How much more than its sure costs (probe, build, pre-pass) a summary must be expected to "
         "save: the benefit estimator counts on 1 / (1 + margin) of its estimated savings, since those are a "
         "prediction and the costs are not (strategy 'adaptive'). 0 (default): the paper's B > beta alone."),
    Knob("bloom_size", 0, "|F|: Bloom filter size in bytes; 0 = sized per summary from an upper bound on its "
         "distinct keys for the target false-positive rate, capped at alpha."),
    Knob("bloom_fpp", 0.01, "Target false-positive rate of Bloom filters sized per summary."),
    Knob("statistics", "collect", "Piggybacked statistics: 'collect' (the query's own scans and writes collect "
         "what the repository lacks for its join and filter columns), 'recollect' (collect them again even if "
         "known; for measuring the overhead), 'off' (neither collect nor store)."),
    Knob("scan_summaries", 64 * MB, "A base table whose files are at most this many bytes and that the query "
         "filters may summarize its join keys in a pre-pass (a SCAN stage that reads it with its filters before "
         "the stages that can use the summary); strategies 'always', 'oracle' and 'adaptive'. 0: stage outputs "
         "only, as in the paper."),
    Knob("stats_lg_k", 12, "HyperLogLog precision: log2 of the sketch's buckets (4–21); the relative standard "
         "error is 1.04/sqrt(2^lg_k), 1.6 % at 12 (Spark's default)."),
    Knob("cartesian", "refuse", "A join with no condition between two inputs not known to be small: 'refuse' it "
         "at planning (Hive's hive.strict.checks.cartesian.product) or 'allow' it; CROSS JOIN is always allowed."),
    Knob("stats_columns", (), "More columns to collect statistics on, as COLUMN, TABLE.COLUMN or DB.TABLE.COLUMN "
         "(join keys and filter columns are always included)."),
)


@dataclass(frozen=True)
class Settings:
    """The knob values for one invocation."""

    plan: str = "linear"
    broadcast_threshold: int = 10 * MB
    shuffle_partitions: int = 8
    reducer_bytes: int = DEFAULT_REDUCER_BYTES
    dialect: str = "hive"
    ip: str = "off"
    alpha: int = 4 * MB
    beta: float = DEFAULT_BETA_SECONDS
    margin: float = 0.0
    bloom_size: int = 0
    bloom_fpp: float = 0.01
    statistics: str = "collect"
    scan_summaries: int = 64 * MB
    stats_lg_k: int = 12
    stats_columns: tuple[str, ...] = ()
    cartesian: str = "refuse"
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
