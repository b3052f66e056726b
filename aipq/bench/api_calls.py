"""``aipq bench api``: ``aipq.sql`` against ``spark.sql(q).collect()`` on one user SparkSession, each call timed
until its rows are read (planning, the run and handing the rows back: what a user waits for).

The session is a Python program's own (``bench/user_session.py``, started here as a child process), begun as the
README tells a PySpark user to (``SparkSession.builder.config(map=aipq.spark_conf())``) with Spark's defaults
otherwise (200 shuffle partitions, AQE on), the driver's memory that of aipq's own sessions unless ``--conf``
says. Series: ``aipq`` and ``spark`` with their A/A controls ``aipq-again`` and ``spark-again``. Workloads:
``trivial`` (a call's fixed cost: ``SELECT 1`` and counts of small tables) and ``tpch`` (TPC-H's queries at the
scale factor). The tables are the registered TPC-H files: aipq finds them in its catalog (``--tables
catalog``) or, as a user with no catalog would have them, only as the session's temporary views (``--tables
views``); ``spark.sql`` reads the same files through the views."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from aipq.bench.runner import Measurement, StrategyResult
from aipq.bench.staging import spark_sql_text
from aipq.config import MB, Settings
from aipq.engine.class_archive import driver_memory
from aipq.errors import BadInputError, ExecutionError
from aipq.tpch.generate import TABLES
from aipq.tpch.queries import query_text

API_SERIES = ("aipq", "spark", "aipq-again", "spark-again")
WORKLOADS = ("trivial", "tpch")
# A call's fixed cost: nothing to plan, prune or shuffle beyond a count
TRIVIAL = (("select 1", "SELECT 1 AS one"), ("count nation", "SELECT count(*) AS n FROM nation"),
           ("count supplier", "SELECT count(*) AS n FROM supplier"),
           ("nation of region 1", "SELECT n_name FROM nation WHERE n_regionkey = 1"))
# Spark's default broadcast threshold on the user's session: the series ran with broadcast joins allowed
SPARK_DEFAULT_BROADCAST = 10 * MB


def api_workload(workloads: list[str], queries: list[int]) -> list[dict]:
    """Each query's label and its text for ``aipq.sql`` (Hive's dialect) and ``spark.sql`` (Spark's)."""
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown or not workloads:
        raise BadInputError(f"--workloads: unknown workload {(unknown or [''])[0]!r}",
                            hint=f"choose from {', '.join(WORKLOADS)}")
    found = []
    if "trivial" in workloads:
        found += [{"label": label, "aipq_sql": text, "spark_sql": text} for label, text in TRIVIAL]
    if "tpch" in workloads:
        found += [{"label": f"Q{n}", "aipq_sql": query_text(n), "spark_sql": spark_sql_text(query_text(n), "hive")}
                  for n in queries]
    return found


def user_spec(settings: Settings, given: dict, workload: list[dict], views: dict[str, str], home: Path,
              repeat: int, warmup: int, results: Path) -> dict:
    """What the user's program runs: its session's settings, the tables' views, the queries and series."""
    conf = {"spark.driver.memory": driver_memory(), **settings.spark_conf}
    return {"master": settings.master, "conf": conf, "views": views, "home": str(home), "options": given,
            "queries": workload, "series": list(API_SERIES), "repeat": repeat, "warmup": warmup,
            "results": str(results)}


def run_user_program(spec: dict, step, log: Path) -> dict:
    """The user's program as a child process, its progress lines advancing ``step``; its results."""
    with tempfile.TemporaryDirectory(prefix="aipq-bench-api-") as folder:
        path = Path(folder) / "spec.json"
        path.write_text(json.dumps(spec))
        with log.open("w") as err:
            child = subprocess.Popen([sys.executable, "-m", "aipq.bench.user_session", str(path)],
                                     stdout=subprocess.PIPE, stderr=err, text=True, env=os.environ.copy())
            assert child.stdout is not None
            for _ in child.stdout:
                step()
            code = child.wait()
        if code != 0:
            lines = [line for line in log.read_text().splitlines() if line.strip()]
            raise ExecutionError(f"the user session's program failed (exit {code}): "
                                 f"{lines[-1] if lines else 'no message'}", hint=f"its log: {log}")
        return json.loads(Path(spec["results"]).read_text())


def api_results(found: dict) -> list[StrategyResult]:
    """The child's runs as the series benchmarks' results (their reports and plots apply as they are); an aipq
    run's record is its detail, and the seconds of the call outside its run are its planning seconds."""
    results = []
    for query in found["queries"]:
        for series, runs in query["runs"].items():
            measured = []
            for run in runs:
                record = run["run"] or None
                outside = run["seconds"] - record["seconds"] if record else 0.0
                measured.append(Measurement(run["seconds"], 0, 0, planning_seconds=outside, detail=record,
                                            steal_seconds=run["steal_seconds"]))
            stages = len(measured[0].detail["stages"]) if measured and measured[0].detail else 1
            results.append(StrategyResult(query["label"], series, SPARK_DEFAULT_BROADCAST, stages, runs=measured))
    return results


def tpch_views(catalog, database: str = "default") -> dict[str, str]:
    """The TPC-H tables' files by view name, from the catalog's entries."""
    views = {}
    for name in TABLES:
        entry = catalog.lookup(f"{database}.{name}")
        if entry is None:
            raise BadInputError(f"no TPC-H table {name} is registered", hint="aipq tpch gen --sf SF")
        views[name] = entry.path
    return views


def machine_line(session: dict) -> str:
    """The report's machine line, the Spark side from the user's session."""
    from aipq.bench.report import describe_host

    return (f"{describe_host()}, Spark {session['spark_version']} ({session['master']}, "
            f"{session['shuffle_partitions']} shuffle partitions, AQE {session['adaptive']}, driver memory "
            f"{session['driver_memory']}), Java {session['java_version']}")


def fixed_cost_lines(results: list[StrategyResult]) -> list[str]:
    """What one call costs beyond ``spark.sql``'s: on the trivial queries, aipq's median seconds less spark's;
    on every query, the median seconds of aipq's call outside its run (planning, handing the rows back)."""
    by = {(r.query, r.strategy): r for r in results}
    trivial = [label for label, _ in TRIVIAL if (label, "aipq") in by and (label, "spark") in by]
    lines = []
    if trivial:
        extra = ", ".join(f"{label} {1000 * (by[(label, 'aipq')].median_seconds - spark):+.0f} ms "
                          f"({1000 * spark:.0f} ms spark.sql)"
                          for label in trivial for spark in [by[(label, "spark")].median_seconds])
        lines.append(f"A call's fixed cost, aipq.sql's median less spark.sql's: {extra}")
    outside = [(r.query, statistics.median(m.planning_seconds for m in r.runs)) for r in results
               if r.strategy == "aipq" and r.runs]
    if outside:
        lines.append("aipq.sql's seconds outside its run (planning, the result handed back), median per query: "
                     + ", ".join(f"{query} {1000 * seconds:.0f} ms" for query, seconds in outside))
    return lines
