"""Multi-statement workflows through the real CLI: tables written atomically, later statements seeing them."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from conftest import assert_same_rows, run_to_rows

from aipq.catalog import Catalog
from aipq.engine.context import RunContext

WORKFLOW = """
-- daily rollup, Hive style
SET hive.exec.dynamic.partition=true;
SET spark.sql.shuffle.partitions=3;
DROP TABLE IF EXISTS wf_orders;
CREATE TABLE wf_orders STORED AS PARQUET AS
SELECT o_orderkey, o_custkey, o_totalprice AS price, year(o_orderdate) AS yr
FROM orders WHERE o_totalprice > 250000;
INSERT INTO TABLE wf_orders
SELECT o_orderkey, o_custkey, o_totalprice, year(o_orderdate) FROM orders WHERE o_totalprice < 1500;
CREATE TEMPORARY VIEW wf_by_customer AS
SELECT o_custkey, count(*) AS n, sum(price) AS total FROM wf_orders GROUP BY o_custkey;
DROP TABLE IF EXISTS wf_top;
CREATE TABLE wf_top AS
SELECT c_name, n, total FROM customer JOIN wf_by_customer ON c_custkey = o_custkey WHERE n > 1;
SELECT c_name, n, total FROM wf_top ORDER BY total DESC, c_name;
"""

EXPECTED = """
WITH wf_orders AS (
  SELECT o_orderkey, o_custkey, o_totalprice AS price FROM orders WHERE o_totalprice > 250000
  UNION ALL SELECT o_orderkey, o_custkey, o_totalprice FROM orders WHERE o_totalprice < 1500),
