"""``aipq cache …``: what the stage-output cache holds (``run --reuse``), and emptying it."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import click
from rich.console import Console
from rich.table import Table

from aipq.cli.options import home_dir, planning_options
from aipq.cli.render import format_size
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.stage_cache import StageCache


@click.group()
def cache():
    """Stage outputs kept for later runs of the same subplans over the same data (run --reuse)."""


def _cache(ctx, settings: Settings) -> StageCache:
    context = RunContext(home_dir(ctx), settings)
    found = context.stage_cache
    if found is None:
        raise click.UsageError("--cache-size 0 turns the stage-output cache off")
    return found


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else ""


@cache.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@planning_options
@click.pass_context
def cache_show(ctx, as_json, settings: Settings):
    """The cached stage outputs, most recently used first: stage, rows, size, tables read, when kept and used."""
    stage_cache = _cache(ctx, settings)
    entries = sorted(stage_cache.entries().values(), key=lambda e: e.used, reverse=True)
    total = sum(e.bytes for e in entries)
    if as_json:
        click.echo(json.dumps({"root": stage_cache.root, "limit_bytes": stage_cache.limit, "bytes": total,
                               "entries": [asdict(e) for e in entries]}, indent=2))
        return
    console = Console()
    if not entries:
        console.print(f"the stage-output cache at {stage_cache.root} is empty")
        return
    listing = Table(title=f"stage-output cache: {len(entries)} output(s), {format_size(total)} of "
                          f"{format_size(stage_cache.limit)}", caption=stage_cache.root)
    for column in ("key", "stage", "rows", "size", "tables", "kept", "last used"):
        listing.add_column(column, justify="right" if column in ("rows", "size") else "left")
    for entry in entries:
        listing.add_row(entry.key[:12], entry.description, f"{entry.rows:,}", format_size(entry.bytes),
                        ", ".join(path.rstrip("/").rsplit("/", 1)[-1] for path in entry.tables),
                        _when(entry.created), _when(entry.used))
    console.print(listing)


@cache.command("clear")
@planning_options
@click.pass_context
def cache_clear(ctx, settings: Settings):
    """Remove every cached stage output (but those a running command reads)."""
    stage_cache = _cache(ctx, settings)
    count, in_use = stage_cache.clear()
    busy = f"; kept {in_use} that a running command uses" if in_use else ""
    Console(stderr=True).print(f"removed {count} cached stage output(s) from {stage_cache.root}{busy}")
