"""A team's Hive metastore as a hostile user meets it (issue 80): tables created by a plain PySpark session with
Hive SerDes and hand-written files are read by aipq with the rows Spark's own ``spark.table`` gives; DROP TABLE
says what happened to the files and does it; a table in a database that does not exist is refused with nothing
created; tables aipq writes carry their row count and size; a metastore that stops answering (SIGSTOP) fails the
command in bounded time, named, and the workflow resumes. One metastore service for the module."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port, oracle_connection
from test_metastore import Metastore, _spark_home, _stop

pytestmark = pytest.mark.slow

AIPQ = [sys.executable, "-m", "aipq.cli.main"]

# hand-written text: '|' fields, '\' escapes, 'NA' for NULL (LazySimpleSerDe's ROW FORMAT DELIMITED … NULL DEFINED
# AS): empty fields, \N (not NULL here), double quotes (no quoting in Hive), an escaped delimiter, short and long
# lines, values that are not numbers
PIPE_LINES = [
    "1|plain|1.5|x", "2||2.5|", "3|NA|NA|NA", "4|\\N|3.5|\"quoted\"", "5|a\\|b|4.5|escaped pipe",
    "6|say \"hi\"|5.5|\"x|y\"", "7|short", "8|extra|6.5|n|more|fields", "x|bad id|notnum|z", "9|tab\tin|7.5|\\\\back",
]
# Hive's defaults (Ctrl-A fields, \N for NULL, no escape character): an empty string, a NULL, a quote, a comma
DEFAULT_LINES = ["1\x01\\N\x011.5", "2\x01\x01\\N", "3\x01a\"b\x012.0", "4\x01x,y\x01", "5\x01\"\x01-0.0"]
# OpenCSVSerde with ';' separators, "'" quotes and '\' escapes: every column a string
CSV_LINES = ["1;'a;b';'it\\'s'", "2;;''", "3;\"dq\";plain", "4;'multi word';\\N"]
# a data source CSV table (USING csv) has no header unless its options say so
PLAIN_CSV_LINES = ["1,first", "2,second"]


def _write_lines(folder: Path, lines: list[str]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.txt").write_text("\n".join(lines) + "\n")
    return str(folder)


def _run(home: Path, *args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*AIPQ, "--home", str(home), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _rows(path: Path) -> list[tuple]:
    return sorted(oracle_connection().execute(f"SELECT * FROM read_parquet('{path}')").fetchall(), key=repr)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    service = Metastore(tmp_path_factory.mktemp("metastore"), free_port())
    yield service
    _stop(service.service)


@pytest.fixture(scope="module")
def other_serde(tmp_path_factory) -> Path:
    """A jar holding a SerDe (a LazySimpleSerDe by another class name) that aipq's sessions do not have."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.skip("needs a JDK's javac and jar")
    folder = tmp_path_factory.mktemp("serde")
    (folder / "aipqtest").mkdir()
    (folder / "aipqtest" / "OtherSerDe.java").write_text(
        "package aipqtest;\npublic class OtherSerDe extends org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe {\n"
        "  public OtherSerDe() throws org.apache.hadoop.hive.serde2.SerDeException { super(); }\n}\n")
    jars = f"{_spark_home()}/jars/*"
    subprocess.run(["javac", "-cp", jars, "-d", str(folder), str(folder / "aipqtest" / "OtherSerDe.java")],
                   check=True, capture_output=True)
    subprocess.run(["jar", "cf", str(folder / "other-serde.jar"), "-C", str(folder), "aipqtest"], check=True,
                   capture_output=True)
    return folder / "other-serde.jar"


