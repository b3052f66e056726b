"""The py4j bridge (the package aipq/engine/jvm/) against the real Spark: if an upgrade moves the internals it uses,
these fail first and say which one."""

from __future__ import annotations

import struct

import duckdb
import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from aipq.engine import jvm
from aipq.engine.session import sql_conf


def test_bloom_filter_is_built_inside_observe_during_a_write_and_has_no_false_negatives(spark, tmp_path):
    keys = spark.range(0, 20000).withColumn("k", (F.col("id") * 7) % 3000)
    observation = Observation("bloom-build")
    written = keys.observe(observation, jvm.bloom_filter_agg(spark, F.xxhash64("k"), 3000, 1 << 16).alias("bf"))
    written.write.parquet(str(tmp_path / "out"))
    data = bytes(observation.get["bf"])
    assert 8000 <= len(data) <= 8300  # 65,536 bits plus the header

    probe = spark.range(0, 100000).filter(jvm.might_contain(spark, jvm.bloom_broadcast(spark, data), F.xxhash64("id")))
    kept = {r.id for r in probe.collect()}
    assert set(range(3000)) <= kept  # every key put in passes
    assert len(kept) < 3000 + 0.05 * 97000  # and few others do

    shape = jvm.bloom_filter_shape(data)
    assert shape.bits == 1 << 16 and 0 < shape.expected_fpp < 0.05
    # fails if a Spark upgrade changes the serialized format that bloom_filter_shape parses
    spark_reads = spark._jvm.org.apache.spark.util.sketch.BloomFilter.readFrom(
        spark._jvm.java.io.ByteArrayInputStream(bytearray(data)))
    assert (shape.bits, shape.expected_fpp) == (spark_reads.bitSize(), pytest.approx(spark_reads.expectedFpp()))


@pytest.mark.parametrize("codegen", [{"spark.sql.codegen.wholeStage": "true"},
                                     {"spark.sql.codegen.wholeStage": "false",
                                      "spark.sql.codegen.factoryMode": "NO_CODEGEN"}], ids=["generated", "interpreted"])
def test_a_broadcast_bloom_filter_answers_as_spark_s_own_might_contain_and_stays_out_of_the_plan(spark, codegen):
    keys = spark.range(0, 5000).select((F.col("id") * 3).alias("k"))
    data = bytes(keys.agg(jvm.bloom_filter_agg(spark, F.xxhash64("k"), 5000, 1 << 12).alias("f")).first()["f"])
    rows = spark.range(0, 40000).select(F.when(F.col("id") % 97 == 0, None).otherwise(F.col("id")).alias("v"))
    hashed = F.when(F.col("v").isNotNull(), F.xxhash64("v"))  # NULL keys hash to NULL: the answer is NULL
    broadcast = jvm.bloom_broadcast(spark, data)
    answers = rows.select("v", jvm.might_contain(spark, broadcast, hashed).alias("ours"),
                          jvm.might_contain_column(spark, F.lit(bytearray(data)), hashed).alias("spark"))
    with sql_conf(spark, codegen):
        collected = answers.collect()
        plan = rows.filter(jvm.might_contain(spark, broadcast, hashed))._jdf.queryExecution().executedPlan().toString()
    assert [(r.v, r.ours) for r in collected] == [(r.v, r.spark) for r in collected]
    assert {r.ours for r in collected} == {True, False, None}  # a wrong answer, or NULL lost, would show
    assert f"might_contain(broadcast {broadcast.id()}" in plan and len(plan) < 1000  # not the filter's 512 bytes


def test_bloom_filter_shape_reads_both_serialized_versions_and_refuses_others():
    words = (0b1011).to_bytes(8, "big") + bytes(8)  # 3 of 128 bits set
    for header in (struct.pack(">iii", 1, 2, 2), struct.pack(">iiii", 2, 2, 0, 2)):  # version 2 adds a seed
        shape = jvm.bloom_filter_shape(header + words)
        assert shape.bits == 128 and shape.expected_fpp == pytest.approx((3 / 128) ** 2)
    with pytest.raises(ValueError, match="version 3"):
        jvm.bloom_filter_shape(struct.pack(">iiii", 3, 2, 0, 2) + words)


