"""aipq on a real Spark standalone cluster: a master and two one-core workers started from PySpark's own
distribution on the loopback, with every table, the warehouse and the work directory on a Hadoop scheme that is
not ``file:`` (``viewfs://``, mounted onto local folders), so that any Python-side file operation on a data path
fails, and executors see no driver-local path. Answers are checked against DuckDB on the same files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from conftest import assert_same_rows, free_port, oracle_connection, oracle_rows

from aipq.tpch import generate as tpch_generate
from aipq.tpch.queries import query_text

pytestmark = pytest.mark.slow

AIPQ = [sys.executable, "-m", "aipq.cli.main"]
QUERIES = (3, 5, 9, 18)
MOUNT = "viewfs://aipq"


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class StandaloneCluster:
    """A master and ``workers`` workers of one core and 1 GB each, on 127.0.0.1 only."""

    def __init__(self, folder: Path, workers: int = 2):
        self.folder = folder
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        # every process of the test, the aipq drivers too, listens and connects on the loopback only
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m",
                    "SPARK_LOG_DIR": str(folder / "logs"), "SPARK_WORKER_DIR": str(folder / "work")}
        self.processes: list[subprocess.Popen] = []
        self.workers = workers

    def _start(self, *arguments: str, log: str) -> None:
        out = open(self.folder / log, "w")  # noqa: SIM115 — kept open for the process's life
        self.processes.append(subprocess.Popen([_spark_class(), *arguments], env=self.env, stdout=out,
                                               stderr=subprocess.STDOUT))

    def start(self) -> StandaloneCluster:
        self._start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui_port), log="master.log")
        self._wait_for(lambda state: True, "the master")
        for n in range(self.workers):
            self._start("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "1",
                        "--memory", "1g", "--webui-port", str(free_port()), "--work-dir",
                        str(self.folder / f"worker-{n}"), log=f"worker-{n}.log")
        self._wait_for(lambda state: len([w for w in state.get("workers", []) if w.get("state") == "ALIVE"])
                       >= self.workers, f"{self.workers} workers")
        return self

    def _wait_for(self, ready, what: str, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json", timeout=2) as answer:
                    if ready(json.load(answer)):
                        return
            except OSError:
                pass
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(1)
        logs = "\n".join((self.folder / f).read_text()[-2000:] for f in os.listdir(self.folder) if f.endswith(".log"))
        raise RuntimeError(f"the standalone cluster did not start {what}:\n{logs}")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("standalone")
    running = StandaloneCluster(folder).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def cluster_home(tmp_path_factory, cluster):
    """A home whose TPC-H tables are registered under viewfs:// (the data files are generated locally, then the
    mount table points viewfs://aipq/tpch at them), with the warehouse and work directory there too."""
    home = tmp_path_factory.mktemp("cluster-home")
    folder = tpch_generate.generate(home, 0.01, 1)
    store = tmp_path_factory.mktemp("cluster-store")
    confs = [f"spark.hadoop.fs.viewfs.mounttable.aipq.link./tpch=file://{folder}",
             f"spark.hadoop.fs.viewfs.mounttable.aipq.link./store=file://{store}",
             "spark.executor.memory=768m", "spark.cores.max=2"]
    options = ["--master", cluster.url, "--warehouse", f"{MOUNT}/store/warehouse", "--work-dir",
               f"{MOUNT}/store/runs", *(x for conf in confs for x in ("--conf", conf))]
    for table in tpch_generate.TABLES:
        uri = f"{MOUNT}/tpch/{tpch_generate.table_path(folder, table).relative_to(folder)}"
        added = subprocess.run([*AIPQ, "--home", str(home), "table", "add", table, uri, *options],
                               capture_output=True, text=True, timeout=300, env=cluster.env)
        assert added.returncode == 0, added.stderr
    return home, options, folder, store, cluster.env


def _workflow(strategy: str) -> str:
    creates = "\n".join(f"CREATE TABLE q{n}_{strategy} AS\n{query_text(n).rstrip().rstrip(';')};" for n in QUERIES)
    return (f"{creates}\nINSERT OVERWRITE TABLE q3_{strategy} SELECT * FROM q3_{strategy} WHERE revenue > 0;\n"
            f"SELECT count(*) AS n FROM q3_{strategy};\n")


@pytest.mark.parametrize("strategy", ["off", "adaptive", "always"])
def test_tpch_queries_and_a_workflow_on_a_standalone_cluster_give_duckdbs_rows(cluster_home, tmp_path, strategy):
    home, options, folder, store, env = cluster_home
    script = tmp_path / f"cluster-{strategy}.sql"
    script.write_text(_workflow(strategy))
    out = tmp_path / "count.parquet"
    ran = subprocess.run([*AIPQ, "--home", str(home), "run", str(script), "--ip", strategy, "--broadcast-threshold",
                          "0", "--output", str(out), *options], capture_output=True, text=True, timeout=900,
                         env=env)
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    duck = oracle_connection()
    for table in tpch_generate.TABLES:
        duck.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{tpch_generate.table_path(folder, table)}"
                     f"{'/*.parquet' if tpch_generate.table_path(folder, table).is_dir() else ''}')")
    listed = json.loads(subprocess.run([*AIPQ, "--home", str(home), "table", "list", "--json"], capture_output=True,
                                       text=True, check=True, env=env).stdout)
    paths = {entry["name"]: entry["path"] for entry in listed}
    for number in QUERIES:
        path = paths[f"q{number}_{strategy}"]
        assert path.startswith(f"{MOUNT}/store/warehouse/"), path  # written through Hadoop, not a local path
        local = store / path.removeprefix(f"{MOUNT}/store/")
        actual = duck.execute(f"SELECT * FROM read_parquet('{local}/**/*.parquet')").fetchall()
        expected = oracle_rows(duck, query_text(number))
        if number == 3:
            expected = [row for row in expected if row[1] > 0]
        assert_same_rows(actual, expected, ordered=False)
    assert duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall() == \
        [(len(oracle_rows(duck, query_text(3))),)]
    runs = store / "runs"
    assert not runs.exists() or not any(p.is_dir() for p in runs.iterdir())  # every run's work removed


def test_statistics_and_information_passing_work_on_a_non_file_scheme(cluster_home, tmp_path):
    home, options, _, _, env = cluster_home
    explained = subprocess.run([*AIPQ, "--home", str(home), "explain", "tpch:9", "--ip", "adaptive",
                                "--broadcast-threshold", "0", "--format", "json", *options],
                               capture_output=True, text=True, timeout=300, env=env)
    assert explained.returncode == 0, explained.stderr
    info = json.loads(explained.stdout)
    # the runs above collected the tables' statistics on viewfs:// as they would on a local path
    assert info["statistics"] and all(t["path"].startswith(MOUNT) for t in info["statistics"])
    assert all(t["table_statistics"] == "known" and not t["collect"] for t in info["statistics"])
    # table sizes came through Hadoop: the filtered part table got its summary pre-pass (a SCAN stage), and the
    # estimator priced every edge (at SF 0.01 none pays, as on a local path)
    assert any(stage["operator"] == "SCAN" for stage in info["stages"])
    edges = [edge for stage in info["stages"] for kind in ("uses", "rejected")
             for edge in stage["information_passing"][kind]]
    assert edges and all(edge["estimate"] is not None for edge in edges)
