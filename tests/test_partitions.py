"""Hive's partitioned tables through the real CLI: CREATE TABLE … PARTITIONED BY, static and dynamic INSERT …
PARTITION, ALTER TABLE ADD/DROP PARTITION, MSCK REPAIR TABLE, and partition pruning at planning, with DuckDB
on the same source tables as the oracle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import assert_same_rows, run_to_rows

from aipq.catalog import Catalog

WORKFLOW = """
drop table if exists pt_orders;
create table pt_orders (o_orderkey bigint, o_custkey bigint, price decimal(15,2))
  partitioned by (status string, yr int) stored as parquet;
insert overwrite table pt_orders partition (status='F', yr)
  select o_orderkey, o_custkey, o_totalprice, year(o_orderdate) from orders where o_orderstatus = 'F';
insert into table pt_orders partition (status, yr)
  select o_orderkey, o_custkey, o_totalprice, o_orderstatus, year(o_orderdate) from orders
  where o_orderstatus <> 'F';
insert overwrite table pt_orders partition (status='O', yr=1997)
  select o_orderkey, o_custkey, o_totalprice from orders
  where o_orderstatus = 'O' and year(o_orderdate) = 1997 and o_totalprice > 100000;
alter table pt_orders add if not exists partition (status='X', yr=1990);
alter table pt_orders drop partition (status='P');
select status, yr, count(*) as n, sum(price) as total from pt_orders group by status, yr;
"""

EXPECTED = """
select o_orderstatus, year(o_orderdate) as yr, count(*), sum(o_totalprice) from orders
where o_orderstatus <> 'P' and not (o_orderstatus = 'O' and year(o_orderdate) = 1997 and o_totalprice <= 100000)
group by all
"""


@pytest.fixture(scope="module")
def partitioned(aipq, home, tmp_path_factory):
    script = tmp_path_factory.mktemp("partitions") / "daily.sql"
    script.write_text(WORKFLOW)
    out = script.parent / "result.parquet"
    result = aipq("run", str(script), "--output", str(out), "--force")
    assert result.exit_code == 0, result.output
    return Catalog(home).lookup("pt_orders"), duckdb.connect().execute(f"select * from '{out}'").fetchall()


def test_a_partitioned_workflow_gives_the_oracles_rows(partitioned, duck):
    entry, rows = partitioned
    assert_same_rows(rows, duck.execute(EXPECTED).fetchall(), ordered=False)
    assert entry.partition_columns == ("status", "yr")
    assert [c for c, _ in entry.columns] == ["o_orderkey", "o_custkey", "price", "status", "yr"]
    statuses = {values[0] for values in (p.values for p in entry.partitions)}
    assert statuses == {"F", "O", "X"}  # P dropped, X added empty
    for partition in entry.partitions:  # Hive's layout below the table's folder
        assert partition.path == f"{entry.path}/status={partition.values[0]}/yr={partition.values[1]}"
        assert Path(partition.path).is_dir()
    assert not list(Path(entry.path).glob("status=P/*/*.parquet"))  # a managed table's dropped data goes


def test_filters_on_partition_columns_prune_partitions_at_planning(aipq, partitioned, duck, tmp_path):
    entry, _ = partitioned
    sql = ("select status, yr, count(*) as n from pt_orders where yr >= 1996 and status in ('F', 'O') "
           "and o_custkey > 10 group by status, yr")
    plan = json.loads(aipq("explain", "--sql", sql, "--format", "json").output)
    scans = [i for s in plan["stages"] for i in s["inputs"] if i["kind"] == "table"]
    years = {p.values for p in entry.partitions if p.values[0] in ("F", "O") and int(p.values[1]) >= 1996}
    assert scans[0]["partitions"] == {"read": len(years), "registered": len(entry.partitions)}
    expected = duck.execute("select o_orderstatus, year(o_orderdate), count(*) from orders where "
                            "year(o_orderdate) >= 1996 and o_orderstatus = 'O' and o_custkey > 10 and not "
                            "(year(o_orderdate) = 1997 and o_totalprice <= 100000) group by all").fetchall()
    assert_same_rows(run_to_rows(aipq, tmp_path, "--sql", sql), expected, ordered=False)
    nothing = run_to_rows(aipq, tmp_path, "--sql", "select count(*) from pt_orders where yr = 1800")
    assert nothing == [(0,)]


def test_msck_repair_registers_partition_folders_written_outside(aipq, partitioned, home, tmp_path, duck):
    entry, _ = partitioned
    base = tmp_path / "ext"
    for yr in (1995, 1996):
        folder = base / f"yr={yr}"
        folder.mkdir(parents=True)
        duck.execute(f"copy (select o_orderkey, o_totalprice from orders where year(o_orderdate) = {yr}) "
                     f"to '{folder}/part-0.parquet' (format parquet)")
    (base / "notes").mkdir()  # not a partition folder
    script = tmp_path / "external.sql"
    script.write_text(f"""
        create external table pt_external (o_orderkey bigint, o_totalprice decimal(15,2))
          partitioned by (yr int) stored as parquet location '{base}';
        msck repair table pt_external;
        select yr, count(*) as n from pt_external where yr > 1995 group by yr;
    """)
    rows = run_to_rows(aipq, tmp_path, str(script))
    assert rows == duck.execute("select year(o_orderdate), count(*) from orders where year(o_orderdate) = 1996 "
                                "group by all").fetchall()
    found = Catalog(home).lookup("pt_external")
    assert [p.values for p in found.partitions] == [("1995",), ("1996",)]
    dropped = aipq("run", "--sql", "drop table pt_external", "--allow-overwrite")
    assert dropped.exit_code == 0 and (base / "yr=1995" / "part-0.parquet").exists()  # external data is kept
    shutil.rmtree(base)


@pytest.mark.parametrize(("sql", "message"), [
    ("insert into pt_orders partition (yr, status) select 1, 2, 3, 'a', 4", "partitioned by (status, yr)"),
    ("insert into nation partition (n_regionkey = 1) select 1, 'x', 'y'", "is not partitioned"),
    ("alter table pt_orders drop partition (status = 'nope')", "has no partition (status='nope')"),
    ("alter table pt_orders add partition (status = 'F', yr = 1992)", "already exists"),
    ("alter table pt_orders add partition (yr = 1992)", "give a value for every partition column"),
    ("insert into pt_orders partition (status = 'F', yr = 'soon') select 1, 2, 3", "is not of type int"),
])
def test_partition_mistakes_are_clear_errors(aipq, partitioned, sql, message):
    result = aipq("run", "--sql", sql)
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("strategy", ["always", pytest.param("oracle", marks=pytest.mark.matrix)])
def test_a_summary_of_a_partition_column_prunes_whole_partitions(aipq, home, duck, tmp_path, strategy):
    """The rows of a filtered table's join keys, summarized in a pre-pass, leave only the partitions whose value
    they may hold: the other folders are never listed or read (dynamic partition pruning from a summary)."""
    made = aipq("run", "--sql", "create table if not exists pt_lines partitioned by (l_shipdate) as "
                "select l_orderkey, l_extendedprice, l_shipdate from lineitem where l_shipdate >= date '1998-06-01'")
    assert made.exit_code == 0, made.output
    sql = ("select count(*) as n, sum(l_extendedprice) as total from pt_lines join orders "
           "on l_shipdate = o_orderdate where o_totalprice > 300000")
    info = json.loads(aipq("explain", "--sql", sql, "--analyze", "--format", "json", "--broadcast-threshold", "0",
                           "--ip", strategy).output)
    pruned = [p for s in info["stages"] for p in s["measured"]["probes"] if p.get("partitions")]
    dates = duck.execute("select count(distinct o_orderdate) from orders where o_totalprice > 300000 "
                         "and o_orderdate >= date '1998-06-01'").fetchone()[0]
    registered = len(Catalog(home).lookup("pt_lines").partitions)
    assert pruned and dates <= pruned[0]["partitions"][0] < registered / 4
    assert pruned[0]["partitions"][1] == registered
    expected = duck.execute("select count(*), sum(l_extendedprice) from lineitem join orders on l_shipdate = "
                            "o_orderdate where o_totalprice > 300000 and l_shipdate >= date '1998-06-01'").fetchall()
    actual = run_to_rows(aipq, tmp_path, "--sql", sql, "--ip", strategy, "--broadcast-threshold", "0")
    assert_same_rows(actual, expected, ordered=False)


def test_show_and_describe_answer_from_the_catalog(aipq, partitioned, tmp_path):
    entry, _ = partitioned
    shown = run_to_rows(aipq, tmp_path, "--sql", "show partitions pt_orders")
    assert shown == [(p.spec(entry.partition_columns),) for p in entry.partitions]
    described = run_to_rows(aipq, tmp_path, "--sql", "describe pt_orders")
    assert [(c, t) for c, t, _ in described] == list(entry.columns)
    assert [c for c, _, comment in described if comment == "partition column"] == ["status", "yr"]
    tables = run_to_rows(aipq, tmp_path, "--sql", "create temporary view pt_v as select 1 as one; show tables")
    assert ("default", "pt_orders", "false") in tables and ("default", "pt_v", "true") in tables
    assert ("default", "nation", "false") in tables
    refused = aipq("run", "--sql", "show partitions nation")
    assert refused.exit_code == 2 and "not partitioned" in refused.output


def test_table_add_registers_data_in_hives_layout_with_its_partitions(aipq, partitioned, home, duck, tmp_path):
    entry, _ = partitioned
    added = aipq("table", "add", "pt_again", entry.path, "--partitioned-by", "status,yr")
    assert added.exit_code == 0, added.output
    found = Catalog(home).lookup("pt_again")
    assert found.partition_columns == ("status", "yr") and len(found.partitions) == len(entry.partitions)
    rows = run_to_rows(aipq, tmp_path, "--sql", "select yr, count(*) from pt_again where status = 'F' group by yr")
    expected = duck.execute("select year(o_orderdate), count(*) from orders where o_orderstatus = 'F' "
                            "group by all").fetchall()
    assert_same_rows(rows, expected, ordered=False)
    wrong = aipq("table", "add", "pt_wrong", entry.path, "--partitioned-by", "yr")
    assert wrong.exit_code == 2 and "no yr=… folders" in wrong.output