def _serde_tables(folder: Path) -> dict[str, list[str]]:
    """name → the statements that make it, over the files written under ``folder``."""
    pipe = _write_lines(folder / "pipe", PIPE_LINES)
    default = _write_lines(folder / "default", DEFAULT_LINES)
    opencsv = _write_lines(folder / "opencsv", CSV_LINES)
    plain = _write_lines(folder / "plain", PLAIN_CSV_LINES)
    values = "(1, NULL, 1.5), (2, '', NULL), (3, 'a\"b', 2.0), (4, 'x,y', 3.0), (5, 'back\\\\slash', 4.0), " \
             "(6, 'tab\\there', 5.0), (7, '\\\\N', 6.0), (8, 'new\\nline', 7.0)"
    columns = "(id INT, s STRING, d DOUBLE)"
    return {
        "text_written": [f"CREATE TABLE serdes.text_written {columns} STORED AS TEXTFILE",
                         f"INSERT INTO serdes.text_written VALUES {values}"],
        "text_delimited": [f"CREATE TABLE serdes.text_delimited {columns} ROW FORMAT DELIMITED FIELDS TERMINATED "
                           "BY ',' ESCAPED BY '\\\\' NULL DEFINED AS 'nil' STORED AS TEXTFILE",
                           f"INSERT INTO serdes.text_delimited VALUES {values}"],
        "text_pipe": ["CREATE EXTERNAL TABLE serdes.text_pipe (id INT, name STRING, score DOUBLE, note STRING) "
                      "ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' ESCAPED BY '\\\\' LINES TERMINATED BY "
                      f"'\\n' NULL DEFINED AS 'NA' STORED AS TEXTFILE LOCATION '{pipe}'"],
        "text_default": [f"CREATE EXTERNAL TABLE serdes.text_default {columns} STORED AS TEXTFILE "
                         f"LOCATION '{default}'"],
        "opencsv": ["CREATE EXTERNAL TABLE serdes.opencsv (id STRING, a STRING, b STRING) ROW FORMAT SERDE "
                    "'org.apache.hadoop.hive.serde2.OpenCSVSerde' WITH SERDEPROPERTIES ('separatorChar' = ';', "
                    "'quoteChar' = \"'\", 'escapeChar' = '\\\\') STORED AS TEXTFILE "
                    f"LOCATION '{opencsv}'"],
        "opencsv_written": ["CREATE TABLE serdes.opencsv_written (id STRING, s STRING) ROW FORMAT SERDE "
                            "'org.apache.hadoop.hive.serde2.OpenCSVSerde' STORED AS TEXTFILE",
                            "INSERT INTO serdes.opencsv_written VALUES ('1', NULL), ('2', ''), ('3', 'q\"q'), "
                            "('4', 'a,b')"],
        "plain_csv": [f"CREATE TABLE serdes.plain_csv (id INT, name STRING) USING csv LOCATION '{plain}'"],
        "avro": [f"CREATE TABLE serdes.avro {columns} STORED AS AVRO", f"INSERT INTO serdes.avro VALUES {values}"],
        "orc": [f"CREATE TABLE serdes.orc {columns} STORED AS ORC", f"INSERT INTO serdes.orc VALUES {values}"],
        "parquet": [f"CREATE TABLE serdes.parquet {columns} STORED AS PARQUET",
                    f"INSERT INTO serdes.parquet VALUES {values}"],
        "text_partitioned": ["CREATE TABLE serdes.text_partitioned (id INT, s STRING) PARTITIONED BY (p STRING) "
                             "STORED AS TEXTFILE",
                             "INSERT INTO serdes.text_partitioned PARTITION (p = 'a') VALUES (1, NULL), (2, '')",
                             "INSERT INTO serdes.text_partitioned PARTITION (p = 'b') VALUES (3, 'q\"q')"],
    }