def test_hash_set_probe_keeps_exactly_the_observed_values(spark, tmp_path):
    observation = Observation("hash-list")
    df = spark.range(0, 1000).withColumn("h", F.xxhash64((F.col("id") % 10).cast("bigint")))
    df.observe(observation, F.collect_set("h").alias("hashes")).write.parquet(str(tmp_path / "out"))
    values = jvm.observed_value(observation, "hashes")
    assert jvm.seq_size(values) == 10
    kept = spark.range(0, 100).filter(jvm.in_hash_set(spark, values, F.xxhash64("id"))).count()
    assert kept == 10


def test_job_group_figures_report_spark_shuffle_metrics(spark):
    sc = spark.sparkContext
    sc.setJobGroup("aipq-test-shuffle", "shuffle metrics")
    try:
        spark.range(0, 50000).groupBy((F.col("id") % 13).alias("m")).count().collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    figures = jvm.job_group_figures(spark, "aipq-test-shuffle")
    assert figures.shuffle_write_bytes > 0 and figures.shuffle_read_bytes > 0
    assert figures.shuffle_write_records >= 13


def test_observed_metrics_cross_as_json_with_their_types(spark, tmp_path):
    from decimal import Decimal

    observation = Observation("metrics")
    df = spark.range(0, 5000).withColumn("h", F.xxhash64("id"))
    df.observe(observation, F.count(F.lit(1)).alias("rows"),
               jvm.bloom_filter_agg(spark, F.col("h"), 5000, 1 << 16).alias("bf"),
               F.expr("hll_sketch_agg(id, 12)").alias("sketch"),
               F.min(F.expr("CAST(id AS DECIMAL(12,2))")).alias("low"),
               F.max(F.expr("date_add(DATE'2020-01-01', CAST(id % 10 AS INT))")).alias("last"),
               F.avg("id").alias("mean"), F.max(F.expr("CAST(NULL AS STRING)")).alias("nothing"),
               F.collect_set("h").alias("hashes")).write.parquet(str(tmp_path / "out"))
    expected = observation.get
    values = jvm.observed_metrics(observation, keep_in_jvm=["hashes"])
    assert values["rows"] == 5000 and values["hashes"] is None and values["nothing"] is None
    assert values["bf"] == bytes(expected["bf"]) and values["sketch"] == bytes(expected["sketch"])
    assert values["low"] == Decimal("0.00") and str(values["low"]) == str(expected["low"])
    assert values["last"] == str(expected["last"]) == "2020-01-10"
    assert values["mean"] == pytest.approx(expected["mean"])
    assert jvm.seq_size(jvm.observed_value(observation, "hashes")) == 5000


def test_parquet_footer_statistics_cover_every_row_group_or_say_nothing(spark, tmp_path):
    frame = spark.range(0, 30000, numPartitions=3).selectExpr(
        "id", "IF(id % 7 = 0, NULL, CAST(id % 1000 AS STRING)) AS s",
        "date_add(DATE'2020-01-01', CAST(id % 400 AS INT)) AS d", "CAST(id / 100 AS DECIMAL(10,2)) AS price")
    frame.write.option("parquet.block.size", 64 * 1024).parquet(str(tmp_path / "t"))
    files = sorted(str(f) for f in (tmp_path / "t").glob("*.parquet"))
    found = jvm.parquet_footer_statistics(spark, files, ["ID", "s", "d", "price", "missing"])
    assert set(found) == {"ID", "s", "d", "price"}  # in the case asked; a column the files lack is left out
    for name, column in (("ID", "id"), ("s", "s"), ("d", "d"), ("price", "price")):
        low, high, nulls = frame.selectExpr(f"min({column})", f"max({column})",
                                            f"count(*) - count({column})").first()
        assert (found[name].min, found[name].max, found[name].nulls) == (str(low), str(high), nulls), name
    assert found["s"].nulls > 0 and found["d"].min == "2020-01-01"
    assert jvm.parquet_footers(spark, files, ["id"]).rows == 30000
    text = tmp_path / "not.parquet"
    text.write_text("a,b\n1,2\n")
    assert jvm.parquet_footers(spark, [str(text)], ["a"]) == jvm.ParquetFooters(None, {})


