"""The user's side of ``aipq bench api``, run as a Python program of its own (``python -m
aipq.bench.user_session SPEC``): one SparkSession started as a PySpark user starts it
(``SparkSession.builder.config(map=aipq.spark_conf())``, Spark's defaults otherwise), then each query timed through
``aipq.sql(q, spark=spark)`` and ``spark.sql(q).collect()`` on that session, each call until its rows are read.

Only the public API is used (``import aipq``), as a user's program would. The series run interleaved round by
round, the order rotated each round and reversed every other one; per query, warm-up rounds first. Every run's
rows are compared with the first series'. SPEC is a JSON file (``bench/api_calls.py`` writes it); the results go
to the file it names (rewritten after each query), one line per finished run to stdout (the progress bar),
Spark's log to stderr."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import aipq
from aipq.bench.runner import canonical_rows
from aipq.bench.steal import steal_seconds
from aipq.engine.jvm import java_version

AIPQ_SERIES = ("aipq", "aipq-again")


def start_session(spec: dict):
    """The user's session: aipq's settings merged with the benchmark's ``conf``, nothing else set."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("aipq bench api (user session)")
    if spec.get("master"):
        builder = builder.master(spec["master"])
    return builder.config(map={**aipq.spark_conf(), **spec["conf"]}).getOrCreate()


def call_aipq(spark, text: str, options: dict, home: str) -> tuple[float, list, dict]:
    """``aipq.sql`` until its rows are read: the seconds a user waits, the rows and the run record."""
    started = time.perf_counter()
    result = aipq.sql(text, spark=spark, home=home, **options)
    rows = [tuple(row) for row in result.rows]
    seconds = time.perf_counter() - started
    return seconds, rows, result.run


def call_spark(spark, text: str) -> tuple[float, list, dict]:
    started = time.perf_counter()
    rows = [tuple(row) for row in spark.sql(text).collect()]
    return time.perf_counter() - started, rows, {}


def round_order(series: list[str], round_number: int) -> list[str]:
    """Round ``round_number``'s order: rotated by one place a round, every other round reversed."""
    start = round_number % len(series)
    order = series[start:] + series[:start]
    return order if round_number % 2 == 0 else order[::-1]


def run_query(spark, spec: dict, query: dict) -> dict[str, list[dict]]:
    """One query's warm-up and timed rounds; per series its timed runs (seconds, rows, run record)."""
    runs: dict[str, list[dict]] = {name: [] for name in spec["series"]}
    expected: list = []
    rounds = spec["warmup"] + spec["repeat"]
    for number in range(rounds):
        for name in round_order(spec["series"], number):
            stolen = steal_seconds()
            if name in AIPQ_SERIES:
                seconds, rows, run = call_aipq(spark, query["aipq_sql"], spec["options"], spec["home"])
            else:
                seconds, rows, run = call_spark(spark, query["spark_sql"])
            check_rows(query["label"], name, rows, expected)
            if number >= spec["warmup"]:
                runs[name].append({"seconds": seconds, "rows": len(rows), "run": run,
                                   "steal_seconds": steal_seconds() - stolen})
            print("run", flush=True)
    return runs


def check_rows(label: str, series: str, rows: list, expected: list) -> None:
    canonical = canonical_rows(rows)
    if not expected:
        expected += [series, canonical]
    elif canonical != expected[1]:
        raise SystemExit(f"{label}: {series} returned {len(rows)} row(s) that differ from {expected[0]}'s")


def session_facts(spark) -> dict:
    """What the benchmark's report says of the session: Spark's version and the settings a user leaves as they
    are."""
    conf = spark.conf
    return {"spark_version": spark.version, "java_version": java_version(spark), "master": spark.sparkContext.master,
            "shuffle_partitions": conf.get("spark.sql.shuffle.partitions"),
            "adaptive": conf.get("spark.sql.adaptive.enabled"),
            "driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "1g")}


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    spark = start_session(spec)
    for name, path in spec["views"].items():
        spark.read.parquet(path).createOrReplaceTempView(name)
    results: dict = {"session": session_facts(spark), "queries": []}
    for query in spec["queries"]:
        results["queries"].append({"label": query["label"], "runs": run_query(spark, spec, query)})
        # after each query: a long run stopped early leaves the queries it finished
        Path(spec["results"]).write_text(json.dumps(results, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
