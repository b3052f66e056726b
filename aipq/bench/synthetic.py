"""The paper's synthetic reference-ratio data (section 4.2) and its two queries (Fig. 6).

TableA, TableB and TableC each have ``key`` (25 bytes), ``columnA`` (75 bytes) and ``columnB`` (100 bytes).
TableB and TableC hold the same rows, one per key (key density 1). TableA has as many rows, but only a
``ratio`` share of them carry a key that exists in B and C; the rest carry keys outside B's range. The
reference ratio is therefore the share of A's rows (and of B's keys) that survive A ⋈ B.

Query1 is two jobs: A ⋈ B, then that output ⋈ C (child-to-parent passing prunes C before the shuffle).
Query2 is three jobs: A ⋈ B and B ⋈ C side by side, then the two outputs joined (HIP's child-to-parent passing
into the last job, and sibling-to-sibling passing: the A ⋈ B summary prunes the B ⋈ C output before it is
written). Hive compiled these as separate MapReduce jobs because each join reads the previous job's output;
aipq keeps them apart the same way: each intermediate result is a GROUP BY on the key (which is what it already
is: a key appears once in B), so every join is its own stage.

Data is generated in Spark (no per-row Python) and written as parquet under the aipq home, once per size and
ratio, then registered as ``synthetic_<ratio>.tablea`` etc.
"""

from __future__ import annotations

from aipq.catalog import TableEntry
from aipq.engine.context import RunContext
from aipq.engine.session import read_schema
from aipq.engine.storage import join
from aipq.errors import BadInputError

TABLES = ("tablea", "tableb", "tablec")
KEY_WIDTH, COLUMN_A_WIDTH, COLUMN_B_WIDTH = 25, 75, 100

QUERY1 = """
SELECT ab.key, ab.columna, c.columna AS columna_c
FROM (SELECT b.key, max(a.columna) AS columna
      FROM {db}.tablea a JOIN {db}.tableb b ON a.key = b.key
      GROUP BY b.key) ab
JOIN {db}.tablec c ON ab.key = c.key
"""

QUERY2 = """
SELECT ab.key, ab.columna, bc.columna AS columna_c
FROM (SELECT b.key, max(a.columna) AS columna
      FROM {db}.tablea a JOIN {db}.tableb b ON a.key = b.key
      GROUP BY b.key) ab
JOIN (SELECT b.key, max(c.columna) AS columna
      FROM {db}.tableb b JOIN {db}.tablec c ON b.key = c.key
      GROUP BY b.key) bc
ON ab.key = bc.key
"""

QUERIES = {"query1": QUERY1, "query2": QUERY2}


def database_name(ratio: float) -> str:
    return "synthetic_" + f"{ratio:g}".replace(".", "_").replace("-", "m")


def query_text(name: str, ratio: float) -> str:
    return QUERIES[name].format(db=database_name(ratio))


def _padded(expression: str, width: int) -> str:
    """A string of exactly ``width`` characters: the value, then hash characters, so that parquet cannot
    dictionary-encode the column away and sizes stay near the paper's byte widths."""
    filler = "concat(sha2(cast(id AS STRING), 256), sha2(cast(id + 1 AS STRING), 256))"
    return f"substr(concat({expression}, '-', {filler}), 1, {width})"


def _key(expression: str) -> str:
    return f"lpad(cast({expression} AS STRING), {KEY_WIDTH}, 'k')"


def generate(context: RunContext, ratio: float, rows: int) -> list[TableEntry]:
    """Write (once) and register the three tables for one reference ratio."""
    if not 0 < ratio <= 1:
        raise BadInputError(f"reference ratio {ratio:g} is outside (0, 1]", hint="use e.g. --ratios 0.001,0.01,0.1")
    if rows < 1:
        raise BadInputError(f"--rows must be positive, not {rows}")
    database = database_name(ratio)
    folder = join(context.warehouse, "synthetic", f"rows{rows}", database)
    spark, storage = context.spark, context.storage
    if not all(storage.exists(join(folder, table, "_SUCCESS")) for table in TABLES):
        staging = folder + ".partial"
        storage.delete(staging)
        ids = spark.range(0, rows, numPartitions=max(2, rows // 1_000_000))
        b = ids.selectExpr(f"{_key('id')} AS key", f"{_padded('id', COLUMN_A_WIDTH)} AS columna",
                           f"{_padded('id * 3', COLUMN_B_WIDTH)} AS columnb")
        b.write.parquet(join(staging, "tableb"))
        b.write.parquet(join(staging, "tablec"))
        # A matching share is chosen by a hash, not by id order, so matches are spread over every file
        matched = f"pmod(xxhash64(id), 1000000) < {round(ratio * 1_000_000)}"
        a = ids.selectExpr(f"{_key(f'IF({matched}, id, id + {rows})')} AS key",
                           f"{_padded('id * 5', COLUMN_A_WIDTH)} AS columna",
                           f"{_padded('id * 7', COLUMN_B_WIDTH)} AS columnb")
        a.write.parquet(join(staging, "tablea"))
        storage.delete(folder)
        storage.rename(staging, folder)
    catalog = context.catalog
    entries = []
    for table in TABLES:
        location = join(folder, table)
        entry = TableEntry(database, table, location, "parquet", read_schema(spark, storage, location, "parquet"))
        catalog.register(entry)
        entries.append(entry)
    return entries
