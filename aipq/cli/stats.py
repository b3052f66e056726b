"""``aipq stats …``: what the statistics repository knows, explicit collection, and forgetting."""

from __future__ import annotations

import json
import time

import click
from rich.console import Console
from rich.table import Table

from aipq.catalog import TableEntry
from aipq.cli.options import home_dir, planning_options
from aipq.cli.render import format_size
from aipq.config import Settings
from aipq.data import registering_catalog
from aipq.engine.context import RunContext
from aipq.engine.storage import Storage
from aipq.errors import BadInputError
from aipq.stats.fingerprint import data_files
from aipq.stats.repository import StatsRepository, TableStats
from aipq.stats.sketches import relative_standard_error


@click.group()
def stats():
    """Statistics collected in passing by earlier queries (the benefit estimator's inputs)."""


def _entry(context: RunContext, name: str) -> TableEntry:
    """TABLE in the catalog of record (a Hive metastore when the settings configure one)."""
    entry = registering_catalog(context).lookup(name)
    if entry is None:
        raise BadInputError(f"no registered table {name!r}", hint="see `aipq table list`")
    return entry


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else ""


def stats_dict(table: TableStats, storage: Storage) -> dict:
    values = table.public()
    values["current"] = data_files(storage, table.path).fingerprint == table.fingerprint
    for column in values["columns"].values():
        column["rse"] = round(relative_standard_error(column["lg_k"]), 5)
    return values


@stats.command("show")
@click.argument("table", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (with stage-output statistics).")
@planning_options
@click.pass_context
def stats_show(ctx, table, as_json, settings: Settings):
    """Statistics per table (or one TABLE): rows, bytes, per column NDV, width, nulls, min/max, provenance."""
    home = home_dir(ctx)
    repository = StatsRepository(home)
    storage = RunContext(home).storage
    if table:
        entry = _entry(RunContext(home, settings), table)
        found = repository.table(entry.path)
        tables = [found] if found else []
    else:
        tables = repository.tables()
    if as_json:
        payload = {"tables": [stats_dict(t, storage) for t in tables]}
        if not table:
            payload["stages"] = [s.__dict__ for s in repository.stages()]
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    console = Console()
    if not tables:
        console.print("no statistics yet: they are collected as queries run (or `aipq stats collect TABLE`)")
        return
    for t in tables:
        current = data_files(storage, t.path).fingerprint == t.fingerprint
        title = (f"{t.name}: {t.rows:,} rows, {format_size(t.bytes)} in {t.files} file(s), {t.splits} split(s)"
                 + ("" if current else " — STALE: the data changed since; not used"))
        listing = Table(title=title, caption=f"path {t.path}")
        for column in ("column", "type", "NDV (±RSE)", "width B", "nulls", "min", "max", "collected", "by"):
            listing.add_column(column, justify="right" if column in ("NDV (±RSE)", "width B", "nulls") else "left")
        for c in sorted(t.columns.values(), key=lambda c: c.column):
            listing.add_row(c.column, c.data_type, f"{c.ndv:,.0f} (±{relative_standard_error(c.lg_k):.1%})",
                            f"{c.width:g}", f"{c.nulls:,}", c.min_value or "", c.max_value or "",
                            _when(c.collected_at), c.collected_by)
        console.print(listing)


@stats.command("collect")
@click.argument("table")
@click.option("--columns", default="", help="Comma-separated columns (default: all).")
@planning_options
@click.pass_context
def stats_collect(ctx, table, columns, settings: Settings):
    """Collect statistics on TABLE now, in one pass over it (like ANALYZE TABLE)."""
    from aipq.engine.statistics import collect_table

    home = home_dir(ctx)
    entry = _entry(RunContext(home, settings), table)
    known = {name for name, _ in entry.columns}
    wanted = [c.strip().lower() for c in columns.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in known]
    if unknown:
        raise BadInputError(f"table {entry.qualified_name} has no column {unknown[0]!r}",
                            hint=f"its columns: {', '.join(sorted(known))}")
    err = Console(stderr=True)
    with err.status(f"collecting statistics on {entry.qualified_name}…"):
        started = time.perf_counter()
        found = collect_table(RunContext(home, settings), entry, wanted or None, "aipq stats collect")
    if found is None:
        raise BadInputError(f"the data of {entry.qualified_name} changed while it was read", hint="run it again")
    err.print(f"collected {entry.qualified_name}: {found.rows:,} rows, {len(found.columns)} column(s) "
              f"in {time.perf_counter() - started:.1f} s")


@stats.command("clear")
@click.argument("table", required=False)
@planning_options
@click.pass_context
def stats_clear(ctx, table, settings: Settings):
    """Forget the statistics of TABLE (or of everything)."""
    home = home_dir(ctx)
    repository = StatsRepository(home)
    path = _entry(RunContext(home, settings), table).path if table else None
    count = repository.clear(path)
    Console(stderr=True).print(f"forgot statistics of {count} table(s)")
