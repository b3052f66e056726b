"""CPU time the hypervisor took from this machine during a timed run (Linux's "steal" time), so that a benchmark
can tell a run the machine did not fully give it from one it did, and run that round again.

On the 2-core virtual machines these benchmarks run on, steal comes in spells: none for minutes, then for minutes
a large share of the CPU time (265 s of it in one hour on 2026-11-27, most of it while one query of
``aipq bench stats`` ran 7–15 s instead of 5 s). A run in such a spell measures the neighbours, not aipq.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

PROC_STAT = Path("/proc/stat")
STOLEN = 0.05  # a run that lost more than 5% of the machine's CPU time to the hypervisor is disturbed
MAX_ATTEMPTS = 3  # a round is run at most this many times; the last attempt counts, disturbed or not


class Timed(Protocol):
    seconds: float
    steal_seconds: float


T = TypeVar("T")


def steal_seconds(stat: Path = PROC_STAT) -> float:
    """Steal time of all CPUs since boot, in seconds (0 where the kernel does not report it)."""
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    if len(fields) < 9 or fields[0] != "cpu":
        return 0.0
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def disturbed(run: Timed, cpus: int | None = None) -> bool:
    """Whether the hypervisor took more than ``STOLEN`` of the machine's CPU time while ``run`` ran."""
    capacity = run.seconds * (cpus or os.cpu_count() or 1)
    return capacity > 0 and run.steal_seconds > STOLEN * capacity


def undisturbed_round(run_round: Callable[[int], Sequence[tuple[T, Timed]]],
                      is_disturbed: Callable[[Timed], bool] = disturbed) -> tuple[Sequence[tuple[T, Timed]], int]:
    """``run_round(attempt)`` (its runs, each with what it belongs to), run again while the hypervisor took more than
    ``STOLEN`` of the CPU time during any of its runs, up to ``MAX_ATTEMPTS`` in all. The whole round runs again,
    not the one run, so that the round's runs still share the machine's state and can be paired. Returns the
    attempt kept and how many were discarded."""
    for attempt in range(MAX_ATTEMPTS):
        runs = run_round(attempt)
        if attempt == MAX_ATTEMPTS - 1 or not any(is_disturbed(run) for _, run in runs):
            return runs, attempt
    raise AssertionError("unreachable")


def undisturbed_run(run: Callable[[], Timed], is_disturbed: Callable[[Timed], bool] = disturbed) -> tuple[Timed, int]:
    """``run()`` again while the hypervisor took more than ``STOLEN`` of the CPU time during it (a round of one run:
    for benchmarks whose rounds are too long to repeat whole). Returns the run kept and how many were discarded."""
    runs, discarded = undisturbed_round(lambda attempt: [(None, run())], is_disturbed)
    return runs[0][1], discarded


@dataclass
class StealTally:
    """What the hypervisor took over a benchmark: runs (or rounds) run again, and the runs kept with their steal."""

    rerun: int = 0
    runs: int = 0
    stolen_seconds: float = 0.0

    def add(self, kept: Timed, discarded: int) -> None:
        self.rerun += discarded
        self.runs += 1
        self.stolen_seconds += kept.steal_seconds


def steal_line(rerun: int, stolen_seconds: float, runs: int, unit: str = "rounds") -> str:
    """A report's statement of what the hypervisor took: rounds (or single runs, ``unit="runs"``) run again, and CPU
    time stolen from the runs kept."""
    during = "one of their runs" if unit == "rounds" else "them"
    return (f"{unit} run again because the hypervisor took more than {STOLEN:.0%} of the machine's CPU time "
            f"during {during} (steal): {rerun}; CPU time stolen during the {runs} runs kept: "
            f"{stolen_seconds:.1f} s")
