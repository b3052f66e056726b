"""A real Hive metastore service as the catalog of record: the service started from PySpark's own jars (Derby
in a temporary folder), tables registered and read back by plain PySpark sessions in processes of their own (as a
team's other jobs would), and aipq run as its CLI in processes of its own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import assert_same_rows, free_port, oracle_connection, oracle_rows

from aipq.tpch.generate import TABLES as TPCH_TABLES
from aipq.tpch.queries import query_text

pytestmark = pytest.mark.slow

AIPQ = [sys.executable, "-m", "aipq.cli.main"]
START_SECONDS = 120


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _start_metastore(folder: Path, port: int) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    command = [f"{_spark_home()}/bin/spark-class", "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port),
               "--hiveconf", "hive.async.log.enabled=false",
               "--hiveconf", f"javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={folder}/db;create=true",
               "--hiveconf", "datanucleus.schema.autoCreateAll=true",
               "--hiveconf", "hive.metastore.schema.verification=false",
               "--hiveconf", f"hive.metastore.warehouse.dir={folder}/warehouse"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": _spark_home()}
    service = subprocess.Popen(command, cwd=folder, env=env, stdout=(folder / "log").open("w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if service.poll() is not None:
            raise RuntimeError(f"the metastore exited: {(folder / 'log').read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), 1):
                return service
        except OSError:
            time.sleep(0.5)
    _stop(service)
    raise RuntimeError("the metastore did not listen in time")


def _stop(service: subprocess.Popen) -> None:
    if service.poll() is None:
        os.killpg(service.pid, signal.SIGTERM)
        try:
            service.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(service.pid, signal.SIGKILL)
            service.wait()


class Metastore:
    def __init__(self, folder: Path, port: int):
        self.folder = folder
        self.port = port
        self.uri = f"thrift://127.0.0.1:{port}"
        self.service = _start_metastore(folder, port)

    @property
    def confs(self) -> list[str]:
        return ["--conf", f"spark.hadoop.hive.metastore.uris={self.uri}"]

    def pyspark(self, body: str, jars: str = "") -> object:
        """Run ``body`` in a plain PySpark session on this metastore (with ``jars`` on its classpath), in a process
        of its own; what it assigns to ``result`` comes back (as JSON)."""
        script = textwrap.dedent(f"""
            import json
            from pyspark.sql import SparkSession
            spark = (SparkSession.builder.master("local[1]")
                     .config("spark.hadoop.hive.metastore.uris", {self.uri!r}).config("spark.jars", {jars!r})
                     .config("spark.sql.warehouse.dir", {str(self.folder / "warehouse")!r})
                     .config("spark.ui.enabled", "false").enableHiveSupport().getOrCreate())
            spark.sparkContext.setLogLevel("FATAL")
            result = None
        """) + textwrap.dedent(body) + "\nprint('RESULT ' + json.dumps(result, default=str))\n"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              cwd=self.folder)
        assert done.returncode == 0, done.stderr[-3000:]
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
        return json.loads(line.removeprefix("RESULT "))


@pytest.fixture(scope="module")
def metastore(tmp_path_factory):
    store = Metastore(tmp_path_factory.mktemp("metastore"), free_port())
    yield store
    _stop(store.service)


@pytest.fixture(scope="module")
def user_tables(metastore, tpch, home):
    """TPC-H registered in database ``sales`` as external parquet tables, by a plain PySpark session."""
    folder = Path(tpch.lookup("lineitem").path).parent
    statements = [f"spark.sql(\"CREATE TABLE sales.{t} USING parquet LOCATION '{folder / f'{t}.parquet'}'\")"
                  for t in TPCH_TABLES]
    metastore.pyspark("spark.sql('CREATE DATABASE sales')\n" + "\n".join(statements)
                      + "\nresult = [r.tableName for r in spark.sql('SHOW TABLES IN sales').collect()]")
    return folder


def _aipq(home: Path, *args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*AIPQ, "--home", str(home), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_tpch_queries_on_metastore_tables_give_duckdb_rows(metastore, user_tables, duck, tmp_path):
    queries = tmp_path / "queries"
    queries.mkdir()
    for number in range(1, 23):
        (queries / f"q{number:02d}.sql").write_text(f"USE sales;\n{query_text(number)}")
    out = tmp_path / "out"
    home = tmp_path / "home"
    done = _aipq(home, "run", str(queries), "--output-dir", str(out), "--format", "parquet", "--quiet",
                 *metastore.confs, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    con = oracle_connection()
    for number in range(1, 23):
        actual = con.execute(f"SELECT * FROM read_parquet('{out / f'q{number:02d}.parquet'}')").fetchall()
        sql = query_text(number)
        assert_same_rows(actual, oracle_rows(duck, sql), ordered="order by" in sql.lower())
    # statistics were collected on the metastore's tables, keyed by their files
    listed = _aipq(home, "stats", "show", "sales.lineitem", "--json",
                   *metastore.confs)
    assert listed.returncode == 0, listed.stderr
    assert [t["rows"] for t in json.loads(listed.stdout)["tables"]] == [duck.execute(
        "SELECT count(*) FROM lineitem").fetchone()[0]]


WORKFLOW = """
USE sales;
CREATE TABLE nation_names AS SELECT n_nationkey, n_name FROM nation;
CREATE TABLE by_region (n_name STRING, n_nationkey BIGINT) PARTITIONED BY (region BIGINT);
INSERT OVERWRITE TABLE by_region PARTITION (region = 1) SELECT n_name, n_nationkey FROM nation WHERE n_regionkey = 1;
INSERT OVERWRITE TABLE by_region PARTITION (region) SELECT n_name, n_nationkey, n_regionkey FROM nation
WHERE n_regionkey >= 3;
CREATE DATABASE IF NOT EXISTS nightly;
CREATE TABLE nightly.regions AS SELECT r_regionkey, r_name FROM region;
"""


def test_a_workflows_tables_are_read_by_a_plain_pyspark_session(metastore, user_tables, tmp_path):
    script = tmp_path / "nightly.sql"
    script.write_text(WORKFLOW)
    done = _aipq(tmp_path / "home", "run", str(script), "--quiet", *metastore.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = metastore.pyspark("""
        result = {
            "names": spark.sql("SELECT count(*) FROM sales.nation_names").collect()[0][0],
            "partitions": [r[0] for r in spark.sql("SHOW PARTITIONS sales.by_region").collect()],
            "rows": [list(r) for r in spark.sql(
                "SELECT region, count(*) FROM sales.by_region GROUP BY region ORDER BY region").collect()],
            "type": spark.sql("DESCRIBE TABLE EXTENDED sales.nation_names").where("col_name = 'Type'")
                         .collect()[0][1],
            "regions": spark.sql("SELECT count(*) FROM nightly.regions").collect()[0][0],
            "location": spark.sql("DESCRIBE DATABASE nightly").where("info_name = 'Location'").collect()[0][1],
        }
    """)
    assert seen["location"].endswith(f"{metastore.folder}/warehouse/nightly.db")  # the metastore's, not aipq's
    del seen["location"]
    assert seen == {"names": 25, "partitions": ["region=1", "region=3", "region=4"],
                    "rows": [[1, 5], [3, 5], [4, 5]], "type": "EXTERNAL", "regions": 5}
    listed = _aipq(tmp_path / "home", "table", "list", "--json", *metastore.confs)
    assert listed.returncode == 0, listed.stderr
    tables = {(t["database"], t["name"]) for t in json.loads(listed.stdout)}
    assert {("sales", "nation_names"), ("sales", "by_region"), ("sales", "lineitem")} <= tables

    # a second run overwrites a partition; other partitions and their data stay
    script.write_text("INSERT OVERWRITE TABLE sales.by_region PARTITION (region = 3) "
                      "SELECT n_name, n_nationkey FROM sales.nation WHERE n_nationkey < 3;\n"
                      "ALTER TABLE sales.by_region DROP PARTITION (region = 4);\n"
                      "ALTER TABLE sales.by_region ADD PARTITION (region = 7);\n"
                      "DROP TABLE sales.nation_names;")
    done = _aipq(tmp_path / "home", "run", str(script), "--quiet", "--allow-overwrite", *metastore.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = metastore.pyspark("""
        result = {"rows": [list(r) for r in spark.sql(
                      "SELECT region, count(*) FROM sales.by_region GROUP BY region ORDER BY region").collect()],
                  "partitions": [r[0] for r in spark.sql("SHOW PARTITIONS sales.by_region").collect()],
                  "tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN sales").collect())}
    """)
    assert seen["rows"] == [[1, 5], [3, 3]]
    assert seen["partitions"] == ["region=1", "region=3", "region=7"]
    assert "nation_names" not in seen["tables"]


@pytest.mark.parametrize("point", ["stage-written", "table-commit"])
def test_a_killed_workflow_leaves_the_metastores_tables_as_they_were(metastore, user_tables, tmp_path, point):
    table = f"kept_{point.replace('-', '_')}"
    setup = tmp_path / "setup.sql"
    setup.write_text(f"CREATE TABLE sales.{table} AS SELECT r_regionkey, r_name FROM sales.region;")
    assert _aipq(tmp_path / "home", "run", str(setup), "--quiet", *metastore.confs).returncode == 0
    script = tmp_path / "nightly.sql"
    script.write_text(f"INSERT OVERWRITE TABLE sales.{table} SELECT r_regionkey, r_name FROM sales.region "
                      "WHERE r_regionkey = 0;\n"
                      f"CREATE TABLE sales.{table}_new AS SELECT * FROM sales.nation;")
    killed = _aipq(tmp_path / "home", "run", str(script), "--quiet", "--commit", "versioned", "--allow-overwrite",
                   *metastore.confs,
                   env={"AIPQ_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL
    seen = metastore.pyspark(f"""
        result = {{"rows": spark.sql("SELECT count(*) FROM sales.{table}").collect()[0][0],
                   "new": spark.catalog.tableExists("sales.{table}_new")}}
    """)
    assert seen == {"rows": 5, "new": False}


def test_a_metastore_that_does_not_answer_is_named_with_exit_1(tmp_path):
    port = free_port()
    done = _aipq(tmp_path / "home", "run", "--sql", "SELECT * FROM sales.nation", "--conf",
                 f"spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:{port}", timeout=120)
    assert done.returncode == 1
    assert f"thrift://127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_metastore_stopped_mid_workflow_gives_exit_1_naming_it(tmp_path, user_tables):
    store = Metastore(tmp_path / "second", free_port())
    try:
        folder = user_tables
        store.pyspark(f"spark.sql(\"CREATE TABLE nation USING parquet LOCATION '{folder / 'nation.parquet'}'\")")
        script = tmp_path / "nightly.sql"
        script.write_text("CREATE TABLE copy1 AS SELECT * FROM nation;\n"
                          "CREATE TABLE copy2 AS SELECT * FROM nation;")
        # the first statement's commit reached: the service is stopped before the metastore is told
        env = {"AIPQ_PAUSE_AT": "table-commit", "AIPQ_PAUSE_FILE": str(tmp_path / "paused")}
        running = subprocess.Popen([*AIPQ, "--home", str(tmp_path / "home"), "run", str(script), "--quiet",
                                    *store.confs], stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, **env})
        deadline = time.monotonic() + 300
        while not (tmp_path / "paused").exists() and time.monotonic() < deadline and running.poll() is None:
            time.sleep(0.2)
        _stop(store.service)
        (tmp_path / "paused").unlink()
        _, stderr = running.communicate(timeout=300)
        assert running.returncode == 1, stderr[-3000:]
        assert store.uri in stderr
        assert "Traceback" not in stderr
    finally:
        _stop(store.service)


def test_a_teams_text_tables_views_and_partitioned_tables_are_read_from_the_metastore(metastore, user_tables,
                                                                                       duck, tmp_path):
    metastore.pyspark("""
        spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")
        spark.sql("CREATE TABLE sales.nation_text (n_nationkey BIGINT, n_name STRING, n_regionkey BIGINT) "
                  "ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' STORED AS TEXTFILE")
        spark.sql("INSERT OVERWRITE TABLE sales.nation_text SELECT n_nationkey, n_name, n_regionkey FROM sales.nation")
        spark.sql("CREATE VIEW sales.asia AS SELECT n_nationkey AS k FROM sales.nation WHERE n_regionkey = 2")
        spark.sql("CREATE TABLE sales.orders_by_status (o_orderkey BIGINT, o_totalprice DECIMAL(15,2)) "
                  "PARTITIONED BY (o_orderstatus STRING) STORED AS PARQUET")
        spark.sql("INSERT OVERWRITE TABLE sales.orders_by_status PARTITION (o_orderstatus) "
                  "SELECT o_orderkey, o_totalprice, o_orderstatus FROM sales.orders")
    """)
    query = ("SELECT t.n_name, count(*) AS n, sum(o.o_totalprice) AS total FROM sales.orders_by_status o "
             "JOIN sales.customer c ON o.o_orderkey % 1000 = c.c_custkey "
             "JOIN sales.nation_text t ON c.c_nationkey = t.n_nationkey "
             "JOIN sales.asia a ON a.k = t.n_nationkey WHERE o.o_orderstatus = 'F' GROUP BY t.n_name")
    out = tmp_path / "out.parquet"
    home = tmp_path / "home"
    done = _aipq(home, "run", "--sql", query, "--output", str(out), "--quiet", *metastore.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    actual = duckdb_rows(out)
    expected = oracle_rows(duck, query.replace("sales.orders_by_status", "orders").replace("sales.customer", "customer")
                           .replace("sales.nation_text", "nation").replace(
                               "sales.asia", "(SELECT n_nationkey AS k FROM nation WHERE n_regionkey = 2)"))
    assert actual and len(actual) == len(expected)
    assert_same_rows(actual, expected, ordered=False)
    explained = _aipq(home, "explain", "--sql", query, *metastore.confs)
    assert explained.returncode == 0, explained.stderr[-3000:]
    assert "partitions 1 of 3" in explained.stdout


def duckdb_rows(path: Path) -> list[tuple]:
    return oracle_connection().execute(f"SELECT * FROM read_parquet('{path}')").fetchall()


def test_generated_and_added_tables_are_registered_in_the_metastore(metastore, user_tables, tmp_path):
    home = tmp_path / "home"
    generated = _aipq(home, "tpch", "gen", "--sf", "0.01", "--database", "generated", *metastore.confs)
    assert generated.returncode == 0, generated.stderr[-3000:]
    added = _aipq(home, "table", "add", "generated.extra", str(user_tables / "region.parquet"), *metastore.confs)
    assert added.returncode == 0, added.stderr[-3000:]
    seen = metastore.pyspark("""
        result = {"tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN generated").collect()),
                  "regions": spark.sql("SELECT count(*) FROM generated.extra").collect()[0][0]}
    """)
    assert seen == {"tables": sorted([*TPCH_TABLES, "extra"]), "regions": 5}
    dropped = _aipq(home, "table", "drop", "generated.extra", *metastore.confs)
    assert dropped.returncode == 0, dropped.stderr[-3000:]
    assert (user_tables / "region.parquet").exists()  # an external table's data stays