def test_counted_filters_stay_apart_and_spark_metrics_count_their_rows(spark, tmp_path):
    source = spark.range(0, 10000)
    plain = source.filter(F.col("id") >= 1000)  # an ordinary filter below: must not merge with the counted ones
    first = plain.filter(jvm.counted_filter(F.col("id") % 2 == 0, -(2 ** 40) - 1))
    second = first.filter(jvm.counted_filter(F.col("id") % 3 == 0, -(2 ** 40) - 2))
    unrun = -(2 ** 40) - 3  # a mark in no plan
    group = "aipq-test-counted"
    spark.sparkContext.setJobGroup(group, "counted filters")
    try:
        second.repartition(3, "id").write.parquet(str(tmp_path / "out"))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    counts = jvm.filter_row_counts(spark, group, {-(2 ** 40) - 1, -(2 ** 40) - 2, unrun})
    assert counts == {-(2 ** 40) - 1: (9000, 4500), -(2 ** 40) - 2: (4500, 1500)}
    assert spark.read.parquet(str(tmp_path / "out")).count() == 1500
    assert jvm.filter_row_counts(spark, "no-such-group", {-(2 ** 40) - 1}) == {}



def test_column_sketcher_sees_every_row_below_later_filters_and_sketches_like_hll_sketch_agg(spark):
    from datasketches import hll_sketch, hll_union

    from aipq.engine.statistics import sketched_values

    frame = spark.range(0, 50000, numPartitions=4).selectExpr(
        "id DIV 4 AS k",  # sorted with repeats, like an order's line items
        "IF(id % 9 = 0, NULL, CONCAT('v', CAST(id % 700 AS STRING))) AS s",
        "date_add(DATE'2020-01-01', CAST(id % 300 AS INT)) AS d")
    columns = [("k", "bigint"), ("s", "string"), ("d", "date")]
    sketcher = jvm.ColumnSketcher(spark, 12, [sketched_values(c, t) for c, t in columns])
    kept = sketcher.observe(frame).filter("k % 10 = 0").count()
    assert kept == 5000  # the query's own filter still applies
    figures = sketcher.results()
    assert [f.rows for f in figures] == [50000] * 3  # every row, not only those the later filter keeps
    exact = frame.selectExpr("count(k)", "count(s)", "count(d)", "sum(octet_length(s))").first()
    assert [f.present for f in figures] == [exact[0], exact[1], exact[2]]
    assert figures[1].width_sum == exact[3] and figures[0].width_sum == 0
    from aipq.stats.sketches import sketch_input_sql

    for (column, data_type), mine in zip(columns, figures):
        theirs = bytes(frame.selectExpr(f"hll_sketch_agg({sketch_input_sql(column, data_type)}, 12)").first()[0])
        ours, spark_sketch = hll_sketch.deserialize(mine.sketch), hll_sketch.deserialize(theirs)
        assert ours.get_estimate() == pytest.approx(spark_sketch.get_estimate(), rel=1e-9), column
        union = hll_union(12)
        union.update(ours)
        union.update(spark_sketch)  # same values hashed alike: the union adds nothing
        assert union.get_estimate() == pytest.approx(ours.get_estimate(), rel=1e-9), column
    distinct = frame.selectExpr("count(DISTINCT k)", "count(DISTINCT s)", "count(DISTINCT d)").first()
    for figure, count in zip(figures, distinct):
        assert abs(hll_sketch.deserialize(figure.sketch).get_estimate() - count) <= 0.05 * count


def _sketched_plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("fmt,extra", [("parquet", None), ("orc", None), ("parquet", ("x", "double"))],
                         ids=["parquet-batches", "orc-batches", "unknown-type-keeps-the-filter"])
