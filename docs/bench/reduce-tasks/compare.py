"""Fixed reduce tasks against Hive's rule, interleaved in one session (docs/benchmarks.md, "Reduce tasks").

`aipq bench` compares strategies under one set of settings; this compares two settings under one strategy:
8 reduce tasks in every stage (`--reducer-bytes 0`) and one per 64 MB read (`--reducer-bytes 64MB`). Per query:
two untimed rounds, then ROUNDS timed rounds, the two settings in alternating order; median per setting. It also
checks that both give the same rows.

    AIPQ_HOME=/tmp/aipqsf1 IP=off python docs/bench/reduce-tasks/compare.py 3 2:10485760 8:10485760 2:0 9:0 5:0
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from aipq.config import MB, Settings
from aipq.bench.staging import bench_session
from aipq.tpch.queries import query_text
from aipq.bench.strategies import QueryRunner

VARIANTS = {"8 per stage": 0, "one per 64 MB": 64 * MB}


def main(rounds: int, specs: list[str]) -> None:
    home = Path(os.environ["AIPQ_HOME"])
    spark, catalog, scratch = bench_session(home, Settings())
    runner = QueryRunner(spark, home, catalog, scratch)
    for spec in specs:
        number, threshold = map(int, spec.split(":"))
        text = query_text(number)
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        tasks, rows = {}, {}
        for round_number in range(rounds + 2):
            names = list(VARIANTS) if round_number % 2 == 0 else list(VARIANTS)[::-1]
            for name in names:
                settings = replace(Settings(), broadcast_threshold=threshold, ip=os.environ.get("IP", "off"),
                                   reducer_bytes=VARIANTS[name])
                measurement, result = runner.aipq(text, settings)
                rows[name] = sorted(map(tuple, result), key=repr)
                tasks[name] = [stage.reduce_tasks for stage in runner.last_record.stages]
                if round_number >= 2:
                    seconds[name].append(measurement.seconds)
        same = "same rows" if len({repr(r) for r in rows.values()}) == 1 else "ROWS DIFFER"
        print(f"Q{number} broadcast {threshold}: " + "  ".join(
            f"{name} {statistics.median(seconds[name]):.3f} s {tasks[name]}" for name in VARIANTS) + f"  {same}",
            flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
