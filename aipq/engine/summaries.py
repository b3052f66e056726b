"""Summaries at run time: built in the same pass as a stage's output write (the paper's IP-aware T_r), stored
with their metadata in the run's work directory, and probed where the IP planner decided (P_m: a stage input
before the shuffle; or a stage's own output before the write).

Keys are hashed with Spark's xxhash64; integral keys are cast to BIGINT first, because xxhash64 of an INT and
of the same BIGINT differ and the two sides of a join may have different integral types. A summary is never
probed with a column of another type family (that could only drop rows wrongly).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import date, timedelta

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, DataType, IntegerType, LongType, ShortType

from aipq.catalog import TableEntry
from aipq.engine import jvm
from aipq.engine.storage import Storage, join
from aipq.errors import AipqError
from aipq.ip.bloom_sizing import BLOOM_HEADER_BYTES
from aipq.ip.decisions import BuiltInfo, SummaryBuild, SummaryUse
from aipq.planner.logical import Scan
from aipq.stats import sketches
from aipq.stats.sketches import sketch_input_sql

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
SKETCH_LG_K = 12
# In a stage-output cache entry: the Bloom filters built while the entry was written, offered to a later reader
OFFERED_FILE = "_aipq_summaries.json"
# a cached Bloom filter serves a build that asks for at most its bits (a larger filter of the same keys is at
# least as precise) and at least 1/OFFERED_SIZE_FACTOR of them (a much larger one costs more to ship and probe)
OFFERED_SIZE_FACTOR = 2
# rows over which a task judges a probe (ProbeGate): enough for a share of 10% to be measured to within about
# 0.3% points, and small against a task's rows (an SF 1 lineitem task reads about 3 M)
GATE_WINDOW_ROWS = 32768
# The largest share of a probed column's [min, max] a summary's key range may cover and still be pushed into the
# probed scan (``narrows``): a wider range skips little and parquet still applies it page by page.
RANGE_MAX_SHARE = 0.5


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def key_family(data_type: DataType) -> str:
    return "integral" if isinstance(data_type, _INTEGRAL) else data_type.simpleString()


def hashed_key(df: DataFrame, column: str) -> Column:
    """The key's 64-bit hash, integral keys of any width as BIGINT (a summary built on one side probes the
    other); SQL text, one py4j call."""
    value = quoted(column)
    if isinstance(df.schema[column].dataType, _INTEGRAL):
        value = f"CAST({value} AS BIGINT)"
    return F.expr(f"xxhash64({value})")


def _has_range(df: DataFrame, column: str) -> bool:
    """Whether a key's least and greatest values bound it the same way on every side of a join: integral and
    date keys (strings compare by collation, floating point has NaN)."""
    return key_family(df.schema[column].dataType) in ("integral", "date")


def narrows(summary: BuiltSummary, domain: tuple[object, object] | None) -> bool:
    """Whether a summary's key range is worth its predicate on a probed column whose values lie in ``domain``
    (its [min, max]; None: unknown, assumed so): the range covers at most ``RANGE_MAX_SHARE`` of it. Parquet
    applies the pushed-down predicate page by page, which costs a scan where it skips nothing."""
    if domain is None or domain[0] is None or domain[1] is None:
        return True
    try:
        low, high = (_key_value(v, summary.family) for v in domain)
        if summary.family == "integral":
            low, high = int(low), int(high)
        width, covered = _span(low, high), _span(summary.low, summary.high)
    except (TypeError, ValueError, AttributeError):
        return True
    return width <= 0 or covered <= RANGE_MAX_SHARE * width


def _span(low, high) -> float:
    """How far apart two keys are: integers by their difference, dates by their days."""
    apart = high - low
    return apart.days if isinstance(apart, timedelta) else apart


def _key_value(value: object, family: str) -> object:
    """An observed least or greatest key as a Python value (a date arrives as its ISO text)."""
    return date.fromisoformat(value) if family == "date" and isinstance(value, str) else value


def _sketch_metric(index: int, build: SummaryBuild, sketched: dict[str, str]) -> str:
    """The observed metric holding the HLL sketch of a build's keys: the statistics' one when there is one."""
    return sketched.get(build.column, f"ip_items_{index}")


@dataclass
class BuiltSummary:
    stage: int
    column: str
    kind: str
    family: str
    items: int | None = None  # distinct keys put in (estimated with HyperLogLog in the same pass)
    size_bytes: int | None = None
    bits: int | None = None
    expected_items: int | None = None
    expected_fpp: float | None = None  # Bloom filters: from the share of bits set
    store_seconds: float = 0.0
    path: str | None = None
    payload: object = field(default=None, repr=False)
    sketch: bytes | None = field(default=None, repr=False)  # HLL of the keys (statistics' hashing)
    offered: bool = False  # taken from a stage-output cache entry, not built by this run
    # the keys' least and greatest values (integral and date keys): a probe first keeps only rows in this range,
    # a predicate Spark pushes into the scan, so parquet skips row groups whose statistics lie outside it
    low: object = None
    high: object = None
    # a summary pass not yet run (``engine/pass_job.py``): its filter as a scalar subquery column,
    # which later passes of the same job probe with
    pending: Column | None = field(default=None, repr=False)
    # a Bloom filter as the broadcast variable its probes read (``jvm.bloom_broadcast``), made at its first probe
    broadcast: object = field(default=None, repr=False)

    def info(self) -> BuiltInfo:
        return BuiltInfo(self.kind, self.size_bytes, self.items, self.sketch)  # type: ignore[arg-type]

    def metadata(self) -> dict:
        in_memory = ("payload", "sketch", "pending", "broadcast")
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in in_memory}
        data["hash"] = "xxhash64 (integral keys as BIGINT)" if self.kind != "exact" else None
        data["low"], data["high"] = (None if v is None else str(v) for v in (self.low, self.high))
        return data


@dataclass
class ProbeRecord:
    producer: int
    column: str
    kind: str
    target: str
    place: str
    target_column: str
    relation: str
    reason: str
    rows_in: int | None = None
    rows_out: int | None = None
    skipped: str | None = None
    measured_fpr: float | None = None  # with --analyze: share of non-matching rows the summary let through
    unprobed_rows: int | None = None  # rows a task let through without probing (the probe gate judged it idle)
    # a summary of a partition column: (partitions left, partitions registered) when it pruned whole partitions
    # (their folders are never listed or read) instead of probing rows
    partitions: tuple[int, int] | None = None
    mark: int | None = field(default=None, repr=False, compare=False)  # its counted filter (jvm.counted_filter)
    observation: object = field(default=None, repr=False, compare=False)  # exact summaries: counted by observing
    raw: object = field(default=None, repr=False, compare=False)  # the input before any probe (for --analyze)
    gate: object = field(default=None, repr=False, compare=False)  # the probe gate's tally (jvm.probe_gate)

    def finish(self, filter_counts: dict[int, tuple[int | None, int | None]]) -> None:
        """Rows in and out, from Spark's metrics of the probe's filter (``filter_counts``, by mark) or from the
        observations around an exact summary's semi join."""
        if self.mark is not None:
            self.rows_in, self.rows_out = filter_counts.get(self.mark, (None, None))
        if self.gate is not None:
            self.unprobed_rows = jvm.gate_unprobed_rows(self.gate)
            self.gate = None
        if self.observation is not None:
            before, after = self.observation
            self.observation = None
            try:
                self.rows_in = int(before.get["rows"])
                self.rows_out = int(after.get["rows"])
            except Exception:  # a subtree Spark proved empty and removed reports nothing: unknown, not fatal
                self.rows_in = self.rows_out = None

    def as_dict(self) -> dict:
        hidden = ("mark", "observation", "raw", "gate")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}


