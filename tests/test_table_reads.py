"""A session's reads of a table are reused only while its files are the same files."""

from aipq.catalog import TableEntry
from aipq.engine.storage import Storage
from aipq.engine.table_reads import TableReads


def test_a_tables_read_is_reused_while_its_files_are_unchanged_and_made_afresh_when_they_change(spark, tmp_path):
    folder = tmp_path / "t"
    spark.range(0, 10).selectExpr("id AS k").write.parquet(str(folder))
    entry = TableEntry("default", "t", str(folder), "parquet", (("k", "bigint"),))
    reads, files = TableReads(), Storage()

    first = reads.read(spark, files, entry)
    assert reads.read(spark, files, entry) is first
    assert first.count() == 10

    spark.range(10, 15).selectExpr("id AS k").write.mode("append").parquet(str(folder))  # a file more
    appended = reads.read(spark, files, entry)
    assert appended is not first and appended.count() == 15

    spark.range(0, 3).selectExpr("id AS k").write.mode("overwrite").parquet(str(folder))  # other files
    assert reads.read(spark, files, entry).count() == 3
    # another view of the same files (other columns declared) is a read of its own
    renamed = TableEntry("default", "t", str(folder), "parquet", (("k", "string"),))
    assert reads.read(spark, files, renamed).schema.fieldNames() == ["k"]
    assert reads.read(spark, files, renamed) is not reads.read(spark, files, entry)


def counted_tables(spark, folder, prefix: str, rows: list[int]) -> list[TableEntry]:
    """A parquet table of ``rows[n]`` rows (k bigint) per count, named ``prefix`` and its number."""
    entries = []
    for n, count in enumerate(rows):
        path = folder / f"{prefix}{n}"
        spark.range(0, count).selectExpr("id AS k").write.parquet(str(path))
        entries.append(TableEntry("default", f"{prefix}{n}", str(path), "parquet", (("k", "bigint"),)))
    return entries


def test_the_least_recently_read_table_goes_first(spark, tmp_path):
    entries = counted_tables(spark, tmp_path, "t", [1, 2, 3])
    reads, files = TableReads(limit=2), Storage()
    first = reads.read(spark, files, entries[0])
    reads.read(spark, files, entries[1])
    assert reads.read(spark, files, entries[0]) is first  # read again: now the most recent
    reads.read(spark, files, entries[2])
    assert reads.read(spark, files, entries[0]) is first
    assert reads.read(spark, files, entries[1]).count() == 2  # gone, and read afresh


def test_a_kept_read_has_one_view_made_once_and_dropped_when_the_read_goes(spark, tmp_path):
    entries = counted_tables(spark, tmp_path, "v", [2, 3])
    reads, files = TableReads(limit=1), Storage()
    view, kept = reads.view(spark, files, entries[0])
    assert kept and reads.view(spark, files, entries[0]) == (view, True)
    assert spark.table(view).count() == 2
    other, _ = reads.view(spark, files, entries[1])  # the first read goes, and its view with it
    assert other != view and spark.table(other).count() == 3
    assert not spark.catalog.tableExists(view)
    spark.catalog.dropTempView(other)