def test_columnar_scans_are_sketched_per_batch_exactly_as_row_by_row(spark, tmp_path, fmt, extra):
    """Over a columnar scan the session extension replaces the sketching filter by SketchBatchesExec; every type
    it reads (dictionary-encoded and plain strings, dates, both decimal widths, every integer, keys inside and
    outside the small-value bitmap) gives hll_sketch_agg's sketch and exact counts. A column type it does not
    read keeps the row-by-row filter, with the same figures."""
    from datasketches import hll_sketch

    from aipq.engine.statistics import sketched_values
    from aipq.stats.sketches import sketch_input_sql

    columns = [("b", "tinyint"), ("h", "smallint"), ("i", "int"), ("l", "bigint"), ("flag", "string"),
               ("name", "string"), ("d", "date"), ("small", "decimal(7,2)"), ("price", "decimal(15,2)"),
               ("big", "bigint")]
    if extra:
        columns.append(extra)
    spark.range(0, 40000, numPartitions=3).selectExpr(
        "CAST(id % 100 AS TINYINT) AS b", "CAST(id % 3000 AS SMALLINT) AS h",
        "IF(id % 11 = 0, NULL, CAST(id * 7 % 25000 AS INT)) AS i", "id DIV 3 AS l",
        "IF(id % 13 = 0, NULL, ELT(CAST(id % 3 AS INT) + 1, 'A', 'N', 'R')) AS flag",  # dictionary-encoded
        "CONCAT('customer#', CAST(id * 31 % 39000 AS STRING)) AS name",
        "IF(id % 17 = 0, NULL, date_add(DATE'1992-01-01', CAST(id % 2500 AS INT))) AS d",
        "CAST(id % 9000 / 100 AS DECIMAL(7,2)) AS small", "CAST(id * 13 % 100000 / 100 AS DECIMAL(15,2)) AS price",
        "IF(id % 2 = 0, id * 1000003 - 20000000, NULL) AS big",  # negative, small and beyond 2^23
        "CAST(id % 500 AS DOUBLE) / 7 AS x").write.format(fmt).option("parquet.block.size", 32 * 1024).save(
        str(tmp_path / "t"))
    if fmt == "parquet":  # dictionary-encoded key columns in several row groups a file: sketched per chunk
        assert spark.sparkContext._jvm.aipq.spark.ColumnSketches.sketchesParquetDictionaries()
        chunks = duckdb.execute(
            "SELECT count(DISTINCT (file_name, row_group_id)), count(DISTINCT file_name), bool_and(encodings LIKE "
            f"'%DICTIONARY%') FROM parquet_metadata('{tmp_path / 't'}/*.parquet') WHERE path_in_schema = 'l'"
        ).fetchone()
        assert chunks[0] > 2 * chunks[1] and chunks[2], chunks
    table = spark.read.format(fmt).load(str(tmp_path / "t"))
    sketcher = jvm.ColumnSketcher(spark, 12, [sketched_values(c, t) for c, t in columns])
    observed = sketcher.observe(table).filter("i % 10 = 0")
    plan = _sketched_plan(observed)
    if extra:
        assert "SketchBatches" not in plan and "ColumnSketches" in plan
    else:  # fails if a Spark upgrade stops applying aipq.spark.SketchBatches
        assert "SketchBatches" in plan and "ColumnSketches" not in plan, plan
    assert observed.count() == table.filter("i % 10 = 0").count()  # the query's own filter still applies
    figures = sketcher.results()
    exact = table.selectExpr(*[f"count({c})" for c, _ in columns], "count(*)",
                             *[f"hll_sketch_agg({sketch_input_sql(c, t)}, 12)" for c, t in columns],
                             "sum(octet_length(flag))", "sum(octet_length(name))").first()
    count = len(columns)
    assert [f.rows for f in figures] == [40000] * count
    assert [f.present for f in figures] == list(exact[:count])
    widths = {c: f.width_sum for (c, _), f in zip(columns, figures)}
    assert (widths["flag"], widths["name"]) == (exact[-2], exact[-1])
    assert all(w == 0 for c, w in widths.items() if c not in ("flag", "name"))
    for (column, _), mine, theirs in zip(columns, figures, exact[count + 1:2 * count + 1]):
        assert hll_sketch.deserialize(mine.sketch).get_estimate() == pytest.approx(
            hll_sketch.deserialize(bytes(theirs)).get_estimate(), rel=1e-9), column


