"""aipq as the driver program of spark-submit (client mode): the launcher's master, ``--conf`` and
``spark-defaults.conf`` apply, aipq's jar comes from ``aipq submit-args``, and the run record says where it ran."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import assert_same_rows, oracle_rows

from aipq.cli.submit import submit_args
from aipq.tpch.queries import query_text

pytestmark = pytest.mark.slow


def _spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def _submit(home: Path, launcher: list[str], command: list[str], env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([_spark_submit(), *launcher, *submit_args(), "--home", str(home), *command],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}, cwd=cwd)


def test_spark_submit_runs_a_query_with_the_launchers_settings(tpch, home, duck, tmp_path):
    out, report = tmp_path / "q3.parquet", tmp_path / "report.json"
    done = _submit(home, ["--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=3"],
                   ["run", "tpch:3", "--output", str(out), "--report", str(report), "--quiet"])
    assert done.returncode == 0, done.stderr[-3000:]
    actual = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    assert_same_rows(actual, oracle_rows(duck, query_text(3)), ordered=True)
    assert json.loads(report.read_text())["spark"]["master"] == "local[1]"


def test_spark_defaults_conf_applies_under_spark_submit(tpch, home, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.master local[1]\nspark.app.name nightly\n")
    report = tmp_path / "report.json"
    done = _submit(home, [], ["run", "--sql", "SELECT count(*) FROM nation", "--report", str(report), "--quiet"],
                   env={"SPARK_CONF_DIR": str(conf)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(report.read_text())["spark"]["master"] == "local[1]"


def test_spark_submit_without_aipqs_jar_says_how_to_launch(tpch, home):
    main = submit_args()[-1]
    done = subprocess.run([_spark_submit(), "--master", "local[1]", main, "--home", str(home), "run", "--sql",
                           "SELECT 1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    said = done.stdout + done.stderr  # spark-submit's PythonRunner merges the driver's stderr into its stdout
    assert "aipq submit-args" in said
    assert "Traceback" not in said


def test_submit_args_prints_a_shell_ready_line():
    printed = subprocess.run([sys.executable, "-m", "aipq", "submit-args"], capture_output=True, text=True, check=True)
    words = shlex.split(printed.stdout)
    assert words[0] == "--jars" and Path(words[1]).is_file() and words[-1].endswith("__main__.py")


def test_spark_defaults_conf_gives_the_master_of_a_plain_aipq_command(tpch, home, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("# the team's defaults\nspark.master   local[1]\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "aipq", "--home", str(home), "run", "--sql",
                           "SELECT count(*) FROM nation", "--report", str(report), "--quiet"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "SPARK_CONF_DIR": str(conf)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(report.read_text())["spark"]["master"] == "local[1]"


def test_the_launchers_warehouse_and_catalog_settings_stand(tpch, home, tmp_path):
    warehouse = tmp_path / "team-warehouse"
    done = _submit(home, ["--master", "local[1]", "--conf", f"spark.sql.warehouse.dir={warehouse}",
                          "--conf", "spark.sql.catalogImplementation=hive"],
                   ["run", "--sql", "CREATE DATABASE IF NOT EXISTS nightly_db", "--quiet"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Spark's embedded metastore (no URIs) made the database in the launcher's warehouse, not aipq's home
    assert (warehouse / "nightly_db.db").is_dir()