by_customer AS (SELECT o_custkey, count(*) AS n, sum(price) AS total FROM wf_orders GROUP BY o_custkey)
SELECT c_name, n, total FROM customer JOIN by_customer ON c_custkey = o_custkey WHERE n > 1
ORDER BY total DESC, c_name
"""


def test_workflow_runs_in_order_and_returns_the_last_select(aipq, duck, tmp_path, home):
    script = tmp_path / "rollup.sql"
    script.write_text(WORKFLOW)
    out = tmp_path / "top.parquet"
    result = aipq("run", str(script), "--output", str(out))
    assert result.exit_code == 0, result.output
    actual = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    expected = duck.execute(EXPECTED).fetchall()
    assert actual and [(r[0], r[1]) for r in actual] == [(r[0], r[1]) for r in expected]
    entry = Catalog(home).lookup("wf_orders")
    assert entry is not None and [c for c, _ in entry.columns] == ["o_orderkey", "o_custkey", "price", "yr"]
    assert "created default.wf_orders" in result.output and "appended to default.wf_orders" in result.output
    assert "ignored" in result.output  # the Hive setting

    # Rerunning the same file drops and recreates its own tables without --allow-overwrite.
    again = aipq("run", str(script), "--output", str(out), "--force")
    assert again.exit_code == 0, again.output


def test_overwriting_a_table_the_workflow_did_not_create_needs_the_flag(aipq, home):
    made = aipq("run", "--sql", "create table wf_guarded as select n_nationkey, n_name from nation")
    assert made.exit_code == 0, made.output
    sql = "insert overwrite table wf_guarded select n_nationkey, n_name from nation where n_nationkey < 5"
    refused = aipq("run", "--sql", sql)
    assert refused.exit_code == 2
    assert "did not create" in refused.output and "--allow-overwrite" in refused.output
    assert aipq("run", "--sql", "drop table wf_guarded").exit_code == 2
    allowed = aipq("run", "--sql", sql, "--allow-overwrite")
    assert allowed.exit_code == 0, allowed.output
    assert len(rows(aipq, "select * from wf_guarded")) == 5
    assert aipq("run", "--sql", "drop table tpch_never_there").exit_code == 2
    dropped = aipq("run", "--sql", "drop table wf_guarded", "--allow-overwrite")
    assert dropped.exit_code == 0 and Catalog(home).lookup("wf_guarded") is None


def rows(aipq, sql: str) -> list[tuple]:
    result = aipq("run", "--sql", sql, "--format", "json", "--quiet")
    assert result.exit_code == 0, result.output
    return [tuple(json.loads(line).values()) for line in result.output.splitlines() if line.startswith("{")]


def test_a_failing_statement_leaves_the_previous_table_contents(aipq, tmp_path):
    assert aipq("run", "--sql", "create table wf_safe as select r_regionkey, r_name from region").exit_code == 0
    before = sorted(rows(aipq, "select * from wf_safe"))
    # The scalar subquery returns 25 rows: Spark fails while the stage runs, after planning succeeded.
    failing = "insert overwrite table wf_safe select r_regionkey, (select n_name from nation) from region"
    result = aipq("run", "--sql", failing, "--allow-overwrite")
    assert result.exit_code == 1
    assert "more than one row" in result.output and "Traceback" not in result.output
    assert sorted(rows(aipq, "select * from wf_safe")) == before


def test_the_whole_workflow_is_checked_before_anything_runs(aipq, home, tmp_path):
    script = tmp_path / "typo.sql"
    script.write_text("create table wf_never as select n_name from nation;\n"
                      "select n_nmae from wf_never;\n")
    result = aipq("run", str(script))
    assert result.exit_code == 2
    assert "unknown column 'n_nmae'" in result.output and f"{script}:2:" in result.output
    assert Catalog(home).lookup("wf_never") is None


def test_ctas_names_unnamed_columns_like_hive_and_rejects_duplicates(aipq, home):
    made = aipq("run", "--sql", "create table wf_named as select n_name, upper(n_name), n_regionkey + 1 from nation")
    assert made.exit_code == 0, made.output
    entry = Catalog(home).lookup("wf_named")
    assert [c for c, _ in entry.columns] == ["n_name", "_c1", "_c2"]
    duplicate = aipq("run", "--sql", "create table wf_dup as select n_name, r_name as n_name from nation, region")
    assert duplicate.exit_code == 2 and "two columns named 'n_name'" in duplicate.output


def test_insert_checks_the_column_count_and_casts_to_the_table_types(aipq, home):
    assert aipq("run", "--sql", "create table wf_typed as select n_nationkey, n_name from nation").exit_code == 0
    wrong = aipq("run", "--sql", "insert into wf_typed select n_nationkey from nation")
    assert wrong.exit_code == 2 and "expects 2 column(s)" in wrong.output
    cast = aipq("run", "--sql", "insert into wf_typed select '77', 'X' from region where r_regionkey = 0")
    assert cast.exit_code == 0, cast.output
    assert (77, "X") in rows(aipq, "select * from wf_typed where n_nationkey > 70")


def test_explain_shows_every_statement_of_a_workflow(aipq, tmp_path):
    script = tmp_path / "two.sql"
    script.write_text("create temporary view v as select * from nation where n_regionkey = 1;\n"
                      "create table wf_explained as select n_name from v;\n"
                      "select count(*) from wf_explained;\n")
    result = aipq("explain", str(script), "--format", "json")
    assert result.exit_code == 0, result.output
    statements = json.loads(result.output)["statements"]
    assert [s["kind"] for s in statements] == ["CREATE VIEW", "CREATE TABLE AS", "SELECT"]
    assert statements[1]["plan"]["stages"] and statements[2]["plan"]["stages"]


def test_results_equal_duckdb_for_a_workflow_with_union_and_subqueries(aipq, duck, tmp_path):
    script = tmp_path / "mix.sql"
    script.write_text("""
        create temporary view extremes as
          select o_orderkey, 'high' as band from orders where o_totalprice > 400000
          union all
          select o_orderkey, 'low' from orders where o_totalprice < 2000;
        select band, count(*) as n, sum(l_quantity) as q from extremes join lineitem on o_orderkey = l_orderkey
        where l_suppkey in (select s_suppkey from supplier where s_acctbal > 0)
        group by band order by band;
    """)
    actual = run_to_rows(aipq, tmp_path, str(script))
    expected = duck.execute("""
        with extremes as (select o_orderkey, 'high' as band from orders where o_totalprice > 400000
                          union all select o_orderkey, 'low' from orders where o_totalprice < 2000)
        select band, count(*), sum(l_quantity) from extremes join lineitem on o_orderkey = l_orderkey
        where l_suppkey in (select s_suppkey from supplier where s_acctbal > 0) group by band order by band
    """).fetchall()
    assert [(a[0], a[1], float(a[2])) for a in actual] == [(e[0], e[1], float(e[2])) for e in expected]


def test_a_table_replaced_by_an_earlier_statement_is_measured_again(aipq, home, tmp_path):
    """The planner sizes tables from their files; a workflow plans every statement first, so a size cached then
    must not outlive the statement that replaces the table (a stale size would choose the physical join)."""
    from aipq import workflow
    from aipq.planner.logical import Join, Scan
    from aipq.workflow.source import SqlSource

    script = tmp_path / "grow.sql"
    script.write_text("""
        SET spark.sql.autoBroadcastJoinThreshold=50KB;
        DROP TABLE IF EXISTS wf_grow;
        CREATE TABLE wf_grow AS SELECT r_regionkey AS k, r_name AS v FROM region;
        SELECT count(*) FROM wf_grow JOIN customer ON k = c_custkey;
        INSERT OVERWRITE TABLE wf_grow SELECT o_orderkey, o_comment FROM orders;
        SELECT count(*) FROM wf_grow JOIN customer ON k = c_custkey;
    """)
    source = SqlSource(script.read_text(), str(script))
    planned = workflow.plan_workflow(source, RunContext(home))
    ran = workflow.run_workflow(planned)
    try:
        joins = [n for n in ran.result.planned.dag.plan.root.walk() if isinstance(n, Join)]
        broadcast = [j.left if j.broadcast_side == "left" else j.right for j in joins if j.physical == "broadcast"]
        assert joins and not any(isinstance(n, Scan) and n.table.name == "wf_grow" for side in broadcast
                                 for n in side.walk()), "the grown table was broadcast"
    finally:
        ran.close()


def test_use_puts_unqualified_names_in_that_database(aipq, home, duck, tmp_path):
    """After USE db, unqualified tables are read from and created in db; the workflow's temporary views and
    CTEs keep their own names, and default.t still reaches the default database."""
    script = tmp_path / "use.sql"
    script.write_text("""
        create database if not exists wf_db;
        use wf_db;
        drop table if exists wf_regions;
        create table wf_regions as select r_regionkey, r_name from default.region;
        create temporary view wf_named as select * from wf_regions where r_regionkey < 3;
        with picked as (select r_name from wf_named)
        select n_name, r_name from default.nation join wf_regions on n_regionkey = r_regionkey
        where r_name in (select r_name from picked);
    """)
    actual = run_to_rows(aipq, tmp_path, str(script))
    expected = duck.execute("select n_name, r_name from nation join region on n_regionkey = r_regionkey "
                            "where r_regionkey < 3").fetchall()
    assert sorted(actual) == sorted(expected) and actual
    assert Catalog(home).lookup("wf_db.wf_regions") is not None and Catalog(home).lookup("wf_regions") is None
    missing = aipq("run", "--sql", "use wf_db; select * from nation")
    assert missing.exit_code == 2 and "unknown table 'wf_db.nation'" in missing.output


def test_insert_values_fills_a_table_by_position_and_a_partition(aipq, home, tmp_path):
    script = tmp_path / "values.sql"
    script.write_text("""
        drop table if exists wf_values;
        create table wf_values (k int, name string, price decimal(10,2)) partitioned by (dt string);
        insert into wf_values partition (dt='2024-01-01') values (1, 'a', 1.5), (2, null, 2);
        insert into wf_values values (3, 'c', 3.25, '2024-01-02');
        select k, name, price, dt from wf_values;
    """)
    rows = sorted(run_to_rows(aipq, tmp_path, str(script)))
    assert [(k, n, float(p), d) for k, n, p, d in rows] == [
        (1, "a", 1.5, "2024-01-01"), (2, None, 2.0, "2024-01-01"), (3, "c", 3.25, "2024-01-02")]
    assert [p.values for p in Catalog(home).lookup("wf_values").partitions] == [("2024-01-01",), ("2024-01-02",)]


def test_a_view_kept_in_the_catalog_serves_later_runs(aipq, home, duck, tmp_path):
    made = aipq("run", "--sql", """
        create or replace view wf_rich (custkey, total) as
          select o_custkey, sum(o_totalprice) from orders group by o_custkey having sum(o_totalprice) > 1500000;
        create database if not exists wf_views;
        use wf_views;
        create or replace view wf_rich_names as
          select c_name, total from default.customer join default.wf_rich on c_custkey = custkey""")
    assert made.exit_code == 0, made.output
    rows = run_to_rows(aipq, tmp_path, "--sql", "select * from wf_views.wf_rich_names")  # a later run
    expected = duck.execute("select c_name, sum(o_totalprice) from customer join orders on c_custkey = o_custkey "
                            "group by c_name having sum(o_totalprice) > 1500000").fetchall()
    assert_same_rows(rows, expected, ordered=False)
    assert rows
    again = aipq("run", "--sql", "create view wf_rich as select 1 as one")
    assert again.exit_code == 2 and "already exists" in again.output
    dropped = aipq("run", "--sql", "drop view wf_views.wf_rich_names; drop view wf_rich")
    assert dropped.exit_code == 0, dropped.output
    gone = aipq("run", "--sql", "select * from wf_rich")
    assert gone.exit_code == 2 and "unknown table" in gone.output


def test_orc_tables_are_written_and_read_back(aipq, home, duck, tmp_path):
    rows = run_to_rows(aipq, tmp_path, "--sql", """
        drop table if exists wf_orc;
        create table wf_orc stored as orc as select n_nationkey, n_name, n_regionkey from nation;
        insert into wf_orc values (99, 'ATLANTIS', 9);
        drop table if exists wf_orc_parts;
        create table wf_orc_parts (k int, name string) partitioned by (region int) stored as orc;
        insert overwrite table wf_orc_parts partition (region) select n_nationkey, n_name, n_regionkey from wf_orc;
        select region, count(*) as n from wf_orc_parts group by region""")
    expected = duck.execute("select n_regionkey, count(*) from nation group by all").fetchall() + [(9, 1)]
    assert_same_rows(rows, expected, ordered=False)
    entry = Catalog(home).lookup("wf_orc")
    assert entry.format == "orc" and list(Path(entry.path).glob("part-*.orc"))


def test_an_external_text_table_reads_hives_delimited_files(aipq, tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "part-0").write_text("1\x01alpha\x012024-01-02\n2\x01\\N\x012024-01-03\n")
    (folder / "part-1").write_text('3\x01"quoted"\x01\\N\n')
    rows = run_to_rows(aipq, tmp_path, "--sql", f"""
        create external table wf_raw (id int, name string, day date) stored as textfile location '{folder}';
        select id, name, day from wf_raw""")
    from datetime import date
    assert sorted(rows) == [(1, "alpha", date(2024, 1, 2)), (2, None, date(2024, 1, 3)), (3, '"quoted"', None)]
    refused = aipq("run", "--sql", "insert into wf_raw values (4, 'x', null)")
    assert refused.exit_code == 2 and "aipq writes parquet and ORC" in refused.output


def test_create_database_in_aipqs_own_catalog(aipq, home):
    result = aipq("run", "--sql", "CREATE DATABASE IF NOT EXISTS wf_db; CREATE TABLE wf_db.t AS SELECT 1 AS a;"
                  " SELECT a FROM wf_db.t", "--format", "csv", "--quiet")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "1"
    located = aipq("run", "--sql", "CREATE DATABASE wf_elsewhere LOCATION '/tmp/x'", "--quiet")
    assert located.exit_code == 2
    assert "LOCATION" in located.output
