"""Resume (``aipq run --resume FILE``, issue 43): a workflow that failed or was killed continues after the
statements it committed, which are not run again, and ends with the rows of an uninterrupted run. Kills are real
(SIGKILL of a separate ``aipq`` process at a crash point: ``aipq/faults.py``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import assert_same_rows, parquet_rows, said

from aipq.catalog import Catalog

WORKFLOW = """drop table if exists {p}_orders;
drop table if exists {p}_nations;
create table {p}_orders as
  select o_orderkey, o_custkey, o_totalprice from orders where o_orderdate < date '1995-01-01';
create table {p}_nations as
  select c_nationkey, count(*) as orders, sum(o_totalprice) as total
  from {p}_orders join customer on o_custkey = c_custkey group by c_nationkey;
insert into {p}_nations select c_nationkey, -1, 0 from customer where c_custkey <= 3;
select n_name, orders, total from {p}_nations join nation on c_nationkey = n_nationkey
order by n_name, orders;
"""


def workflow_file(tmp_path: Path, prefix: str) -> Path:
    script = tmp_path / f"{prefix}.sql"
    script.write_text(WORKFLOW.format(p=prefix))
    return script


def table_files(home: Path, name: str) -> set[str]:
    entry = Catalog(home).lookup(f"default.{name}")
    return {str(p) for p in Path(entry.path).rglob("*.parquet")} if entry is not None else set()


@pytest.fixture
def uninterrupted(aipq, tmp_path) -> list[tuple]:
    script = workflow_file(tmp_path, "rs_whole")
    out = tmp_path / "whole.parquet"
    done = aipq("run", str(script), "--output", str(out), "--quiet", "--allow-overwrite")
    assert done.exit_code == 0, done.output
    return parquet_rows(out)


def test_a_failed_workflow_resumes_after_the_statements_it_committed(aipq, home, tmp_path, uninterrupted):
    """The last statement fails (the data of the one table only it reads is gone); with the data back, --resume
    skips the five statements that committed and writes none of their tables again."""
    script = workflow_file(tmp_path, "rs_failed")
    nation = Path(Catalog(home).lookup("default.nation").path)
    hidden = nation.with_name(nation.name + ".away")
    out = tmp_path / "resumed.parquet"
    shutil.move(str(nation), str(hidden))
    try:
        failed = aipq("run", str(script), "--output", str(out))
    finally:
        shutil.move(str(hidden), str(nation))
    assert failed.exit_code == 1, failed.output
    assert "statement 6" in failed.output
    committed = {name: table_files(home, f"rs_failed_{name}") for name in ("orders", "nations")}
    assert all(committed.values())
    resumed = aipq("run", str(script), "--resume", "--output", str(out))
    assert resumed.exit_code == 0, resumed.output
    assert said(resumed).count("done before the interruption (--resume)") == 5
    assert_same_rows(parquet_rows(out), uninterrupted, ordered=True)
    assert {name: table_files(home, f"rs_failed_{name}") for name in committed} == committed
    again = aipq("run", str(script), "--resume", "--output", str(out), "--force")
    assert again.exit_code == 0 and "--resume" not in again.output, "a finished run leaves nothing to resume"


def test_resume_needs_a_workflow_file(aipq):
    refused = aipq("run", "--resume", "--sql", "select 1")
    assert refused.exit_code == 2
    assert "--resume continues a workflow FILE" in refused.output


def run_killed(home: Path, script: Path, point: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "AIPQ_HOME": str(home), "AIPQ_KILL_AT": point}
    return subprocess.run([sys.executable, "-m", "aipq.cli.main", "run", str(script), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["stage-written@3", "between-stages@2", "table-commit@2", "table-commit@3"])
def test_a_killed_workflow_resumes_with_the_uninterrupted_rows(aipq, home, tmp_path, uninterrupted, point):
    """Killed (SIGKILL) while a stage writes, between stages, and while a table commits (a new table's data in
    place but not registered; an append's files in place but not recorded): --resume ends with the rows of an
    uninterrupted run, with no row appended twice and no committed table written again."""
    prefix = "rs_" + point.replace("-", "_").replace("@", "_")
    script = workflow_file(tmp_path, prefix)
    killed = run_killed(home, script, point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = {name: table_files(home, f"{prefix}_{name}") for name in ("orders", "nations")}
    out = tmp_path / "resumed.parquet"
    resumed = aipq("run", str(script), "--resume", "--output", str(out))
    assert resumed.exit_code == 0, resumed.output
    assert_same_rows(parquet_rows(out), uninterrupted, ordered=True)
    # every point lies after the first table's commit: it is never written again
    assert f"CREATE TABLE AS default.{prefix}_orders: skipped" in said(resumed)
    assert table_files(home, f"{prefix}_orders") == before["orders"]
    if f"CREATE TABLE AS default.{prefix}_nations: skipped" in said(resumed):
        assert before["nations"] <= table_files(home, f"{prefix}_nations"), "nations was written again"


SELF_OVERWRITE = """drop table if exists {p};
create table {p} as select l_orderkey, sum(l_quantity) as q from lineitem group by l_orderkey;
insert overwrite table {p} select l_orderkey, q * 2 from {p} where q > 100;
create table {p}_count as select count(*) as c from {p};
select sum(q) from {p};
"""


@pytest.mark.slow
@pytest.mark.parametrize("commit", ["rename", "versioned"])
def test_a_committed_overwrite_that_reads_its_own_table_is_not_run_again(aipq, home, tmp_path, commit):
    """Killed right after the INSERT OVERWRITE's new data is moved into place (renamed over the table's folder,
    or a new version folder the catalog does not point at yet), its journal line not yet written: --resume tells
    from the table's current data whether the commit happened, and q is doubled once either way (issue 55)."""
    prefix = f"rs_self_{commit}"
    script = tmp_path / f"{prefix}.sql"
    script.write_text(f"set aipq.commit={commit};\n" + SELF_OVERWRITE.format(p=prefix))
    aipq("run", "--sql", f"drop table if exists {prefix}_count", "--allow-overwrite")
    killed = run_killed(home, script, "table-commit@2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    out = tmp_path / "resumed.parquet"
    resumed = aipq("run", str(script), "--resume", "--output", str(out))
    assert resumed.exit_code == 0, resumed.output
    skipped = f"INSERT OVERWRITE default.{prefix}: skipped" in said(resumed)
    assert skipped == (commit == "rename"), "a renamed folder is the commit; a version folder is not, yet"
    expected = duckdb.connect().execute(
        "select sum(q * 2) from (select sum(l_quantity) as q from read_parquet('{}') group by l_orderkey) "
        "where q > 100".format(Catalog(home).lookup("default.lineitem").path)).fetchall()
    assert parquet_rows(out) == expected


def test_an_edited_table_statement_replaces_what_its_earlier_version_created(aipq, home, tmp_path):
    """DROP, then CREATE TABLE … AS SELECT, then a failing statement; the CREATE edited before --resume: the DROP
    is done and skipped, and the edited CREATE replaces the table the first version made (issue 55)."""
    script = tmp_path / "rs_edited.sql"
    text = ("drop table if exists rs_edited;\n"
            "create table rs_edited as select n_nationkey as k from nation;\n"
            "create table rs_edited_next as select k from rs_edited where assert_true(k < 0) is null;\n"
            "select count(*) as n from rs_edited;\n")
    script.write_text(text)
    aipq("run", "--sql", "drop table if exists rs_edited_next", "--allow-overwrite")
    failed = aipq("run", str(script))
    assert failed.exit_code == 1, failed.output
    script.write_text(text.replace("from nation;", "from nation where n_nationkey < 5;")
                      .replace(" where assert_true(k < 0) is null", ""))
    out = tmp_path / "edited.parquet"
    resumed = aipq("run", str(script), "--resume", "--output", str(out))
    assert resumed.exit_code == 0, resumed.output
    assert "DROP TABLE default.rs_edited: skipped" in said(resumed)
    assert parquet_rows(out) == [(5,)]
