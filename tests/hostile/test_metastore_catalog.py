"""aipq's own catalog (SQLite in the home) refuses, as a Hive metastore does, a new table or view in a database that
does not exist, before anything runs (issue 80, item 7); a database CREATE DATABASE made is kept across runs.
The same against a metastore service: tests/hostile/test_metastore_service.py."""

from __future__ import annotations

import pytest

from aipq.catalog import Catalog

MISSING_DATABASE = [
    "CREATE TABLE hostile_nowhere.t AS SELECT 1 AS a",
    "CREATE TABLE hostile_nowhere.t (a INT)",
    "CREATE TABLE hostile_nowhere.t PARTITIONED BY (p) AS SELECT 1 AS a, 2 AS p",
    "CREATE VIEW hostile_nowhere.v AS SELECT 1 AS a",
    "INSERT INTO hostile_nowhere.t SELECT 1",
]


@pytest.mark.parametrize("statement", MISSING_DATABASE)
def test_a_table_in_a_missing_database_is_refused_before_anything_runs(aipq, home, statement):
    done = aipq("run", "--sql", f"CREATE TABLE hostile_first AS SELECT 1 AS a; {statement}")
    assert done.exit_code == 2, done.output
    assert "hostile_nowhere" in done.output and "Traceback" not in done.output
    catalog = Catalog(home)
    assert catalog.lookup("hostile_first") is None  # the first statement did not run either
    assert not any(e.database == "hostile_nowhere" for e in catalog.entries())
    assert catalog.view_query("hostile_nowhere.v") is None
    assert not catalog.database_exists("hostile_nowhere")


def test_a_database_created_in_an_earlier_run_takes_tables(aipq, home):
    assert aipq("run", "--sql", "CREATE DATABASE IF NOT EXISTS hostile_kept").exit_code == 0
    done = aipq("run", "--sql", "CREATE TABLE hostile_kept.t AS SELECT 1 AS a; SELECT a FROM hostile_kept.t",
                "--format", "csv", "--quiet")
    try:
        assert done.exit_code == 0, done.output
        assert done.output.strip().splitlines()[-1] == "1"
    finally:
        aipq("run", "--sql", "DROP TABLE IF EXISTS hostile_kept.t", "--allow-overwrite")
