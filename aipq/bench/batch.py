"""``aipq bench batch``: TPC-H's queries as one batch (``aipq run FILE...``) against one by one, two ways: in one
session, so that neither pays a JVM start (wall time, bytes read and bytes shuffled), and as separate ``aipq``
processes, as a scheduler running each file would (JVM start and warm-up included). Modes run interleaved round
by round, the order reversed every other round; every mode's rows are checked against the first mode's, query by
query."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from aipq.batch import check_targets, plan_batch, run_batch
from aipq.bench.runner import canonical_rows
from aipq.config import KNOBS, Settings
from aipq.engine.context import RunContext
from aipq.errors import ExecutionError
from aipq.files import format_size
from aipq.tpch.queries import query_text
from aipq.workflow.source import SqlSource

# In one session: one by one; a batch reading each table on its own (stages in common still computed once); a
# batch with shared scans; one by one again (the A/A control). As processes: one ``aipq run`` per query; the
# batch as one ``aipq run``.
ONE_BY_ONE, BATCH, SHARED_SCANS, ONE_BY_ONE_AGAIN = "one by one", "batch, own scans", "batch, shared scans", \
    "one by one, again"
MODES = (ONE_BY_ONE, BATCH, SHARED_SCANS, ONE_BY_ONE_AGAIN, "one by one, separate commands", "batch, one command")
PROCESS_MODES = MODES[4:]


def baseline(mode: str) -> str:
    """The one-by-one mode ``mode`` is compared with: the one run the same way (in the session, or as processes)."""
    return PROCESS_MODES[0] if mode in PROCESS_MODES else ONE_BY_ONE


@dataclass
class ModeRun:
    seconds: float
    input_bytes: int | None  # None: not measured (a separate process)
    shuffle_write_bytes: int | None
    rows: dict[str, list] = field(default_factory=dict, repr=False)


@dataclass
class ModeResult:
    mode: str
    runs: list[ModeRun] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    def as_dict(self) -> dict:
        return {"mode": self.mode, "median_seconds": round(self.median_seconds, 3),
                "seconds": [round(r.seconds, 3) for r in self.runs],
                "input_bytes": self.runs[0].input_bytes, "shuffle_write_bytes": self.runs[0].shuffle_write_bytes}


def _run(context: RunContext, sources: list[SqlSource], folder: Path, shared_scans: str) -> ModeRun:
    """The sources as one batch (a fresh command: its own stage-output cache)."""
    command = context.with_settings(replace(context.settings, shared_scans=shared_scans)).as_new_command()
    batch = plan_batch(sources, command)
    outcomes = run_batch(batch, check_targets(batch, str(folder), "parquet", True), "parquet")
    spark = context.spark
    rows = {o.name: canonical_rows(spark.read.parquet(o.output).collect()) for o in outcomes if o.output}
    return ModeRun(0.0, sum(o.input_bytes for o in outcomes), sum(o.shuffle_write_bytes for o in outcomes), rows)


def command_options(home: Path, settings: Settings) -> list[str]:
    """``aipq``'s options giving a process ``settings``: each knob off its default as ``--conf aipq.…``, the
    Spark settings and the master."""
    options = ["--home", str(home)]
    values = settings.knob_values()
    for knob in KNOBS:
        value = values[knob.name]
        if value != knob.default:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            options += ["--conf", f"{knob.setting}={text}"]
    for key, value in settings.spark_conf.items():
        options += ["--conf", f"{key}={value}"]
    return options + (["--master", settings.master] if settings.master else [])


def _aipq(aipq_command: Sequence[str], home: Path, settings: Settings, arguments: list[str]) -> None:
    """One ``aipq`` process (started by ``aipq_command``, the command line's own), as a user runs it; its error
    is the mode's."""
    options = command_options(home, settings)
    command = [*aipq_command, *options[:2], "run", *arguments, "--quiet", "--force", *options[2:]]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ExecutionError(f"`aipq run {' '.join(arguments)}` failed (exit {done.returncode})",
                             hint=(done.stderr.strip().splitlines() or [""])[-1])


def _processes(context: RunContext, mode: str, sources: list[SqlSource], folder: Path,
               aipq_command: Sequence[str]) -> ModeRun:
    """The mode's ``aipq`` processes, timed; their rows read back from the files they wrote."""
    names = [source.name.replace(":", "-") for source in sources]
    folder.mkdir(parents=True)
    started = time.perf_counter()
    if mode == PROCESS_MODES[0]:
        for source, name in zip(sources, names):
            _aipq(aipq_command, context.home, context.settings,
                  [_argument(source), "--output", str(folder / f"{name}.parquet")])
    else:
        _aipq(aipq_command, context.home, context.settings,
              [*(_argument(s) for s in sources), "--output-dir", str(folder)])
    seconds = time.perf_counter() - started
    spark = context.spark
    rows = {name: canonical_rows(spark.read.parquet(str(folder / f"{name}.parquet")).collect()) for name in names}
    return ModeRun(seconds, None, None, rows)


def _argument(source: SqlSource) -> str:
    """``tpch:N`` for the source ``tpch:qN``, as ``aipq run`` takes it."""
    return source.name.replace(":q", ":")


def _one_mode(context: RunContext, mode: str, sources: list[SqlSource], folder: Path,
              aipq_command: Sequence[str]) -> ModeRun:
    if mode in PROCESS_MODES:
        return _processes(context, mode, sources, folder, aipq_command)
    started = time.perf_counter()
    if mode in (ONE_BY_ONE, ONE_BY_ONE_AGAIN):
        runs = [_run(context, [source], folder, "off") for source in sources]
        result = ModeRun(0.0, sum(r.input_bytes for r in runs), sum(r.shuffle_write_bytes for r in runs),
                         {name: rows for r in runs for name, rows in r.rows.items()})
    else:
        result = _run(context, sources, folder, "on" if mode == SHARED_SCANS else "off")
    result.seconds = time.perf_counter() - started
    return result


def measure_batches(context: RunContext, numbers: list[int], repeat: int, aipq_command: Sequence[str],
                    progress=None) -> list[ModeResult]:
    """One warm-up round, then ``repeat`` timed ones, modes interleaved; ``aipq_command`` starts an ``aipq``
    process (the command line gives its own: this layer does not name it)."""
    sources = [SqlSource(query_text(n), f"tpch:q{n}") for n in numbers]
    results = [ModeResult(mode) for mode in MODES]
    expected: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="aipq-bench-batch-") as scratch:
        for round_number in range(repeat + 1):
            order = results if round_number % 2 == 0 else results[::-1]
            for result in order:
                folder = Path(scratch) / f"r{round_number}-{MODES.index(result.mode)}"
                run = _one_mode(context, result.mode, sources, folder, aipq_command)
                for name, rows in run.rows.items():
                    if expected.setdefault(name, rows) != rows:
                        raise ExecutionError(f"{name}: {result.mode} gave other rows than {ONE_BY_ONE}",
                                             hint="this is a bug; please report it")
                run.rows = {}
                if round_number > 0:
                    result.runs.append(run)
                if progress:
                    progress()
    return results


def speedup_over_baseline(results, result) -> float:
    """How much faster ``result``'s mode ran than one by one run the same way (in the session, or as processes)."""
    base = next(r for r in results if r.mode == baseline(result.mode))
    return base.median_seconds / result.median_seconds


def measured_size(size: int | None) -> str:
    """A byte count, or a dash where the mode's processes did not report it."""
    return "—" if size is None else format_size(size)


def batch_report(results, context) -> str:
    """``aipq bench batch``'s report.md: the command, the machine and the table as markdown."""
    lines = [f"### {context.title}", "", f"`{context.command}` · {context.machine} · {context.date}", "",
             "| mode | seconds (median) | vs one by one | read | shuffle write | rounds |", "|---|--:|--:|--:|--:|---|"]
    for result in results:
        run = result.runs[0]
        rounds = ", ".join(f"{s:.2f}" for s in (r.seconds for r in result.runs))
        lines.append(f"| {result.mode} | {result.median_seconds:.2f} | {speedup_over_baseline(results, result):.2f}× | "
                     f"{measured_size(run.input_bytes)} | {measured_size(run.shuffle_write_bytes)} | {rounds} |")
    return "\n".join(lines) + "\n"