@pytest.mark.parametrize("columnar", [True, False], ids=["parquet-batches", "row-by-row"])
def test_a_second_sketcher_over_the_same_schema_reuses_the_analyzed_predicate_with_the_same_figures(
        spark, tmp_path, columnar):
    """ColumnSketches.observe keeps the analyzed sketching predicate; another read of the same schema gets it with
    its own accumulator and columns, not analyzed again, and sketches exactly what a fresh analysis would."""
    from aipq.engine.statistics import sketched_values

    columns = [("k", "bigint"), ("s", "string"), ("d", "date")]

    def rows():  # a schema of its own (the kept predicates are the JVM's), so the first sketcher analyzes
        return spark.range(0, 30000, numPartitions=3).selectExpr(
            "id DIV 3 AS k", "IF(id % 7 = 0, NULL, CONCAT('v', CAST(id % 900 AS STRING))) AS s",
            "date_add(DATE'2020-01-01', CAST(id % 400 AS INT)) AS d", f"1 AS only_{'parquet' if columnar else 'rows'}")

    rows().write.parquet(str(tmp_path / "t"))

    def read():
        return spark.read.parquet(str(tmp_path / "t")) if columnar else rows()

    figures, plans = [], []
    for _ in range(2):
        sketcher = jvm.ColumnSketcher(spark, 12, [sketched_values(c, t) for c, t in columns])
        observed = sketcher.observe(read())
        execution, identity = observed._jdf.queryExecution(), spark.sparkContext._jvm.java.lang.System.identityHashCode
        plans.append((identity(execution.analyzed()) == identity(execution.logical()), _sketched_plan(observed)))
        assert observed.filter("k % 10 = 0").count() == 3000
        figures.append(sketcher.results())
    assert plans[1][0] and not plans[0][0]  # Spark's analysis returned the second plan as it came
    assert all(("SketchBatches" in plan) == columnar for _, plan in plans), plans
    assert [f.rows for f in figures[1]] == [30000] * 3
    assert figures[1] == figures[0]  # rows, nulls, widths and sketch bytes


def test_collector_jar_is_built_from_the_java_sources():
    import hashlib
    import zipfile
    from pathlib import Path

    sources = Path(__file__).resolve().parents[1] / "java" / "src"
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(sources.rglob("*.java"),
                                                                      key=lambda p: str(p.relative_to(sources)))))
    with zipfile.ZipFile(jvm.COLLECTOR_JAR) as jar:
        recorded = jar.read("META-INF/aipq-source.sha256").decode().strip()
    assert recorded == digest.hexdigest(), "java/src changed: rebuild the jar with java/build.sh"


def test_py4j_sends_and_answers_16_kb_without_waiting_for_a_delayed_ack(spark):
    import time

    assert jvm.disable_nagle(spark)  # both ends of this thread's connection
    jvm_side = spark.sparkContext._jvm
    text = "x" * 16000
    builder = jvm_side.java.lang.StringBuilder(text)
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        assert len(builder.toString()) == len(text)
        assert jvm_side.java.lang.StringBuilder(text).length() == len(text)
        timings.append(time.perf_counter() - started)
    assert min(timings) < 0.03  # 85 ms with Nagle's algorithm on


