"""Hostile paths for the files ``aipq run`` writes (issue 80): ``--output``, ``--report`` and the statements' file
are never one file, however named (relative and absolute, through a symbolic or hard link), and the run refuses
that before anything runs (exit 2); every file it writes is replaced only with ``--force``; and the report says
what the run did at every moment: ``running`` from its start, ``succeeded``, or ``failed`` with the error and
the statements that completed, never an earlier run's outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Aipq


@pytest.fixture(autouse=True)
def _hostile_database(aipq):
    """The workflows write into database hostile, which must exist (a missing database is refused)."""
    assert aipq("run", "--sql", "create database if not exists hostile").exit_code == 0


WORKFLOW = ("create table hostile.paths_{n} as select n_regionkey as k, count(*) as n from nation "
            "group by n_regionkey;\nselect sum(n) as total from hostile.paths_{n};\n")


def _one_line(output: str) -> str:
    return " ".join(output.split())


def _workflow(tmp_path: Path, n: str) -> Path:
    script = tmp_path / f"{n}.sql"
    script.write_text(WORKFLOW.format(n=n))
    return script


def _refused_before_running(aipq: Aipq, args: list[str], said: str, untouched: dict[Path, bytes | None]) -> None:
    """``aipq run ARGS`` exits 2 with ``said`` in its one-line error, and every file of ``untouched`` is as it
    was (None: still missing)."""
    result = aipq("run", *args)
    assert result.exit_code == 2, result.output
    assert said in _one_line(result.output) and "Traceback" not in result.output
    for path, content in untouched.items():
        assert (path.read_bytes() if path.exists() else None) == content, f"{path} was written"


def test_output_and_report_that_are_one_file_are_refused(aipq, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "out.json"
    for output, report in (("out.json", "out.json"), ("out.json", str(target)), ("./sub/../out.json", "out.json")):
        (tmp_path / "sub").mkdir(exist_ok=True)
        _refused_before_running(aipq, ["tpch:6", "--output", output, "--report", report],
                                "--output and --report are the same file", {target: None})


def test_a_report_over_the_statements_file_is_refused_with_or_without_force(aipq, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = _workflow(tmp_path, "rs")
    os.symlink(script, tmp_path / "link.json")
    os.link(script, tmp_path / "hard.json")
    before = script.read_bytes()
    for report in ("rs.sql", str(script), "link.json", "hard.json"):
        for force in ([], ["--force"]):
            _refused_before_running(aipq, [str(script), "--report", report, *force],
                                    "--report and the statements' file are the same file", {script: before})
    assert "paths_rs" not in aipq("table", "list").output, "nothing ran"


def test_an_output_over_the_statements_file_is_refused_even_with_force(aipq, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = _workflow(tmp_path, "os")
    os.symlink(script, tmp_path / "link.csv")
    before = script.read_bytes()
    for output in ("os.sql", str(script), "link.csv"):
        _refused_before_running(aipq, ["os.sql", "--format", "csv", "--output", output, "--force"],
                                "--output and the statements' file are the same file", {script: before})


def test_an_existing_report_is_replaced_only_with_force(aipq, tmp_path):
    report = tmp_path / "run.json"
    report.write_text("an earlier run's report\n")
    _refused_before_running(aipq, ["--sql", "select count(*) from nation", "--report", str(report)],
                            f"--report {report} exists", {report: b"an earlier run's report\n"})
    done = aipq("run", "--sql", "select count(*) from nation", "--report", str(report), "--force", "--quiet")
    assert done.exit_code == 0, done.output
    found = json.loads(report.read_text())
    assert found["status"] == "succeeded" and found["result"]["result_rows"] == 1


def _earlier_success(report: Path) -> None:
    report.write_text(json.dumps({"status": "succeeded", "statements": [], "result": {"result_rows": 1}}))


def test_a_failed_workflow_reports_the_failure_and_the_statements_that_ran(aipq, tmp_path):
    script = tmp_path / "fails.sql"
    script.write_text("create table hostile.paths_fails as select n_nationkey as k from nation;\n"
                      "select raise_error(concat('nation ', cast(k as string), ' is bad')) as x "
                      "from hostile.paths_fails;\n")
    report = tmp_path / "run.json"
    _earlier_success(report)
    failed = aipq("run", str(script), "--report", str(report), "--force", "--quiet", "--allow-overwrite")
    assert failed.exit_code == 1, failed.output
    found = json.loads(report.read_text())
    assert found["status"] == "failed" and found["result"] is None
    assert found["error"]["exit_code"] == 1 and "is bad" in found["error"]["message"]
    assert [s["number"] for s in found["statements"]] == [1]
    assert found["statements"][0]["written"]["table"] == "hostile.paths_fails"


def test_a_run_refused_after_its_report_was_checked_reports_the_refusal(aipq, tmp_path):
    report = tmp_path / "run.json"
    _earlier_success(report)
    failed = aipq("run", "--sql", "select no_such_column from nation", "--report", str(report), "--force")
    assert failed.exit_code == 2, failed.output
    found = json.loads(report.read_text())
    assert found["status"] == "failed" and found["error"]["exit_code"] == 2
    assert "no_such_column" in found["error"]["message"] and found["statements"] == []


@pytest.mark.slow
def test_a_killed_run_leaves_a_running_report_not_an_earlier_success(home, tpch, tmp_path):
    """Killed (SIGKILL) at its second statement, the run never reaches its end: the report says it was running,
    with the process that ran it and the statement it completed, rather than the earlier run's success."""
    script = _workflow(tmp_path, "killed")
    report = tmp_path / "run.json"
    _earlier_success(report)
    env = {**os.environ, "AIPQ_KILL_AT": "statement@2"}
    done = subprocess.run([sys.executable, "-m", "aipq", "--home", str(home), "run", str(script), "--report",
                           str(report), "--force", "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, done.stderr
    found = json.loads(report.read_text())
    assert found["status"] == "running" and found["process"] > 0
    assert [s["number"] for s in found["statements"]] == [1]


def test_a_batch_output_over_one_of_its_statements_files_is_refused_even_with_force(aipq, tmp_path):
    """A batch writes DIR/NAME.FORMAT for each file: a SQL file named like its own output (``q.csv``) in DIR."""
    sql_named_csv = tmp_path / "counts.csv"
    sql_named_csv.write_text("select count(*) as n from nation;\n")
    other = tmp_path / "other.sql"
    other.write_text("select count(*) as n from region;\n")
    before = sql_named_csv.read_bytes()
    _refused_before_running(aipq, [str(sql_named_csv), str(other), "--output-dir", str(tmp_path), "--format", "csv",
                                   "--force"], "is the statements' file", {sql_named_csv: before,
                                                                           tmp_path / "other.csv": None})
