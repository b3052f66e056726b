"""Every knob aipq has, declared once with its default and meaning.

``aipq explain`` shows the values in force.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

MB = 1024 * 1024
GB = 1024 * MB
# β's default, seconds: edges estimated below it lost on average when measured (docs/decisions.md).
DEFAULT_BETA_SECONDS = 0.02
# One reduce task per 64 MB a stage reads, as Hive sizes a job's reducers (docs/decisions.md).
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


def master_cores(master: str | None) -> int:
    """Task slots of a local master before its session starts (``local[N]``, ``local[*]``, aipq's default
    ``local[2]``); 2 for a cluster master, whose session reports its own once it runs."""
    match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master or "local[2]")
    if match is None:
        return 2
    if match.group(1) == "*":
        return os.cpu_count() or 2
    return int(match.group(1) or 1)


def default_home() -> Path:
    """The aipq home: ``$AIPQ_HOME`` if set, else ``~/.aipq``."""
    env = os.environ.get("AIPQ_HOME")
    return Path(env).expanduser() if env else Path.home() / ".aipq"


STRATEGIES = ("off", "hip", "always", "oracle", "adaptive", "transfer", "transfer-oracle")
PLANS = ("linear", "bushy", "cost")  # join tree shapes and orders (--plan)


@dataclass(frozen=True)
class Knob:
    """One setting, declared once: its name (the Settings field), default, meaning, and how the command line
    takes it (``flag``, ``kind``: how the text is read, ``choices`` or ``low``/``high``, ``shown``: the default
    as the command line writes it, ``help``: the option's one-line help)."""

    name: str
    default: object
    doc: str
    flag: str | None = None
    kind: str = "text"  # text | uri | choice | switch (a flag) | int | float | size | size-or-auto | columns
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    shown: str | None = None
    help: str = ""

    @property
    def setting(self) -> str:
        """The knob's name in ``--conf`` and a workflow's SET: ``aipq.`` and its name with dots."""
        return "aipq." + self.name.replace("_", ".")

    def parse(self, text: object) -> object:
        """The knob's value from the command line's text; ValueError saying what a valid value is."""
        if not isinstance(text, str):
            return text
        if self.kind in ("choice", "switch"):
            if text not in self.choices:
                raise ValueError(f"{text!r} is not one of {', '.join(self.choices)}")
            return text
        if self.kind in ("int", "float"):
            try:
                value = int(text) if self.kind == "int" else float(text)
            except ValueError:
                raise ValueError(f"{text!r} is not {'an integer' if self.kind == 'int' else 'a number'}") from None
            if not math.isfinite(value):
                raise ValueError(f"{text!r} is not a finite number")
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                low = "" if self.low is None else f"{self.low:g}"
                high = "" if self.high is None else f"{self.high:g}"
                raise ValueError(f"{text} is not in the range {low} to {high}".replace("range  to", "range up to"))
            return value
        if self.kind in ("size", "size-or-auto"):
            if self.kind == "size-or-auto" and text.strip().lower() == "auto":
                return 0
            size = size_bytes(text)
            if size is None:
                raise ValueError(f"{text!r} is not a size (examples: 0, 512KB, 10MB, 1GB)")
            if self.low is not None and size < self.low:
                raise ValueError(f"{text!r} is negative; give 0 or a size such as 64MB")
            return size
        if self.kind == "columns":
            columns = tuple(c.strip() for c in text.split(",") if c.strip())
            for column in columns:
                if not 1 <= len(column.split(".")) <= 3 or not all(p.strip() for p in column.split(".")):
                    raise ValueError(f"{column!r} is not COLUMN, TABLE.COLUMN or DB.TABLE.COLUMN")
            return columns
        if self.kind == "uri":
            return absolute_uri(text.strip())  # empty: the default place under the home
        if not text.strip():
            raise ValueError("give a value")
        return text


def absolute_uri(text: str) -> str:
    """A folder as given, made absolute when it is a local path without a scheme: stored in the catalog, a relative
    path would mean another folder from another working directory."""
    if not text or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", text):
        return text
    return os.path.abspath(os.path.expanduser(text))


KNOBS: tuple[Knob, ...] = (
    Knob("plan", "linear", "Join tree shape: 'linear' (left-deep, join order as written, like Hive), 'bushy' "
         "(independent joins become sibling stages, the paper's Fig. 5b/5c) or 'cost' (the cheapest tree, bushy "
         "allowed, from the statistics repository's rows and distinct counts; for a parquet table it does not "
         "know yet, from the row counts, minima and maxima in its files' footers; the written order when a "
         "table has neither).",
         "--plan", "choice", PLANS, help="Join tree shape or order."),
    Knob("reoptimize_factor", 2.0, "With plan 'cost': after each stage whose output is written, its rows are "
         "compared with the estimate the plan was made with; when they differ by more than this factor (or the "
         "plan had no estimate), the stages not yet run are planned again from what is now known: the rows the "
         "finished stages wrote and the distinct keys sketched in them, the statistics collected so far and, for "
         "tables still without statistics, their files' footers (ADP's corrective re-optimization). 0: never "
         "re-plan.",
         "--reoptimize-factor", "float", low=0.0,
         help="With --plan cost, re-plan the stages not yet run when a stage's rows differ from the estimate by "
              "more than this factor (0: never)."),
    Knob("preaggregate", "off", "GROUP BY above a repartition join whose aggregates (SUM, COUNT, MIN, MAX) read "
         "one input: 'auto' aggregates that input partially below the join where the statistics say its groups "
         "are few enough to pay (explain says where), 'always' wherever the aggregates allow, 'off' never (the "
         "default: measured no faster on TPC-H).",
         "--preaggregate", "choice", ("auto", "always", "off"), help="Pre-aggregate below joins where it pays."),
    Knob("share_subplans", "auto", "Subtrees of one query that read the same tables with the same filters, "
         "joins and groups (TPC-H Q11's join under its GROUP BY and under its subquery's total) are computed once "
         "as a stage that each reads (Hive's shared work): 'auto' where the statistics say the bytes of its tables' "
         "columns read once less outweigh a job of its own and its output written and read back, 'always' "
         "wherever they match, 'off' never.",
         "--share-subplans", "choice", ("auto", "always", "off"),
         help="Compute matching subtrees of a query once, for all their readers, where it pays."),
    Knob("broadcast_threshold", 10 * MB, "A base table (with its map-side filters) sized at most this many "
         "bytes (broadcast_sizes) is joined map-side (broadcast) inside a stage; 0 or less: repartition joins "
         "only (the paper's Hive setting). Same default as Spark's spark.sql.autoBroadcastJoinThreshold.",
         "--broadcast-threshold", "size", shown="10MB",
         help="Join a base table map-side when its files are at most SIZE; 0 = repartition joins only."),
    Knob("broadcast_sizes", "cautious", "How a base-table join input is sized against broadcast_threshold: "
         "'files' (its whole files, as Hive sizes a map join's small table without statistics), 'estimated' (its "
         "files scaled to the columns it reads, as Spark's planner sizes a pruned scan, and with statistics to the "
         "rows its filters keep: more joins broadcast, and an estimate too low broadcasts millions of rows) or "
         "'cautious' (the default: its files scaled to the columns it reads, as Spark's planner does, and to eight "
         "times the share of rows its filters are estimated to keep, never above its files: a filtered table "
         "estimated far below the threshold is broadcast and an estimate up to 8× too low still fits).",
         "--broadcast-sizes", "choice", ("cautious", "estimated", "files"),
         help="Size a join input for broadcast by its files, its estimated rows, or its files' share of the "
              "columns it reads with 8x its filters' estimated share of rows, at most its files."),
    Knob("runtime_broadcast", "on", "A join input that turns out small while the query runs is broadcast: an "
         "earlier stage's output measured at most broadcast_threshold bytes is copied to the tasks of the join "
         "that reads it (Hive's conditional map join), and inside a job that runs fused stages Spark's adaptive "
         "execution converts joins likewise; 'off': every join runs as planned.",
         "--runtime-broadcast", "choice", ("on", "off"),
         help="Broadcast a join input measured small while the query runs."),
    Knob("hash_joins", "auto", "Inside a job that runs fused stages, a repartition join whose input measures "
         "small in every reduce task (its shuffled bytes per task at most an eighth of the execution memory a "
         "task has, up to 256 MB, and at least Spark's advisory partition size) builds a hash table of that input "
         "and streams the other through it (Spark's shuffled hash join, through its adaptive execution) instead "
         "of sorting both sides; 'off': sort-merge joins, as Spark's default.",
         "--hash-joins", "choice", ("auto", "off"),
         help="Join without sorting where one input measures small in every reduce task."),
    Knob("long_decimals", "auto", "Sums and averages of decimals are computed on 64-bit integers wherever the "
         "data proves that exact: the largest value of each column in the parquet files' footers, carried through "
         "the expression summed (+, -, *, CASE), times the most rows the aggregate can see, fits 18 digits. Spark "
         "otherwise sums a DECIMAL(p, s) as DECIMAL(p + 10, s) in Java BigDecimals past 18 digits; the results are "
         "the same numbers. 'off': Spark's own decimal arithmetic.",
         "--long-decimals", "choice", ("auto", "off"),
         help="Sum decimals on 64-bit integers where the files' bounds prove it exact."),
    Knob("shuffle_partitions", 8, "The most reduce tasks a stage runs (spark.sql.shuffle.partitions); every "
         "stage runs this many when reducer_bytes is 0. Spark's 200 is very slow on a 2-core machine.",
         "--shuffle-partitions", "int", low=1, high=10000,
         help="The most reduce tasks a stage runs; every stage runs this many with --reducer-bytes 0."),
    Knob("reducer_bytes", DEFAULT_REDUCER_BYTES, "Hive's hive.exec.reducers.bytes.per.reducer: when above 0, "
         "each stage runs ceil(bytes of the files it reads / this) reduce tasks, at least the session's cores and "
         "at most shuffle_partitions; 0: every stage runs shuffle_partitions.",
         "--reducer-bytes", "size", low=0, shown=f"{DEFAULT_REDUCER_BYTES // MB}MB",
         help="Size each stage's reduce phase as Hive does (hive.exec.reducers.bytes.per.reducer): one reduce "
              "task per SIZE of the files it reads, at least one per core; 0 = every stage runs "
              "--shuffle-partitions."),
    Knob("dialect", "hive", "SQL dialect of the input (any sqlglot dialect; 'hive' and 'spark' are tested).",
         "--dialect", help="SQL dialect (hive, spark, …)."),
    Knob("ip", "adaptive", "Information passing strategy: 'off' (Hive: no summaries), 'hip' (the paper's HIP baseline: "
         "lists of key hashes, child-to-parent, used when under alpha), 'always' (every admissible Bloom filter "
         "summary built and used, under alpha), 'oracle' (the same edges with exact key sets), 'adaptive' (the "
         "paper's IP: built and used where the benefit estimator's B exceeds beta, sized for the largest B), "
         "'transfer' (predicate transfer: Bloom filters passed forward and backward over the whole join graph "
         "in pre-passes before any join), 'transfer-oracle' (the same schedule with exact key sets).",
         "--ip", "choice", STRATEGIES,
         help="Information passing: off (Hive), hip (hash lists, child-to-parent), always (every admissible "
              "Bloom filter), oracle (exact key sets on the same edges), adaptive (Bloom filters where the "
              "benefit estimator expects them to pay), transfer (predicate transfer over the whole join graph), "
              "transfer-oracle (the same with exact key sets)."),
    Knob("alpha", 4 * MB, "α: a summary larger than this many bytes is not loaded by later stages (the paper's "
         "heap-safety threshold; its experiments used 512 KB and 4 MB).",
         "--alpha", "size", low=0, shown="4MB", help="α: summaries larger than SIZE are not loaded."),
    Knob("beta", DEFAULT_BETA_SECONDS, "β: the least estimated benefit (seconds) for which a summary is built or "
         "used; read by the benefit estimator (strategy 'adaptive'), ignored by the strategies without estimation.",
         "--beta", "float",
         help="β: least estimated benefit (seconds) to build or use a summary (benefit estimator)."),
    Knob("margin", 0.0, "How much more than its sure costs (probe, build, pre-pass) a summary must be expected to "
         "save: the benefit estimator counts on 1 / (1 + margin) of its estimated savings, since those are a "
         "prediction and the costs are not (strategy 'adaptive'). 0 (default): the paper's B > beta alone.",
         "--margin", "float", low=0.0, high=100.0,
         help="Build or use a summary only when it is expected to save (1 + MARGIN)× its sure costs (benefit "
              "estimator); 0 = B > β alone, as in the paper."),
    Knob("probe_min_rejection", 0.1, "A task stops probing a summary over a window of rows in which it removed "
         "less than this share of the rows it probed, and then probes one row in 16 to notice when it would remove "
         "more (Impala's runtime filter disable); rows not probed are kept. 0: every row is probed.",
         "--probe-min-rejection", "float", low=0.0, high=1.0,
         help="Stop probing a summary in a task while it removes less than this share of rows (0: never stop)."),
    Knob("bloom_size", 0, "|F|: Bloom filter size in bytes; 0 = sized per summary from an upper bound on its "
         "distinct keys for the target false-positive rate, capped at alpha.",
         "--bloom-size", "size-or-auto", low=0, shown="auto",
         help="|F|: Bloom filter size (e.g. 512KB, 4MB); auto sizes each filter for --bloom-fpp."),
    Knob("bloom_fpp", 0.01, "Target false-positive rate of Bloom filters sized per summary.",
         "--bloom-fpp", "float", low=1e-9, high=0.5, help="Target false-positive rate of auto-sized Bloom filters."),
    Knob("statistics", "collect", "Piggybacked statistics: 'collect' (the query's own scans and writes collect "
         "what the repository lacks for its join and filter columns), 'recollect' (collect them again even if "
         "known; for measuring the overhead), 'off' (neither collect nor store).",
         "--statistics", "choice", ("collect", "recollect", "off"),
         help="Piggybacked statistics: collect what the repository lacks, collect again, or neither."),
    Knob("scan_summaries", 64 * MB, "A base table whose files are at most this many bytes (or an eighth of the "
         "query's largest table, when that is more) and that the query filters may summarize its join keys in a "
         "pre-pass (a SCAN stage that reads it with its filters before the stages that can use the summary); "
         "strategies 'always', 'oracle' and 'adaptive'. 0: stage outputs only, as in the paper. Under 'transfer' "
         "the same bound says which tables a pass may read.",
         "--scan-summaries", "size", low=0, shown="64MB",
         help="Filtered tables of at most SIZE (or an eighth of the query's largest table) may summarize their "
              "join keys in a pre-pass (always, oracle, adaptive); 0 = stage outputs only."),
    Knob("scan_reach", 1, "A small table with no filter of its own that a filtered table's keys reach through "
         "at most this many joins (nation's through supplier in TPC-H Q21; region's through nation and customer "
         "in Q5 is two) may summarize its join keys in a pre-pass too: it reads the table semi-joined with the "
         "filtered ones (strategies 'always', 'oracle' and 'adaptive'). 0: filtered tables only.",
         "--scan-reach", "int", low=0, high=4,
         help="Small tables a filtered table's keys reach through at most N joins summarize their keys in a "
              "pre-pass too; 0 = filtered tables only."),
    Knob("cut_scans", "on", "A filtered join input whose keys no pre-pass summarizes (a scan too large to read "
         "twice, or a scan joined map-side with broadcast tables) that feeds a repartition join with another such "
         "input is cut into a MAP stage of its own, so that its written rows summarize their keys for the other "
         "input (TPC-H Q21's l1 for l2, Q3's orders joined with a broadcast customer for lineitem); adaptive "
         "staging fuses it back unless its summary pays for the write. "
         "'off': such scans stay in their join's stage. Strategies 'always', 'oracle' and 'adaptive' under "
         "adaptive staging.",
         "--cut-scans", "choice", ("on", "off"),
         help="Cut large filtered scans into stages of their own when their keys' summary pays (adaptive)."),
    Knob("transfer_keep", 10 * MB, "A predicate-transfer pass over a table whose files hold at least this many "
         "bytes keeps its filtered rows (the query's columns) in Spark's cache, memory and disk, and the stages that "
         "read the table again read them instead: each table is read once. Keeping runs the pass as an action of "
         "its own, which costs more than reading again a smaller table. 0: every pass keeps its rows; -1: none.",
         "--transfer-keep", "size", shown="10MB",
         help="A transfer pass over a table of at least SIZE keeps its rows for the join (scan once); "
              "0 = every pass, -1 = none."),
    Knob("transfer_survivors", 0.35, "A predicate-transfer pass is made only where it is estimated to keep at "
         "most this share of its table's rows (after its filters and probes): a filter that lets most keys through "
         "removes little from the tables it reaches and costs a read (Robust Predicate Transfer's RPT+ skips "
         "building above about 35%). 1: every pass the schedule allows.",
         "--transfer-survivors", "float", low=0, high=1,
         help="Make a transfer pass only where it keeps at most this share of its table's rows; 1 = always."),
    Knob("transfer_choice", "auto", "Under 'adaptive', the benefit estimator prices the query's predicate-transfer "
         "schedule (its reading stages' probes, eq. 1 with aipq's terms, against its passes' reads) and runs it "
         "instead of adaptive's summaries where it saves more than they do by more than β. 'off': 'adaptive' never "
         "runs a transfer ('--ip transfer' forces one).",
         "--transfer-choice", "choice", ("auto", "off"),
         help="Let 'adaptive' run predicate transfer where the estimator says it pays more than its summaries."),
    Knob("stats_lg_k", 12, "HyperLogLog precision: log2 of the sketch's buckets (4–21); the relative standard "
         "error is 1.04/sqrt(2^lg_k), 1.6 % at 12 (Spark's default).",
         "--stats-lg-k", "int", low=4, high=21,
         help="HyperLogLog precision (log2 buckets); relative error 1.04/sqrt(2^k)."),
    Knob("cartesian", "refuse", "A join with no condition between two inputs not known to be small: 'refuse' it "
         "at planning (Hive's hive.strict.checks.cartesian.product) or 'allow' it; CROSS JOIN is always allowed.",
         "--cartesian", "choice", ("refuse", "allow"),
         help="A join with no condition between two large inputs: refuse it (Hive's strict mode) or allow it."),
    Knob("stats_columns", (), "More columns to collect statistics on, as COLUMN, TABLE.COLUMN or DB.TABLE.COLUMN "
         "(join keys and filter columns are always included).",
         "--stats-columns", "columns", shown="",
         help="More columns to collect statistics on: COLUMN, TABLE.COLUMN, comma-separated."),
    Knob("staging", "adaptive", "Which stage boundaries are materialized: 'hive' (every stage's output written as "
         "parquet and read back, the paper's setting), 'adaptive' (only where a summary the estimator chose is built "
         "in the stage's write, or several stages read it; other stages are fused into their consumer's Spark job), "
         "'none' (the statement as one Spark plan; only filtered tables' summary pre-passes pass information).",
         "--staging", "choice", ("hive", "adaptive", "none"),
         help="Materialize every stage boundary (hive), only where a summary needs it (adaptive), or none."),
    Knob("handoff", "auto", "With 'auto', a SELECT for which aipq's plan-time decisions choose nothing of its "
         "own (no summary, no shared subplan, no pre-aggregation, no semi join built from its preserved side), "
         "with the statistics it needs already known, is handed to Spark whole: its SQL planned by Spark's "
         "optimizer as spark.sql would (join reordering, runtime filters, dynamic partition pruning, adaptive "
         "execution), with aipq's Hive SQL semantics and session extensions on; SQL that Spark refuses or fails "
         "on runs aipq's own plan, so errors are aipq's. 'off' always runs aipq's own plan (to compare it, or to "
         "see its stages). Under 'auto', forcing switches (--ip, --staging or --plan other than the default, "
         "--reuse on) run aipq's plan too. Explain says which and why.",
         "--handoff", "choice", ("auto", "off"),
         help="Hand a query aipq would change nothing in to Spark's own planner (auto), or never (off)."),
    Knob("runtime_filters", "auto", "In a query handed to Spark, Spark's runtime Bloom filter (a join's "
         "filtered small side summarized and applied to the other side's scan before its shuffle) is built for "
         "any scanned side larger than broadcast_threshold with 'auto'; Spark's default waits for a 10 GB scan, "
         "sized for clusters, so at this machine's scales it never builds one. 'spark' keeps Spark's threshold.",
         "--runtime-filters", "choice", ("auto", "spark"),
         help="Let Spark's runtime Bloom filter prune any scan above the broadcast threshold in a handed-off "
              "query (auto), or only at Spark's 10 GB (spark)."),
    Knob("reuse", "off", "Stage outputs kept in the stage-output cache by earlier commands are read instead of "
         "computed again when the same subplan runs over the same table files ('on'); a command always reads "
         "the outputs it kept itself (a workflow's later statements), and removes them when it completes unless "
         "this is 'on'.",
         "--reuse", "switch", ("off", "on"),
         help="Read stage outputs that earlier commands kept, and keep this command's for later ones."),
    Knob("shared_scans", "off", "In a batch of files (aipq run FILE... or a directory), a table several of them "
         "read is read once with every column they read and kept in Spark's cache (memory, spilling to disk) "
         "for all of them ('on'), or read by each on its own ('off': the default, since on TPC-H SF 1 reading "
         "Spark's cache was slower than reading the parquet files again).",
         "--shared-scans", "choice", ("on", "off"),
         help="In a batch, read a table several files read once for all of them."),
    Knob("cache_size", 8 * GB, "The most bytes the stage-output cache (<work dir>/stage-cache) holds; the least "
         "recently used outputs are removed first. 0: no cache (every stage is computed).",
         "--cache-size", "size", low=0, shown="8GB",
         help="The most bytes the stage-output cache holds (least recently used out first); 0 = no cache."),
    Knob("work_dir", "", "Where runs write their stage outputs and summaries: any URI Spark reads (hdfs://, "
         "s3a://, file:, a local path); on a cluster it must be storage every executor reaches. Default: "
         "<home>/runs.", "--work-dir", "uri", shown="", help="Folder (any Hadoop URI) for runs' stage outputs."),
    Knob("warehouse", "", "Where CREATE TABLE … AS SELECT puts a table's data (any URI Spark reads; Spark's "
         "spark.sql.warehouse.dir sets it too; a local path is made absolute). Default: <home>/warehouse.",
         "--warehouse", "uri", shown="", help="Folder (any Hadoop URI) for the data of tables workflows create."),
    Knob("commit", "auto", "How a table write is committed: 'rename' (the new data folder is renamed into place: "
         "atomic on local file systems and HDFS), 'versioned' (the data goes to a new version folder and the "
         "catalog entry switches to it: atomic where rename is a copy, as on object stores), 'auto' (versioned on "
         "s3a/gs/wasb and other object stores, rename elsewhere).",
         "--commit", "choice", ("auto", "rename", "versioned"), help="Table commit: rename, versioned, or auto."),
    Knob("metastore_timeout", 60.0, "Seconds the Hive metastore's client waits for each answer of the metastore "
         "(Hive's hive.metastore.client.socket.timeout, given to the session aipq starts unless --conf gives that "
         "itself): a metastore that stops answering fails the command with exit 1 naming it, and the workflow can "
         "be resumed with --resume.", kind="float", low=1, high=86400),
)
KNOB = {k.name: k for k in KNOBS}


def default_of(name: str):
    return KNOB[name].default


@dataclass(frozen=True)
class Settings:
    """The knob values for one invocation (each default is the knob's, declared in ``KNOBS``)."""

    plan: str = default_of("plan")
    reoptimize_factor: float = default_of("reoptimize_factor")
    preaggregate: str = default_of("preaggregate")
    share_subplans: str = default_of("share_subplans")
    broadcast_threshold: int = default_of("broadcast_threshold")
    broadcast_sizes: str = default_of("broadcast_sizes")
    runtime_broadcast: str = default_of("runtime_broadcast")
    hash_joins: str = default_of("hash_joins")
    long_decimals: str = default_of("long_decimals")
    shuffle_partitions: int = default_of("shuffle_partitions")
    reducer_bytes: int = default_of("reducer_bytes")
    dialect: str = default_of("dialect")
    ip: str = default_of("ip")
    alpha: int = default_of("alpha")
    beta: float = default_of("beta")
    margin: float = default_of("margin")
    probe_min_rejection: float = default_of("probe_min_rejection")
    bloom_size: int = default_of("bloom_size")
    bloom_fpp: float = default_of("bloom_fpp")
    statistics: str = default_of("statistics")
    scan_summaries: int = default_of("scan_summaries")
    scan_reach: int = default_of("scan_reach")
    cut_scans: str = default_of("cut_scans")
    transfer_keep: int = default_of("transfer_keep")
    transfer_survivors: float = default_of("transfer_survivors")
    transfer_choice: str = default_of("transfer_choice")
    stats_lg_k: int = default_of("stats_lg_k")
    stats_columns: tuple[str, ...] = default_of("stats_columns")
    cartesian: str = default_of("cartesian")
    staging: str = default_of("staging")
    handoff: str = default_of("handoff")
    runtime_filters: str = default_of("runtime_filters")
    reuse: str = default_of("reuse")
    shared_scans: str = default_of("shared_scans")
    cache_size: int = default_of("cache_size")
    work_dir: str = default_of("work_dir")
    warehouse: str = default_of("warehouse")
    commit: str = default_of("commit")
    metastore_timeout: float = default_of("metastore_timeout")
    spark_conf: dict[str, str] = field(default_factory=dict)
    master: str | None = None

    def knob_values(self) -> dict[str, object]:
        values = asdict(self)
        return {k.name: values[k.name] for k in KNOBS}


def knob_table() -> str:
    """The guide's table of the planning knobs (docs/guide/commands.md; tests/test_knobs.py keeps it equal to
    this): each option with its setting name, default and one-line help, then each one's full meaning, wrapped
    so that the Markdown reads as well as it renders."""
    kinds = {"size": "SIZE", "size-or-auto": "SIZE\\|auto", "int": "N", "float": "X", "columns": "COLS",
             "uri": "URI"}
    rows = ["| option | default | in short |", "|---|---|---|"]
    meanings = ["", "Each option in full:", ""]
    for knob in KNOBS:
        if not knob.flag:
            continue
        values = "\\|".join(knob.choices) if knob.kind == "choice" else kinds.get(knob.kind, "NAME")
        shown = knob.shown if knob.shown is not None else str(knob.default)
        option = knob.flag if knob.kind == "switch" else f"{knob.flag} {values}"
        cell_help = knob.help.replace("|", r"\|").replace("<", r"\<")  # a pipe ends a cell; <home> is no HTML tag
        rows.append(f"| `{option}` (`{knob.setting}`) | {shown} | {cell_help} |")
        plain_option = option.replace("\\", "")
        meaning = knob.doc.replace("<", r"\<")
        meanings.extend(textwrap.wrap(f"- `{plain_option}`: {meaning}", width=116,
                                      subsequent_indent="  ", break_long_words=False, break_on_hyphens=False))
    return "\n".join(rows + meanings)


def _check_knobs_match_settings() -> None:
    names = {f.name for f in fields(Settings)}
    missing = [k.name for k in KNOBS if k.name not in names]
    assert not missing, f"knobs without a Settings field: {missing}"


_check_knobs_match_settings()