def test_hll_updates_after_the_coupon_modes_give_datasketches_own_sketch_byte_for_byte(spark):
    """Hll8Updates takes over from DataSketches once a sketch is in HLL mode, copying its registers and HIP state
    from the serialized image and updating them itself: fails if a DataSketches upgrade changes either."""
    import random

    updates = spark.sparkContext._jvm.aipq.spark.Hll8Updates
    assert updates.takesOverInHllMode()  # else every update stays with DataSketches (slower, same sketches)
    gateway = spark.sparkContext._gateway
    generator = random.Random(7)
    for lg_k in (4, 8, 12, 14):
        for count in (10, 300, 5000, 100000):
            values = [generator.getrandbits(64) - 2 ** 63 for _ in range(count)] + list(range(count // 2))
            array = gateway.new_array(gateway.jvm.long, len(values))
            buffer = gateway.jvm.java.nio.ByteBuffer.wrap(bytearray(struct.pack(f">{len(values)}q", *values)))
            buffer.asLongBuffer().get(array)
            assert bytes(updates.sketchOf(array, lg_k)) == bytes(updates.dataSketchesSketchOf(array, lg_k)), (
                lg_k, count)


def test_frames_and_lazy_plans_parse_sql_steps_in_one_call_like_pyspark(spark):
    orders = spark.createDataFrame([(1, 10, 5.0), (2, 10, 7.5), (3, 20, None), (4, 30, 1.0)],
                                   "o_orderkey bigint, o_custkey bigint, o_price double")
    customers = spark.createDataFrame([(10, "a"), (20, "b"), (40, "c")], "c_custkey bigint, c_name string")

    selected = jvm.select_sql(orders, ["o_orderkey AS `key`", "o_price * 2 AS `double price`"])
    assert selected.columns == ["key", "double price"]
    assert sorted(selected.collect()) == sorted(orders.selectExpr("o_orderkey", "o_price * 2").collect())

    plan = jvm.LazyPlan.of(orders)
    lazy = plan.select(["o_orderkey AS `key`", "o_price * 2 AS `double price`", "o_price + 1"]).frame()
    assert lazy.columns == ["key", "double price", "(o_price + 1)"]  # unnamed: named as selectExpr names it
    assert sorted(lazy.collect()) == sorted(orders.selectExpr("o_orderkey", "o_price * 2", "o_price + 1").collect())

    grouped = plan.aggregate(["o_custkey AS c"], ["sum(o_price) AS total", "count(*) AS n"]).frame()
    assert grouped.columns == ["c", "total", "n"]
    assert sorted(map(tuple, grouped.collect())) == [(10, 12.5, 2), (20, None, 1), (30, 1.0, 1)]
    assert [tuple(r) for r in plan.aggregate([], ["max(o_orderkey) AS m"]).frame().collect()] == [(4,)]
    assert sorted(r[0] for r in plan.aggregate(["o_custkey AS c"], []).frame().collect()) == [10, 20, 30]

    for how, expected in [("inner", [(1, "a"), (2, "a"), (3, "b")]), ("left_anti", [(4, None)])]:
        for side in (None, "left", "right"):
            joined = plan.join(jvm.LazyPlan.of(customers), "o_custkey = c_custkey", how, side).frame()
            names = ["o_orderkey", "c_name"] if how == "inner" else ["o_orderkey"]
            rows = sorted(tuple(r) for r in joined.select(*names).collect())
            assert rows == [e[:len(names)] for e in expected]
    hinted = plan.join(jvm.LazyPlan.of(customers), "o_custkey = c_custkey", "inner", "right").frame()
    assert "BroadcastHashJoin" in hinted._jdf.queryExecution().executedPlan().toString()
    assert plan.join(jvm.LazyPlan.of(customers), None, "cross", None).frame().count() == 12
    # the same table on both sides: analysed once, as SQL's self-join is
    again = jvm.LazyPlan.of(orders).select(["o_orderkey AS k2"])
    assert plan.join(again, "o_orderkey = k2", "inner", None).frame().count() == 4

    ordered = plan.filter("o_orderkey > 1").sort([("`o_price`", True, True)]).limit(2).frame()
    assert [(r.o_orderkey, r.o_price) for r in ordered.collect()] == [(3, None), (2, 7.5)]

    # the expressions cross NUL-separated: one holding a NUL is refused (the front end refuses such SQL first)
    with pytest.raises(ValueError, match="NUL"):
        jvm.select_sql(orders, ["'a\u0000b' AS s"])
    with pytest.raises(ValueError, match="NUL"):
        plan.select(["'a\u0000b' AS s"])


@pytest.mark.slow  # compiles a few hundred plans
def test_compiled_stage_code_stays_cached_past_spark_default_of_100_classes(spark):
    """aipq runs a query's stages under several strategies in one process (workflows, `aipq bench`); Spark's
    default cache of 100 classes made each run compile again what the previous ones had compiled."""

    def run(k: int) -> None:
        spark.range(0, 10).selectExpr(f"id * {k} + {k} AS v").filter(f"v % {k + 1} = 0").collect()

    for k in range(1, 121):
        run(k)
    before = jvm.codegen_compilations(spark)
    for k in range(1, 121):
        run(k)
    assert jvm.codegen_compilations(spark) == before
    assert before > 120  # each distinct query compiled at least once: the count is Spark's real one


def test_a_column_call_in_aipq_s_session_is_one_py4j_round_trip(spark, monkeypatch):
    """PySpark's call-site recording (off in the sessions aipq builds) adds ~10 round trips to each Column call."""
    import py4j.clientserver

    key = F.col("k")
    sent = []
    send = py4j.clientserver.ClientServerConnection.send_command
    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command",
                        lambda self, command: sent.append(command) or send(self, command))
    key.alias("renamed")
    assert len(sent) == 1


def test_sql_settings_are_set_and_restored_in_one_py4j_round_trip_each_way(spark, monkeypatch):
    """``session.sql_conf``: a setting unset before is unset again after, one set before gets its value back."""
    import py4j.clientserver

    from aipq.engine.session import sql_conf

    keys = ("spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold")
    session_values = {key: spark.conf.get(key, None) for key in keys}
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    try:
        with sql_conf(spark, {"spark.sql.shuffle.partitions": "7"}):
            pass  # aipq's class looked up once per session
        sent = []
        send = py4j.clientserver.ClientServerConnection.send_command
        monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command",
                            lambda self, command: sent.append(command) or send(self, command))
        with sql_conf(spark, dict(zip(keys, ("3", "-1")))):
            assert len(sent) == 1
            monkeypatch.undo()
            assert [spark.conf.get(key) for key in keys] == ["3", "-1"]
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
        assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold", None) is None
        with sql_conf(spark, {"spark.aipq.test.value": "a\u0001b"}):  # a separator: set one by one
            assert spark.conf.get("spark.aipq.test.value") == "a\u0001b"
        assert spark.conf.get("spark.aipq.test.value", None) is None
    finally:
        for key, value in session_values.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def test_datasketches_memory_class_is_where_its_warning_is_quieted(spark):
    """The session loads it with stderr muted (engine/session.py); if a Spark upgrade moves the class, this
    fails and the warning is back on every first query."""
    before = spark._jvm.java.lang.System.err
    assert jvm.load_sketch_memory_quietly(spark)
    assert spark._jvm.java.lang.System.err.equals(before), "stderr is restored"


