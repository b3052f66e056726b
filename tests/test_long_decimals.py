"""Decimal sums and averages on 64-bit integers (aipq.spark.LongDecimalAggregates): where the parquet footers'
bounds prove it exact the optimized plan sums unscaled longs, and every result is the very number Spark's own
decimal arithmetic gives; where they do not (a bound too large, a column without one, rounding), the plan is
Spark's."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from aipq.engine.session import LONG_DECIMALS_SETTING, sql_conf


@pytest.fixture(scope="module")
def prices(spark, tmp_path_factory):
    """Several files and row groups of decimals of every width up to 18 digits: negatives, NULLs, half-way
    averages; a view of them, one of a second table with larger values, and an empty one."""
    folder = tmp_path_factory.mktemp("decimals")
    spark.range(0, 30000, numPartitions=3).selectExpr(
        "CAST(id % 7 AS INT) AS g",
        "IF(id % 11 = 0, NULL, CAST((id * 37 % 20001 - 10000) / 100 AS DECIMAL(7,2))) AS small",
        "CAST(id * 7919 % 10000000 / 100 AS DECIMAL(15,2)) AS price",
        "CAST(id % 11 / 100 AS DECIMAL(15,2)) AS rate",
        "CAST((id % 5 - 2) * 12345.6789 AS DECIMAL(18,4)) AS wide",
        "CAST(id * 1000003 AS DECIMAL(18,0)) AS huge",  # 3e10 a row: 30,000 of them fit a long, their squares not
        "CAST(id % 3 AS DECIMAL(1,0)) AS tiny",
    ).write.option("parquet.block.size", 64 * 1024).parquet(str(folder / "t"))
    spark.read.parquet(str(folder / "t")).createOrReplaceTempView("prices")
    spark.range(0, 10).selectExpr("CAST(id % 2 AS INT) AS g", "CAST(99999999.99 AS DECIMAL(15,2)) AS price",
                                  "CAST(900000000000000000 AS DECIMAL(18,0)) AS huge").write.parquet(str(folder / "u"))
    spark.read.parquet(str(folder / "u")).createOrReplaceTempView("other_prices")
    spark.read.parquet(str(folder / "t")).limit(0).write.parquet(str(folder / "e"))
    spark.read.parquet(str(folder / "e")).createOrReplaceTempView("no_prices")
    return folder


@contextmanager
def _long_decimals(spark, on: bool, ansi: bool = False):
    with sql_conf(spark, {LONG_DECIMALS_SETTING: str(on).lower(), "spark.sql.ansi.enabled": str(ansi).lower()}):
        yield


def _both_ways(spark, sql: str, ansi: bool = False, run: bool = True) -> tuple[list, list, str]:
    """The rows with the rule off and on (sorted; none without ``run``), and the optimized plan with it on."""
    with _long_decimals(spark, False, ansi):
        spark_rows = sorted(spark.sql(sql).collect(), key=repr) if run else []
    with _long_decimals(spark, True, ansi):
        frame = spark.sql(sql)
        plan = frame._jdf.queryExecution().optimizedPlan().toString()
        rows = sorted(frame.collect(), key=repr) if run else []
    return spark_rows, rows, plan


EXACT_ON_LONGS = {
    "column sums": "SELECT g, sum(price), sum(wide), sum(huge) FROM prices GROUP BY g",
    "averages, rounded half up": "SELECT g, avg(price), avg(wide), avg(rate) FROM prices GROUP BY g",
    "products and differences": "SELECT g, sum(price * (1 - rate)), sum(price * (1 - rate) * (1 + rate)), "
                                "sum(-small * rate + wide) FROM prices GROUP BY g",
    "CASE and IF": "SELECT sum(CASE WHEN g = 1 THEN price * rate ELSE 0 END), "
                   "sum(IF(g > 3, small, wide)), sum(CASE WHEN g = 2 THEN small END) FROM prices",
    "a filter clause, a join and a global aggregate": "SELECT sum(p.price) FILTER (WHERE p.g = 3), avg(q.price) "
                                                      "FROM prices p JOIN other_prices q ON p.g = q.g",
    "a union takes both tables' bounds": "SELECT g, sum(price), avg(price) FROM (SELECT g, price FROM prices "
                                         "UNION ALL SELECT g, price FROM other_prices) GROUP BY g",
    "no rows at all": "SELECT sum(price), avg(small), sum(price * rate) FROM no_prices",
    "sums of a huge column that fit": "SELECT g, sum(huge), avg(huge) FROM prices GROUP BY g",
}


@pytest.mark.parametrize("ansi", [False, True], ids=["hive", "ansi"])
@pytest.mark.parametrize("name", list(EXACT_ON_LONGS))
def test_decimal_sums_the_bounds_allow_run_on_longs_with_sparks_exact_results(spark, prices, name, ansi):
    spark_rows, rows, plan = _both_ways(spark, EXACT_ON_LONGS[name], ansi)
    assert rows == spark_rows
    assert "MakeDecimal(sum(" in plan and "UnscaledValue(" in plan, plan  # fails if the rule stopped applying


SPARKS_OWN = {
    "a product past a long (huge squared)": "SELECT sum(huge * huge) FROM prices",
    "a product whose scale Spark rounds": "SELECT sum(wide * wide * wide) FROM prices",
    "a column no footer bounds": "SELECT sum(x), avg(x) FROM (SELECT CAST(id AS DECIMAL(15,2)) AS x FROM range(100))",
    "a union with a larger table's values": "SELECT sum(huge) FROM (SELECT huge FROM prices UNION ALL "
                                            "SELECT huge FROM other_prices)",
    "DISTINCT": "SELECT sum(DISTINCT price) FROM prices",
    "a cross join's rows times a huge value": "SELECT sum(a.huge) FROM prices a CROSS JOIN prices b",
    "small decimals, which Spark's own rule sums": "SELECT g, sum(small), avg(small), avg(tiny) FROM prices "
                                                   "GROUP BY g",
}


@pytest.mark.parametrize("name", list(SPARKS_OWN))
def test_where_the_bounds_do_not_prove_it_spark_sums_as_ever(spark, prices, name):
    too_long_to_run = name == "a cross join's rows times a huge value"  # the plan is what counts
    spark_rows, rows, plan = _both_ways(spark, SPARKS_OWN[name], run=not too_long_to_run)
    if not too_long_to_run:
        assert rows == spark_rows
    if name.startswith("small decimals"):  # Spark's DecimalAggregates: averages on doubles, no division of ours
        assert "decimaldividewithoverflowcheck" not in plan, plan
    else:
        assert "MakeDecimal(sum(" not in plan, plan


def test_off_by_default_outside_aipq_jobs(spark, prices):
    """The extension is in aipq's session, but only aipq's stages turn it on (spark.sql in the same session, the
    benchmark's `spark` anchor, keeps Spark's arithmetic)."""
    plan = spark.sql("SELECT sum(price) FROM prices")._jdf.queryExecution().optimizedPlan().toString()
    assert "MakeDecimal" not in plan and "UnscaledValue" not in plan, plan


def test_a_partition_column_is_bounded_by_no_file_even_where_the_files_hold_one_of_its_name(spark, tmp_path):
    """The folders give a partition column's values; a column of the same name inside the files (small here)
    says nothing about them, so the 30 rows of 9e17 are summed by Spark (their total passes a long)."""
    folder = tmp_path / "parted"
    spark.range(0, 30).selectExpr("id", "CAST(1 AS DECIMAL(18,0)) AS k").write.parquet(
        str(folder / "k=900000000000000000"))
    spark.read.schema("id BIGINT, k DECIMAL(18,0)").parquet(str(folder)).createOrReplaceTempView("parted")
    spark_rows, rows, plan = _both_ways(spark, "SELECT sum(k), sum(id) FROM parted")
    assert rows == spark_rows and str(rows[0][0]) == "27000000000000000000", rows
    assert "MakeDecimal(sum(" not in plan, plan