def test_hive_serde_tables_give_the_rows_spark_gives(store, other_serde, tmp_path):
    tables = _serde_tables(tmp_path / "files")
    statements = ["CREATE DATABASE serdes", *(s for made in tables.values() for s in made)]
    expected = store.pyspark(f"""
        for statement in {json.dumps(statements)}:
            spark.sql(statement)
        result = {{name: [list(r) for r in spark.table("serdes." + name).collect()] for name in {list(tables)!r}}}
    """)
    store.pyspark("""
        spark.sql("CREATE TABLE serdes.other (id INT, s STRING) ROW FORMAT SERDE 'aipqtest.OtherSerDe'")
    """, jars=str(other_serde))
    queries = tmp_path / "queries"
    queries.mkdir()
    for name in tables:
        (queries / f"{name}.sql").write_text(f"SELECT * FROM serdes.{name}")
    out = tmp_path / "out"
    done = _run(tmp_path / "home", "run", str(queries), "--output-dir", str(out), "--format", "parquet", "--quiet",
                *store.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    for name, rows in expected.items():
        assert _rows(out / f"{name}.parquet") == sorted((tuple(r) for r in rows), key=repr), name
    refused = _run(tmp_path / "home", "run", "--sql", "SELECT * FROM serdes.other", *store.confs)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "aipqtest.OtherSerDe" in refused.stderr and "Traceback" not in refused.stderr


def test_drop_table_deletes_a_managed_tables_files_and_keeps_an_external_ones(store, tmp_path):
    external = tmp_path / "external"
    store.pyspark(f"""
        spark.sql("CREATE DATABASE IF NOT EXISTS drops")
        spark.sql("CREATE TABLE drops.managed (a INT) STORED AS PARQUET")
        spark.sql("INSERT INTO drops.managed VALUES (1), (2)")
        spark.sql("CREATE TABLE drops.managed_text (a INT) STORED AS TEXTFILE")
        spark.sql("INSERT INTO drops.managed_text VALUES (1)")
        spark.sql("CREATE TABLE drops.outside (a INT) STORED AS PARQUET LOCATION '{external}'")
        spark.sql("INSERT INTO drops.outside VALUES (3)")
    """)
    managed = store.folder / "warehouse" / "drops.db"
    assert (managed / "managed").is_dir() and (managed / "managed_text").is_dir() and external.is_dir()
    done = _run(tmp_path / "home", "run", "--sql", "DROP TABLE drops.managed; DROP TABLE drops.managed_text; "
                "DROP TABLE drops.outside", "--allow-overwrite", *store.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    said = " ".join(done.stderr.split())
    assert f"dropped drops.managed and deleted its files at file:{managed}/managed (a managed table)" in said
    assert "dropped drops.managed_text and deleted its files" in said
    assert f"dropped drops.outside; its files at file:{external} are kept (an external table)" in said
    assert not (managed / "managed").exists() and not (managed / "managed_text").exists()
    assert list(external.glob("part-*"))  # the external table's data stays


MISSING_DATABASE = [
    "CREATE TABLE nowhere.t AS SELECT 1 AS a",
    "CREATE TABLE nowhere.t (a INT)",
    "CREATE TABLE nowhere.t PARTITIONED BY (p) AS SELECT 1 AS a, 2 AS p",
    "CREATE VIEW nowhere.v AS SELECT 1 AS a",
    "INSERT INTO nowhere.t SELECT 1",
]


def test_a_table_in_a_database_that_does_not_exist_is_refused_and_nothing_is_created(store, tmp_path):
    for number, statement in enumerate(MISSING_DATABASE):
        script = tmp_path / f"w{number}.sql"
        script.write_text(f"CREATE TABLE IF NOT EXISTS first_{number} AS SELECT 1 AS a;\n{statement};")
        done = _run(tmp_path / "home", "run", str(script), "--quiet", *store.confs)
        assert done.returncode == 2, (statement, done.stderr[-3000:])
        assert f"{script}:2:" in done.stderr and "nowhere" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    # with the database created first, the same statement runs
    made = _run(tmp_path / "home", "run", "--sql", "CREATE DATABASE nowhere2; CREATE TABLE nowhere2.t AS "
                "SELECT 1 AS a", "--quiet", *store.confs)
    assert made.returncode == 0, made.stderr[-3000:]
    seen = store.pyspark("""
        result = {"databases": sorted(r[0] for r in spark.sql("SHOW DATABASES").collect()),
                  "tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN default").collect())}
    """)
    assert "nowhere" not in seen["databases"] and "nowhere2" in seen["databases"]
    assert not any(t.startswith("first_") for t in seen["tables"])  # refused before anything ran
    assert not (store.folder / "warehouse" / "nowhere.db").exists()


def _numbers(count: int) -> str:
    return f"(SELECT explode(sequence(1, {count})) AS id) numbers"


def test_tables_aipq_writes_have_their_rows_and_size_in_the_metastore(store, tmp_path):
    workflow = ("CREATE DATABASE IF NOT EXISTS written;\n"
                f"CREATE TABLE written.numbers AS SELECT id, id * 2 AS twice FROM {_numbers(1000)};\n"
                f"CREATE TABLE written.grown AS SELECT id FROM {_numbers(10)};\n"
                f"INSERT INTO written.grown SELECT id FROM {_numbers(5)};\n"
                f"CREATE TABLE written.parts PARTITIONED BY (p) AS SELECT id, id % 3 AS p FROM {_numbers(30)};")
    script = tmp_path / "stats.sql"
    script.write_text(workflow)
    done = _run(tmp_path / "home", "run", str(script), "--quiet", *store.confs)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = store.pyspark("""
        result = {}
        for name in ("numbers", "grown", "parts"):
            described = spark.sql(f"DESCRIBE TABLE EXTENDED written.{name}").collect()
            result[name] = {"statistics": [r[1] for r in described if r[0] == "Statistics"],
                            "properties": {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES written.{name}")
                                           .collect()}}
    """)
    for name, rows in (("numbers", 1000), ("grown", 15), ("parts", 30)):
        statistics = seen[name]["statistics"]
        assert statistics and statistics[0].endswith(f" bytes, {rows} rows"), (name, seen[name])
        assert int(statistics[0].split()[0]) > 0


def test_a_stopped_metastore_fails_the_command_in_bounded_time_and_the_workflow_resumes(store, tmp_path):
    script = tmp_path / "nightly.sql"
    script.write_text("CREATE DATABASE IF NOT EXISTS stopped;\n"
                      f"CREATE TABLE stopped.first AS SELECT id FROM {_numbers(7)};\n"
                      "CREATE TABLE stopped.second AS SELECT id FROM stopped.first;")
    paused = tmp_path / "paused"
    env = {**os.environ, "AIPQ_PAUSE_AT": "table-commit", "AIPQ_PAUSE_FILE": str(paused)}
    running = subprocess.Popen([*AIPQ, "--home", str(tmp_path / "home"), "run", str(script), "--quiet",
                                "--conf", "aipq.metastore.timeout=5", *store.confs],
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not paused.exists() and time.monotonic() < deadline and running.poll() is None:
            time.sleep(0.2)
        assert paused.exists(), "the workflow never reached its first commit"
        os.kill(store.service.pid, signal.SIGSTOP)  # the metastore's JVM: answers nothing, connections still open
        stopped_at = time.monotonic()
        paused.unlink()
        _, stderr = running.communicate(timeout=180)
        waited = time.monotonic() - stopped_at
    finally:
        os.kill(store.service.pid, signal.SIGCONT)
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 1, stderr[-3000:]
    assert f"the Hive metastore at {store.uri} did not answer within 5s" in " ".join(stderr.split())
    assert "--resume" in stderr and "Traceback" not in stderr
    assert waited < 120  # a few 5-second waits (the client retries), not Hive's 600 s ones
    resumed = _run(tmp_path / "home", "run", str(script), "--quiet", "--resume", *store.confs)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    seen = store.pyspark("""
        result = [spark.sql("SELECT count(*) FROM stopped.first").collect()[0][0],
                  spark.sql("SELECT count(*) FROM stopped.second").collect()[0][0]]
    """)
    assert seen == [7, 7]
