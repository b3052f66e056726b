"""What a run of a stage DAG records: per stage its rows, bytes, shuffle, summaries and probes; per run where its
result is and what it re-planned (rendered by cli/, written by ``engine/report.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aipq.engine.jvm import ShuffleFigures
from aipq.engine.sink import Result
from aipq.engine.summaries import BuiltSummary, ProbeRecord
from aipq.ip.decisions import StageDecisions
from aipq.planner.stages import StageDag


@dataclass
class StageMetrics:
    stage_id: int
    operator: str
    seconds: float
    rows_written: int
    bytes_written: int
    shuffle: ShuffleFigures = field(default_factory=ShuffleFigures)
    summaries: list[BuiltSummary] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    decisions: StageDecisions | None = None
    decision_seconds: float = 0.0
    reduce_tasks: int = 0  # the stage's shuffle partitions
    materialized: bool = True  # its output written; else fused into its consumer's job (``ip/staging.py``)
    staging: str = ""  # why it was written or fused
    spark_joins: dict[str, int] = field(default_factory=dict)  # with --analyze: the joins Spark's final plan ran
    measured_broadcasts: list[dict] = field(default_factory=list)  # joins made map-side by measured input sizes
    reused: bool = False  # its rows read from the stage-output cache, not computed
    kept_rows: str = ""  # the transfer passes' kept rows it read or kept (``engine/kept_rows.py``)
    job_group: str = ""  # the Spark job group ``shuffle`` is summed over, once the run ends (``executor``)
    # its rows as estimated before the run, and the q-error against rows_written (``executor.record_estimates``)
    estimate: dict = field(default_factory=dict)


@dataclass
class RunRecord:
    run_id: str
    work_dir: str
    result_path: str
    output_names: tuple[str, ...]
    result_rows: int | None  # None: a handed-off result kept as a DataFrame, not counted until collected
    stages: list[StageMetrics] = field(default_factory=list)
    seconds: float = 0.0
    strategy: str = "off"
    statistics_seconds: float = 0.0  # storing piggybacked statistics, on a thread beside later stages
    statistics_collected: list[str] = field(default_factory=list)  # tables whose statistics this run stored
    result_format: str = "parquet"  # csv or json: the final stage wrote the requested format straight away
    replans: list[dict] = field(default_factory=list)  # each re-plan between stages (``Reoptimizer``)
    dag: StageDag | None = None  # the DAG the run finished with, when a re-plan or the transfer choice changed it
    started_at: float = 0.0  # wall-clock time the run started (what it records itself comes after)
    collected: object | None = None  # the result's rows sent to the driver, not written (``CollectedRows``)
    handed_off: str = ""  # why the query ran as Spark plans it (``engine/handoff.py``); empty: aipq's plan ran
    transfer_choice: dict | None = None  # adaptive's choice of predicate transfer, where it priced one
    # fills each stage's ``estimate`` when first asked (``fill_estimates``), not on every run's critical path
    estimating: Callable[[RunRecord], None] | None = None

    def fill_estimates(self) -> None:
        """Each stage's estimated rows beside its actual rows (``executor.record_estimates``), computed once."""
        if self.estimating is not None:
            estimating, self.estimating = self.estimating, None
            estimating(self)

    @property
    def result(self) -> Result:
        return Result(self.result_path, self.output_names, self.result_format)
