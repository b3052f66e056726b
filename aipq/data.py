"""Tables: registering data as tables (``aipq table add``), and generating TPC-H (uniform or skewed) and TPC-DS
and registering their tables (``aipq tpch gen``, ``aipq tpcds gen``, the benchmarks)."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

from aipq.catalog import FORMATS, Catalog, Partition, TableEntry, split_name
from aipq.engine.context import RunContext
from aipq.engine.session import read_schema, table_rows
from aipq.engine.storage import is_local, local_path
from aipq.engine.tables import partition_folders, rewrite_columns
from aipq.errors import BadInputError
from aipq.estimator.join_estimates import KnownTables
from aipq.pipeline import worst_order_text
from aipq.tpcds import generate as tpcds_generate
from aipq.tpch import generate as tpch_generate
from aipq.tpch import skew as tpch_skew
from aipq.tpch.queries import query_text


def add_table(context: RunContext, name: str, path: str, fmt: str,
              partitioned_by: tuple[str, ...] = ()) -> tuple[TableEntry, bool]:
    """Register data at ``path``; with ``partitioned_by``, data in Hive's layout (``col=value/`` folders), its
    partition folders registered as partitions and the columns' types as Spark infers them from the names."""
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    database, table = split_name(name)
    if not table.isidentifier():
        raise BadInputError(f"{name!r} is not a valid table name", hint="use letters, digits and underscores")
    if not path.strip():
        raise BadInputError("no data path given", hint="aipq table add NAME PATH")
    location = str(Path(local_path(path)).expanduser().resolve()) if is_local(path) else path
    catalog = context.catalog
    catalog.check_writable()  # before Spark starts
    if not context.storage.exists(location):
        raise BadInputError(f"no data at {path}")
    columns = read_schema(context.spark, context.storage, location, fmt)
    partitions: tuple[Partition, ...] = ()
    if partitioned_by:
        missing = f"no {'/'.join(f'{c}=…' for c in partitioned_by)} folders below {path}"
        if [c for c, _ in columns[-len(partitioned_by):]] != list(partitioned_by):
            raise BadInputError(missing, hint=f"Spark found the columns {', '.join(c for c, _ in columns)}; name "
                                              "the partition folders' columns, outermost first")
        partitions = tuple(Partition(values, folder) for values, folder in
                           partition_folders(context.storage, location, partitioned_by))
        if not partitions and context.storage.data_files(location):
            raise BadInputError(missing, hint="name every level of the partition folders, outermost first")
    entry = TableEntry(database, table, location, fmt, columns, partition_columns=partitioned_by,
                       partitions=partitions)
    replaced = catalog.register(entry)
    return entry, replaced



def registering_catalog(context: RunContext) -> Catalog:
    """Where generated tables are registered: the Hive metastore when the settings configure one, else aipq's
    own catalog (opened without starting Spark)."""
    return context.catalog if context.uses_metastore else Catalog(context.home)



def generate_tpch(context: RunContext, scale_factor: float, database: str,
                  parts: int = 1) -> list[TableEntry]:
    """TPC-H through tpchgen-cli, registered with its known schema (no Spark session needed unless the tables
    go to a Hive metastore)."""
    folder = tpch_generate.generate(context.home, scale_factor, parts)
    catalog = registering_catalog(context)
    entries = []
    for table in tpch_generate.TABLES:
        location = str(tpch_generate.table_path(folder, table))
        entry = TableEntry(database, table, location, "parquet", tpch_generate.COLUMNS[table])
        catalog.register(entry)
        entries.append(entry)
    return entries



def generate_skewed_tpch(context: RunContext, scale_factor: float, exponent: float, database: str,
                         parts: int = 1) -> list[TableEntry]:
    """TPC-H with orders' customers and lineitem's parts drawn from a Zipf distribution of ``exponent``
    (``tpch/skew.py``): the two tables rewritten by Spark beside the uniform generation's files, renamed into
    place once complete, the other six registered from the uniform files."""
    if not math.isfinite(exponent) or exponent <= 0:
        raise BadInputError(f"--skew must be positive, not {exponent:g}",
                            hint="1 is strong skew; leave it out for uniform data")
    uniform = tpch_generate.generate(context.home, scale_factor, parts)
    target = uniform.with_name(f"{uniform.name}-{tpch_skew.skew_label(exponent)}")
    entries = [TableEntry(database, table, str(tpch_generate.table_path(uniform, table)), "parquet",
                          tpch_generate.COLUMNS[table]) for table in tpch_generate.TABLES]
    if not all((target / f"{table}.parquet").exists() for table in tpch_skew.SKEWED):
        spark = context.spark
        rows = {entry.name: table_rows(spark, context.storage, entry) for entry in entries
                if entry.name in ("customer", "part", "supplier")}
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        for table in tpch_skew.SKEWED:
            rewrite_columns(spark, str(tpch_generate.table_path(uniform, table)), str(staging / f"{table}.parquet"),
                            tpch_skew.skewed_columns(table, exponent, rows["customer"], rows["part"],
                                                     rows["supplier"]))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    entries = [replace(entry, path=str(target / f"{entry.name}.parquet")) if entry.name in tpch_skew.SKEWED else entry
               for entry in entries]
    catalog = registering_catalog(context)
    for entry in entries:
        catalog.register(entry)
    return entries



def generate_tpcds(context: RunContext, scale_factor: float, database: str) -> list[TableEntry]:
    """TPC-DS through tpcgen-cli, registered with the schema Spark reads from its files."""
    catalog = context.catalog
    catalog.check_writable()  # before generating
    folder = tpcds_generate.generate(context.home, scale_factor)
    entries = []
    for table in tpcds_generate.TABLES:
        location = str(tpcds_generate.table_path(folder, table))
        entry = TableEntry(database, table, location, "parquet",
                           read_schema(context.spark, context.storage, location, "parquet"))
        catalog.register(entry)
        entries.append(entry)
    return entries



def collect_missing_statistics(context: RunContext, collected_by: str, database: str = "default") -> None:
    """Statistics of every TPC-H table in ``database`` that the repository lacks for its files as they are now
    (one pass each, as ``aipq stats collect``)."""
    from aipq.engine.statistics import collect_table

    known = KnownTables(context.repository, context.storage)
    for name in tpch_generate.TABLES:
        entry = context.catalog.lookup(f"{database}.{name}")
        if entry is not None and known.stats(entry.path) is None:
            collect_table(context, entry, None, collected_by)



def worst_order_tpch_query(context: RunContext, number: int) -> str:
    """TPC-H query ``number`` with its FROM list in the worst order that still joins each table to an earlier one
    (issue 42's bad-order variant), from the statistics of the tables as they are now."""
    text = worst_order_text(query_text(number), context.catalog, context.settings, context.join_costing())
    if text is None:
        raise BadInputError(f"TPC-H Q{number} has no bad-order variant here: its FROM list is not comma joins, or "
                            "a table has no statistics", hint="collect them with: aipq stats collect")
    return text