class SummaryStore:
    """The summaries of one run."""

    def __init__(self, spark, storage: Storage, work_dir: str, stage_paths: dict[int, str],
                 min_rejection: float = 0.0):
        self.spark = spark
        self.min_rejection = min_rejection  # the probe gate's threshold (0: every row probed)
        self.storage = storage
        self.folder = join(work_dir, "summaries")
        self.stage_paths = stage_paths
        self.built: dict[tuple[int, str], BuiltSummary] = {}
        self._marks = 0  # probes so far: each probe's filter gets its own mark

    def infos(self) -> dict[tuple[int, str], BuiltInfo]:
        return {key: summary.info() for key, summary in self.built.items()}

    def alias(self, built_by: int, stage_id: int) -> None:
        """The summaries stage ``built_by`` built, offered as ``stage_id``'s too (a re-planned DAG's pre-pass of
        the same scan)."""
        for (producer, column), summary in list(self.built.items()):
            if producer == built_by:
                self.built.setdefault((stage_id, column), summary)

    # ---- building (T_r) -----------------------------------------------------------------------------
    def build_columns(self, df: DataFrame, builds: list[SummaryBuild], sketched: dict[str, str]) -> list[Column]:
        """Aggregates observed while ``df`` is written: one summary (and its distinct count) per build.
        ``sketched``: columns whose key sketch the same observation already computes (statistics), by metric."""
        columns = []
        for i, build in enumerate(builds):
            hashed = hashed_key(df, build.column)
            if build.column not in sketched:
                # a mergeable sketch of the keys, like the statistics' ones, so the estimator can intersect it
                # with the probed input's key sketch
                data_type = df.schema[build.column].dataType.simpleString()
                columns.append(F.expr(f"hll_sketch_agg({sketch_input_sql(build.column, data_type)}, {SKETCH_LG_K})")
                               .alias(_sketch_metric(i, build, sketched)))
            if build.kind == "bloom":
                expected = build.expected_items or max(build.bits // 10, 1)
                columns.append(jvm.bloom_filter_agg(self.spark, hashed, expected, build.bits).alias(f"ip_{i}"))
                if _has_range(df, build.column):
                    key = F.col(quoted(build.column))
                    columns += [F.min(key).alias(f"ip_low_{i}"), F.max(key).alias(f"ip_high_{i}")]
            elif build.kind == "hash-list":
                columns.append(F.collect_set(hashed).alias(f"ip_{i}"))
        return columns

    def pend(self, df: DataFrame, builds: list[SummaryBuild], aggregate: Column) -> None:
        """Register ``builds`` as summaries to come: ``aggregate`` (a scalar subquery of the struct of
        ``build_columns``) will hold them, and probes read them from it until ``collect`` stores them."""
        for i, build in enumerate(builds):
            self.built[build.key] = BuiltSummary(
                build.stage, build.column, build.kind, key_family(df.schema[build.column].dataType),
                size_bytes=(build.bits or 0) // 8 + BLOOM_HEADER_BYTES, bits=build.bits,
                expected_items=build.expected_items, pending=aggregate.getField(f"ip_{i}"))

    @staticmethod
    def jvm_resident(builds: list[SummaryBuild]) -> list[str]:
        """Observed metrics that stay in the JVM (HIP's hash lists are probed there; Python never needs them)."""
        return [f"ip_{i}" for i, build in enumerate(builds) if build.kind == "hash-list"]

    def collect(self, df: DataFrame, builds: list[SummaryBuild], observation: Observation, values: dict,
                sketched: dict[str, str]) -> None:
        """Store the summaries ``builds`` from the stage's observed ``values`` (``jvm.observed_metrics``)."""
        if not builds:
            return
        self.storage.mkdirs(self.folder)
        for i, build in enumerate(builds):
            started = time.perf_counter()
            key_sketch = bytes(values[_sketch_metric(i, build, sketched)] or b"")
            items = round(sketches.estimate(key_sketch)) if key_sketch else 0
            summary = BuiltSummary(build.stage, build.column, build.kind, key_family(df.schema[build.column].dataType),
                                   items=items, bits=build.bits, expected_items=build.expected_items,
                                   sketch=key_sketch or None)
            base = join(self.folder, f"S{build.stage}-{build.column}")
            if build.kind == "bloom":
                # Spark's aggregate gives NULL over no rows: an empty output, whose keys match nothing.
                data = bytes(values[f"ip_{i}"] or b"")
                summary.payload = data or None
                summary.size_bytes = len(data)
                summary.expected_fpp = jvm.bloom_filter_shape(data).expected_fpp if data else 0.0
                summary.path = base + ".bloom"
                summary.low, summary.high = (_key_value(values.get(f"ip_{end}_{i}"), summary.family)
                                             for end in ("low", "high"))
                self.storage.write_bytes(summary.path, data)
            elif build.kind == "hash-list":
                seq = jvm.observed_value(observation, f"ip_{i}")
                summary.payload = seq
                summary.items = jvm.seq_size(seq)
                summary.size_bytes = 8 * summary.items  # 64-bit hash values, as HIP's lists
            else:
                summary.payload = self.stage_paths[build.stage]  # the exact keys are the written output
                summary.path = summary.payload
            summary.store_seconds = time.perf_counter() - started
            self.storage.write_text(base + ".json", json.dumps(summary.metadata(), indent=2))
            self.built[build.key] = summary

    # ---- offering to later readers of a cached output (issue 43) ------------------------------------------
    def offer(self, stage_id: int, folder: str) -> None:
        """Keep the Bloom filters stage ``stage_id`` built beside its output in the cache entry ``folder``, so that
        a later reader of the entry (another query of the batch, a later ``--reuse``) takes them instead of
        building them again from the cached rows."""
        offered = []
        for (producer, column), summary in self.built.items():
            if producer != stage_id or summary.kind != "bloom" or summary.offered:
                continue
            name = f"_aipq_summary_{len(offered)}.bloom"
            self.storage.write_bytes(join(folder, name), summary.payload or b"")
            offered.append({"column": column, "file": name, "family": summary.family, "items": summary.items,
                            "bits": summary.bits, "expected_items": summary.expected_items,
                            "expected_fpp": summary.expected_fpp,
                            "sketch": base64.b64encode(summary.sketch).decode() if summary.sketch else None})
        if offered:
            self.storage.write_text(join(folder, OFFERED_FILE), json.dumps(offered, indent=2))

    def take_offered(self, folder: str, builds: list[SummaryBuild]) -> list[SummaryBuild]:
        """Register, as built, the filters the cache entry ``folder`` offers for ``builds`` (same column, at least
        the bits asked for and at most ``OFFERED_SIZE_FACTOR`` times them); the builds left to build."""
        if not any(build.kind == "bloom" for build in builds):
            return builds
        try:
            offered = {o["column"]: o for o in json.loads(self.storage.read_text(join(folder, OFFERED_FILE)))}
        except (AipqError, OSError, ValueError, TypeError):
            return builds  # an entry kept without filters (or before filters were kept)
        left = []
        for build in builds:
            found = offered.get(build.column)
            if build.kind != "bloom" or found is None or not build.bits or not found["bits"] or \
                    not build.bits <= found["bits"] <= build.bits * OFFERED_SIZE_FACTOR:
                left.append(build)
                continue
            path = join(folder, found["file"])
            data = self.storage.read_bytes(path)
            self.built[build.key] = BuiltSummary(
                build.stage, build.column, "bloom", found["family"], items=found["items"], size_bytes=len(data),
                bits=found["bits"], expected_items=found["expected_items"], expected_fpp=found["expected_fpp"],
                path=path, payload=data or None,
                sketch=base64.b64decode(found["sketch"]) if found["sketch"] else None, offered=True)
        return left

    # ---- probing (P_m) ------------------------------------------------------------------------------
    def probe(self, df: DataFrame, uses: list[SummaryUse], records: list[ProbeRecord], name: str,
              domain: Callable[[str], tuple[object, object] | None] = lambda column: None) -> DataFrame:
        """``df`` without the rows every summary in ``uses`` rules out; rows counted before and after.
        ``domain``: a probed column's [min, max] where known (a key range covering most of it is left out)."""
        applicable = []
        for use in uses:
            summary = self.built[use.summary]
            record = ProbeRecord(use.producer, use.column, summary.kind, use.target.label, use.target.place,
                                 use.target.column, use.relation, use.reason)
            records.append(record)
            family = key_family(df.schema[use.target.column].dataType)
            if family != summary.family:
                record.skipped = f"key types differ ({family} vs {summary.family})"
                continue
            applicable.append((use, summary, record))
        if not applicable:
            return df
        raw = df
        for i, (use, summary, record) in enumerate(applicable):
            record.raw = raw
            if summary.kind == "exact":  # a semi join, not a filter: its rows are counted by observing
                df, before = jvm.observe(df, f"{name}-{i}-in", ["count(1) AS rows"])
                df, after = jvm.observe(self._apply(df, use.target.column, summary), f"{name}-{i}-out",
                                        ["count(1) AS rows"])
                record.observation = (before, after)
                continue
            self._marks += 1
            record.mark = -(2 ** 40) - self._marks
            df = self._apply(df, use.target.column, summary, record.mark, record, domain(use.target.column))
        return df

    def release(self) -> None:
        """The run is over: its filters' broadcasts are freed now rather than when the JVM's garbage collector
        finds them (a session that runs many queries would hold them until then)."""
        for summary in self.built.values():
            if summary.broadcast is not None:
                jvm.destroy_broadcast(summary.broadcast)
                summary.broadcast = None

    def partitions_left(self, scan: Scan, uses: list[SummaryUse], records: list[ProbeRecord]) -> TableEntry:
        """The scan's table with only the partitions whose value every summary in ``uses`` (of one partition
        column) may hold: the values are probed exactly as rows would be, on a small frame of one row each."""
        table = scan.table
        source = dict(scan.columns + scan.filter_only)[uses[0].target.column]
        index = table.partition_columns.index(source)
        texts = sorted({p.values[index] for p in table.partitions if p.values[index] is not None})
        frame = self.spark.createDataFrame([(t,) for t in texts], "text string")
        frame = frame.select("text", F.col("text").cast(table.column_types()[source]).alias("key"))
        for use in uses:
            summary = self.built[use.summary]
            record = ProbeRecord(use.producer, use.column, summary.kind, use.target.label, use.target.place,
                                 use.target.column, use.relation, use.reason)
            records.append(record)
            family = key_family(frame.schema["key"].dataType)
            if family != summary.family:
                record.skipped = f"key types differ ({family} vs {summary.family})"
                continue
            frame = self._apply(frame, "key", summary)
        kept = {row["text"] for row in frame.collect()}
        # a NULL partition value never equals a join key: its partition is pruned with the rest
        left = tuple(p for p in table.partitions if p.values[index] in kept)
        for record in records[-len(uses):]:
            if record.skipped is None:
                record.partitions = (len(left), len(table.partitions))
        return replace(table, partitions=left)

    def measure_false_positives(self, record: ProbeRecord) -> None:
        """Two extra jobs over the probed input (for --analyze only): rows the summary alone keeps, and rows
        whose key really is among the producer's keys; the difference over the non-matching rows is the
        measured false-positive rate."""
        summary = self.built.get((record.producer, record.column))
        if record.raw is None or summary is None or summary.kind == "exact":
            return
        raw = record.raw
        total = raw.count()
        passed = self._apply(raw, record.target_column, summary).count()
        exact = BuiltSummary(summary.stage, summary.column, "exact", summary.family,
                             payload=self.stage_paths[summary.stage])
        matching = self._apply(raw, record.target_column, exact).count()
        record.measured_fpr = (passed - matching) / (total - matching) if total > matching else 0.0
        record.raw = None

    def _apply(self, df: DataFrame, column: str, summary: BuiltSummary, mark: int | None = None,
               record: ProbeRecord | None = None, domain: tuple[object, object] | None = None) -> DataFrame:
        """``df`` probed with ``summary``; with a ``mark``, as a filter whose rows Spark's metrics count; with a
        ``record``, behind a probe gate (``jvm.probe_gate``) whose tally the record keeps."""
        if summary.kind in ("bloom", "hash-list"):
            if summary.low is not None and summary.high is not None and _has_range(df, column) \
                    and narrows(summary, domain):
                key = F.col(quoted(column))
                df = df.filter(key.between(F.lit(summary.low), F.lit(summary.high)))
            condition = self._condition(df, column, summary)
            if record is not None and self.min_rejection > 0:
                condition, record.gate = jvm.probe_gate(self.spark, condition, GATE_WINDOW_ROWS, self.min_rejection)
            return df.filter(condition if mark is None else jvm.counted_filter(condition, mark))
        # No distinct(): it would add a shuffle of its own to what the oracle is meant to measure; a broadcast
        # semi join only asks whether a key exists.
        keys = self.spark.read.parquet(str(summary.payload)).select(F.col(quoted(summary.column)).alias("__aipq_key"))
        left, right = F.col(quoted(column)), F.col("__aipq_key")
        if summary.family == "integral":
            left, right = left.cast("bigint"), right.cast("bigint")
        return df.join(F.broadcast(keys), left == right, "left_semi")

    def _condition(self, df: DataFrame, column: str, summary: BuiltSummary) -> Column:
        if summary.pending is not None:
            # a pass of the same transfer job, not yet run: its filter is read from its scalar subquery (not its
            # key range, which would be two more subqueries, each planned with the whole of the pass's plan)
            return jvm.might_contain_column(self.spark, summary.pending, hashed_key(df, column))
        if summary.kind == "hash-list":
            return jvm.in_hash_set(self.spark, summary.payload, hashed_key(df, column))
        if summary.payload is None:
            # Keeps no row. Not a literal FALSE: the optimizer would drop the subtree and with it the filter
            # whose metrics count the probe's rows.
            return F.rand(0) < F.lit(-1.0)
        if summary.broadcast is None:  # one broadcast per filter, however many probes and re-plans use it
            summary.broadcast = jvm.bloom_broadcast(self.spark, summary.payload)
        return jvm.might_contain(self.spark, summary.broadcast, hashed_key(df, column))
