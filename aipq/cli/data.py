"""Data and tables: ``aipq tpch`` and ``aipq tpcds`` (generate data, print a bundled query), ``aipq table``
(register, list, drop) and ``aipq calibrate``."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from aipq.catalog import FORMATS
from aipq.cli.options import home_dir, planning_options
from aipq.config import Settings
from aipq.data import (
    add_table,
    generate_skewed_tpch,
    generate_tpcds,
    generate_tpch,
    registering_catalog,
    worst_order_tpch_query,
)
from aipq.engine.context import RunContext
from aipq.errors import BadInputError
from aipq.tpcds.queries import query_text as tpcds_query_text
from aipq.tpch.queries import query_text


@click.group()
def tpch():
    """TPC-H data and queries."""


@tpch.command("gen")
@click.option("--sf", "scale_factor", type=float, default=0.01, show_default=True, help="Scale factor.")
@click.option("--home", "home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="aipq home to generate into (same as the global option).")
@click.option("--database", default="default", show_default=True, help="Database to register the tables in.")
@click.option("--parts", type=click.IntRange(1), default=1, show_default=True, help="Files per table.")
@click.option("--skew", type=float, default=None,
              help="Zipf exponent Z: orders' customers and lineitem's parts drawn with P(k) ∝ 1/k^Z (1 is "
                   "strong skew); the other tables stay uniform.")
@planning_options
@click.pass_context
def tpch_gen(ctx, scale_factor, home, database, parts, skew, settings: Settings):
    """Generate TPC-H as parquet with tpchgen-cli and register the 8 tables."""
    home = home_dir(ctx, home)
    err = Console(stderr=True)
    skewed = f", skew {skew:g}" if skew is not None else ""
    with err.status(f"generating TPC-H at SF {scale_factor:g}{skewed}…"):
        if skew is None:
            entries = generate_tpch(RunContext(home, settings), scale_factor, database, parts)
        else:
            entries = generate_skewed_tpch(RunContext(home, settings), scale_factor, skew, database, parts)
    folders = sorted({str(Path(entry.path).parent) for entry in entries})
    err.print(f"registered {len(entries)} tables in database {database!r} from {' and '.join(folders)}")


@click.group()
def tpcds():
    """TPC-DS data and queries (needs pip install 'aipq[tpcds]')."""


@tpcds.command("gen")
@click.option("--sf", "scale_factor", type=float, default=0.01, show_default=True, help="Scale factor.")
@click.option("--database", default="tpcds", show_default=True,
              help="Database to register the tables in (not default: TPC-H's customer table is there).")
@planning_options
@click.pass_context
def tpcds_gen(ctx, scale_factor, database, settings: Settings):
    """Generate TPC-DS as parquet with tpcgen-cli and register its 24 tables."""
    home = home_dir(ctx)
    err = Console(stderr=True)
    with err.status(f"generating TPC-DS at SF {scale_factor:g}…"):
        entries = generate_tpcds(RunContext(home, settings), scale_factor, database)
    err.print(f"registered {len(entries)} tables in database {database!r} from {Path(entries[0].path).parent}")


@tpch.command("query")
@click.argument("number", type=click.IntRange(1, 22))
@click.option("--order", type=click.Choice(["written", "worst"]), default="written", show_default=True,
              help="'worst': the FROM list reordered to the connected order the cost model prices highest "
                   "(needs the tables' statistics: aipq stats collect).")
@click.pass_context
def tpch_query(ctx, number, order):
    """Print the text of TPC-H query NUMBER."""
    if order == "written":
        click.echo(query_text(number))
    else:
        click.echo(worst_order_tpch_query(RunContext(home_dir(ctx), Settings()), number))


@tpcds.command("query")
@click.argument("number", type=click.IntRange(1, 99))
@click.option("--database", default="tpcds", show_default=True, help="Database the query's tables are in.")
def tpcds_query(number, database):
    """Print TPC-DS query NUMBER in Hive's dialect (from DuckDB's tpcds extension); run it with aipq run tpcds:N."""
    click.echo(tpcds_query_text(number, database), nl=False)


@click.group()
def table():
    """Registered tables."""


@table.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="parquet", show_default=True)
@click.option("--partitioned-by", "partitioned_by", default="", metavar="COLUMNS",
              help="Data in Hive's layout: the partition columns of its col=value/ folders, outermost first.")
@planning_options
@click.pass_context
def table_add(ctx, name, path, fmt, partitioned_by, settings: Settings):
    """Register data at PATH as table NAME (or DATABASE.NAME)."""
    columns = tuple(c.strip().lower() for c in partitioned_by.split(",") if c.strip())
    entry, replaced = add_table(RunContext(home_dir(ctx), settings), name, path, fmt, columns)
    verb = "replaced" if replaced else "registered"
    parts = f", {len(entry.partitions)} partitions" if entry.partitioned else ""
    Console(stderr=True).print(f"{verb} {entry.qualified_name} ({len(entry.columns)} columns{parts}, {fmt}) → "
                               f"{entry.path}")


@table.command("list")
@click.option("--json", "as_json", is_flag=True)
@planning_options
@click.pass_context
def table_list(ctx, as_json, settings: Settings):
    """List the tables: aipq's registered ones, or a Hive metastore's when Spark is configured for one."""
    entries = registering_catalog(RunContext(home_dir(ctx), settings)).entries()
    if as_json:
        click.echo(json.dumps([{"database": e.database, "name": e.name, "path": e.path, "format": e.format,
                                "columns": [list(c) for c in e.columns]} for e in entries], indent=2))
        return
    from rich.table import Table

    listing = Table(title=f"{len(entries)} table(s)")
    for column in ("database", "table", "format", "columns", "path"):
        listing.add_column(column)
    for e in entries:
        listing.add_row(e.database, e.name, e.format, str(len(e.columns)), e.path)
    Console().print(listing)


@table.command("drop")
@click.argument("name")
@planning_options
@click.pass_context
def table_drop(ctx, name, settings: Settings):
    """Forget a registration: the data files of an external table stay; a Hive metastore's MANAGED table's
    files are deleted by the metastore, as its DROP TABLE does."""
    catalog = registering_catalog(RunContext(home_dir(ctx), settings))
    entry = catalog.lookup(name)
    managed = catalog.deletes_files_on_drop(name)
    if not catalog.drop(name):
        raise BadInputError(f"no registered table {name!r}", hint="see `aipq table list`")
    if managed is not None:
        Console(stderr=True).print(f"dropped {name} and deleted its files at {managed} (a managed table)")
    else:
        kept = f" at {entry.path}" if entry is not None and entry.source != "spark" else ""
        Console(stderr=True).print(f"dropped {name}; its files{kept} are kept (an external table)")


@click.command()
@click.option("--mb", "megabytes", type=click.IntRange(4, 4096), default=64, show_default=True,
              help="Size of the measured data (larger: steadier figures, longer).")
@click.option("--runs", type=click.IntRange(1, 20), default=3, show_default=True, help="Timed runs per figure.")
@planning_options
@click.pass_context
def calibrate(ctx, megabytes, runs, settings: Settings):
    """Measure the benefit model's unit costs on the session's master (this machine, or a cluster with --master)
    and keep them, per master, for strategy adaptive."""
    from rich.table import Table

    from aipq.engine.calibrate import measure
    from aipq.estimator.parameters import (
        DEFAULT_BUILD_SECONDS_PER_ROW,
        DEFAULT_PROBE_SECONDS_PER_ROW,
        DEFAULT_UNIT_COSTS,
        save_calibration,
    )

    home = home_dir(ctx)
    err = Console(stderr=True)
    with err.status(f"measuring read, write, shuffle, byte, probe and build costs on {megabytes} MB…"):
        costs, probe, build = measure(RunContext(home, settings), megabytes, runs)
    path = save_calibration(home, settings.master, costs, probe, build)
    table = Table(title="unit costs (seconds)")
    for column in ("cost", "measured", "default"):
        table.add_column(column, justify="right" if column != "cost" else "left")
    names = {"c_read": "C_R per page", "c_write": "C_W per page", "c_transfer": "C_T per page",
             "u_read": "U_R per byte", "u_write": "U_W per byte", "u_transfer": "U_T per byte",
             "c_sort": "C_S per page"}
    for field_name, label in names.items():
        table.add_row(label, f"{getattr(costs, field_name):.3g}", f"{getattr(DEFAULT_UNIT_COSTS, field_name):.3g}")
    table.add_row("probe per row", f"{probe:.3g}", f"{DEFAULT_PROBE_SECONDS_PER_ROW:.3g}")
    table.add_row("build per row", f"{build:.3g}", f"{DEFAULT_BUILD_SECONDS_PER_ROW:.3g}")
    Console().print(table)
    err.print(f"saved to {path}; strategy adaptive uses these from now on")
