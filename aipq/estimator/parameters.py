"""The paper's model parameters on Spark, and the unit costs (defaults, or measured by ``aipq calibrate``).

How the paper's MapReduce terms map onto an aipq stage:

- a *page* is ``PAGE_BYTES`` (1 MiB): the unit C_R, C_W and C_T are measured in;
- the paper's figures are per task; the estimator multiplies each by the waves of tasks that run it (tasks /
  cores, ``benefit.stage_seconds``) so that savings and the summary's one-time costs are both wall seconds;
- m (map tasks of the parent job) = the splits Spark plans for the probed input: for a base table, from its
  files (``stats/fingerprint.DataFiles.splits``: Spark's maxSplitBytes packing); for an earlier stage's output,
  the same over the files it wrote;
- r (reduce tasks) = the stage's shuffle partitions (``shuffle_partitions``, or per stage from its input's size
  with ``reducer_bytes``, ``planner/reducers.py``; aipq turns AQE off in stages, so this is exact once the
  stage's inputs are written, and the most until then);
- M (pages a map task emits) = bytes of the probed input's columns, after its map-side filters, / m / page;
- B (sort buffer, pages) = the execution memory one task may use: (heap − 300 MB reserved) ×
  spark.memory.fraction (0.6) / concurrent tasks, / page;
- N (nodes the summary is copied to) = executors (1 in local mode: the driver's JVM);
- r' (partial summaries merged) = the producer stage's write tasks (Spark merges the observed Bloom filter
  aggregates of all tasks);
- |F| = the summary's bytes; Δ = M × (1 − share of rows that survive the probe), ``estimator/delta.py``;
- sorting and merging (eqs 5–6, 9–12): Hadoop wrote every map output once more to sort it and merged the
  reducers' inputs on disk; Spark's shuffle write is that one write (priced by C_T, measured over the whole
  shuffle) and it sorts in memory, so only passes beyond the buffer B cost page reads and writes, and the
  in-memory sort costs C_S per page (``cost_model.spark_benefit``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from aipq.estimator.cost_model import UnitCosts

PAGE_BYTES = 1 << 20
RESERVED_MEMORY = 300 * (1 << 20)
CALIBRATION_FILE = "calibration.json"

# Measured by `aipq calibrate` on the project's 2-core machine (docs/decisions.md); used until `aipq calibrate`
# has run on the machine at hand.
DEFAULT_SORT_SECONDS_PER_PAGE = 0.001
DEFAULT_UNIT_COSTS = UnitCosts(c_read=0.0105, c_write=0.021, c_transfer=0.022,
                               u_read=5e-11, u_write=1.1e-9, u_transfer=1e-9, c_sort=DEFAULT_SORT_SECONDS_PER_PAGE)
# Seconds per row and task to probe a Bloom filter (xxhash64 + bit tests), not in the paper's model.
DEFAULT_PROBE_SECONDS_PER_ROW = 7e-8
# Seconds per written row and core to build a summary inside the write (Bloom filter + its key sketch): the
# paper's T_r builds for free; on Spark the aggregates run per row.
DEFAULT_BUILD_SECONDS_PER_ROW = 3.5e-7
# Seconds a summary pre-pass (a SCAN stage: ip/scan_summaries.py) costs beyond reading its columns' pages:
# scheduling a Spark job, its tasks, evaluating the filters (docs/decisions.md).
DEFAULT_PREPASS_SECONDS = 0.15


@dataclass(frozen=True)
class Calibration:
    costs: UnitCosts
    probe_seconds_per_row: float
    source: str  # "defaults" or "calibrated on <date>"
    build_seconds_per_row: float = DEFAULT_BUILD_SECONDS_PER_ROW

    def as_dict(self) -> dict:
        return {"source": self.source, "probe_seconds_per_row": self.probe_seconds_per_row,
                "build_seconds_per_row": self.build_seconds_per_row, **asdict(self.costs)}


def calibration_path(home: Path, master: str | None) -> Path:
    """Where the unit costs measured on ``master`` are kept: one file for local mode, one per cluster master
    (``calibration-spark-host-7077.json``), since a cluster's disks, network and cores price work differently."""
    if master is None or master.startswith("local"):
        return Path(home) / CALIBRATION_FILE
    return Path(home) / f"calibration-{re.sub(r'[^A-Za-z0-9.]+', '-', master).strip('-')}.json"


def load_calibration(home: Path, master: str | None = None) -> Calibration:
    """The unit costs ``aipq calibrate`` stored under the home for this master, else the documented defaults."""
    path = calibration_path(home, master)
    try:
        data = json.loads(path.read_text())
        costs = UnitCosts(**{k: float(data[k]) for k in UnitCosts.__dataclass_fields__ if k != "c_sort"},
                          c_sort=float(data.get("c_sort", DEFAULT_SORT_SECONDS_PER_PAGE)))
        return Calibration(costs, float(data.get("probe_seconds_per_row", DEFAULT_PROBE_SECONDS_PER_ROW)),
                           f"calibrated on {data.get('date', '?')}",
                           float(data.get("build_seconds_per_row", DEFAULT_BUILD_SECONDS_PER_ROW)))
    except (OSError, ValueError, KeyError, TypeError):
        return Calibration(DEFAULT_UNIT_COSTS, DEFAULT_PROBE_SECONDS_PER_ROW, "defaults")


def save_calibration(home: Path, master: str | None, costs: UnitCosts, probe_seconds_per_row: float,
                     build_seconds_per_row: float = DEFAULT_BUILD_SECONDS_PER_ROW) -> Path:
    path = calibration_path(home, master)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({**asdict(costs), "probe_seconds_per_row": probe_seconds_per_row,
                                   "build_seconds_per_row": build_seconds_per_row,
                                   "date": time.strftime("%Y-%m-%d")}, indent=2))
    partial.replace(path)
    return path


def parse_memory(text: str) -> int:
    """Spark's memory strings (``1g``, ``512m``, ``2048k``) in bytes."""
    text = text.strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if text and text[-1] == "b":
        text = text[:-1]
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sort_buffer_pages(heap_bytes: int, memory_fraction: float, concurrent_tasks: int) -> float:
    """B: the execution memory one task may use for sorting, in pages."""
    usable = max(heap_bytes - RESERVED_MEMORY, 0) * memory_fraction / max(concurrent_tasks, 1)
    return max(usable / PAGE_BYTES, 3.0)