def test_join_counts_read_an_adaptive_plan_s_current_part_until_it_is_final(spark):
    """The SQL status store can hold an adaptive plan not yet marked final, with its current and its initial
    tree: `--analyze` counts the current one only (it counted both: a hash join and the sort-merge join it
    replaced)."""
    plan_joins = spark._jvm.aipq.spark.PlanJoins
    running = ("== Physical Plan ==\nAdaptiveSparkPlan (12)\n+- == Current Plan ==\n   ShuffledHashJoin (7)\n"
               "   :- ShuffleQueryStage (3)\n+- == Initial Plan ==\n   SortMergeJoin (11)\n   :- Sort (9)\n")
    final = running.replace("Current Plan", "Final Plan")
    plain = "== Physical Plan ==\n* SortMergeJoin Inner (5)\n:- * Sort (2)\n\n\n(1) Scan parquet\nSortMergeJoin x"
    for description in (running, final):
        tree = plan_joins.finalPlan(description)
        assert "ShuffledHashJoin" in tree and "SortMergeJoin" not in tree, tree
    assert plan_joins.finalPlan(plain).count("SortMergeJoin") == 1  # the tree, not the details under it


def test_a_spark_of_another_minor_version_is_refused_naming_both():
    """aipq's jar reaches into Spark's internals: a session on another Spark minor version than the one the jar was
    built for (java/build.sh records it) is refused at start, in one line, rather than failing mid-query."""
    import pyspark
    import pytest

    from aipq.engine.session import check_spark_version
    from aipq.errors import EnvironmentProblem

    built = jvm.jar_spark_version()
    assert built == pyspark.__version__, "the jar is built against the installed PySpark"
    major, minor = built.split(".")[:2]
    check_spark_version(f"{major}.{minor}.99", "a patch release")  # same minor version: runs
    with pytest.raises(EnvironmentProblem) as refused:
        check_spark_version(f"{major}.{int(minor) - 1}.0", "the caller's session")
    assert f"Spark {major}.{int(minor) - 1}.0" in refused.value.message and built in refused.value.message
    assert f"pyspark=={major}.{minor}.*" in refused.value.hint
