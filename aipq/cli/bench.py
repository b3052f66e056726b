"""``aipq bench …``: the benchmarks whose numbers docs/benchmarks.md quotes, each rerunnable with one command. The
options become a ``BenchRequest`` (``aipq/bench/suite.py`` runs it); its results are rendered here."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console

from aipq.bench.suite import (
    ALL_PARTS,
    DEFAULT_STRATEGIES,
    REORDER_QUERIES,
    REORDER_SERIES,
    TPCDS_JOIN_HEAVY,
    TPCH_JOIN_HEAVY,
    BenchRequest,
)
from aipq.cli.options import home_dir, planning_options
from aipq.config import Settings
from aipq.errors import EnvironmentProblem


@click.group()
def bench():
    """Benchmarks (numbers in docs/benchmarks.md come from these); needs the bench extra (pip install
    'aipq[bench]')."""
    if importlib.util.find_spec("matplotlib") is None:
        raise EnvironmentProblem("aipq bench needs the benchmark extra, which is not installed",
                                 hint="pip install 'aipq[bench]' (adds matplotlib for the plots)")


def invocation(ctx: click.Context) -> str:
    """The command as the user could type it again: the subcommand and every option given explicitly."""
    words = ["aipq", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name not in ctx.params or not _given(ctx, param.name):
            continue
        value = ctx.params[param.name]
        option = max(param.opts, key=len)
        if param.is_flag:
            words += [option] if value else []
        elif isinstance(value, (list, tuple)):
            for item in value:
                words += [option, str(item)]
        else:
            words += [option, str(value)]
    return " ".join(words)


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


@contextlib.contextmanager
def progress_bar(label: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar over a whole benchmark on a terminal (nothing otherwise); yields the step function."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("runs", total=total)
        yield lambda: progress.advance(task)


def _show(kind: str, results, title: str) -> None:
    from aipq.cli.bench_render import RENDERERS

    Console().print(RENDERERS[kind](results, title))


# ``aipq`` as a process of its own, for the benchmarks that time it as a user runs it (bench batch)
AIPQ_COMMAND = (sys.executable, "-m", "aipq.cli.main")


def request_from(ctx: click.Context, settings: Settings, **options) -> BenchRequest:
    """The benchmark the command line asks for, telling the person watching on stderr and stdout."""
    err = Console(stderr=True)
    given = frozenset(name for name in ctx.params if _given(ctx, name))
    return BenchRequest(home_dir(ctx), settings, invocation(ctx), given=given, status=err.status,
                        progress=progress_bar, show=_show, told=err.print, aipq_command=AIPQ_COMMAND, **options)


strategy_options = [
    click.option("--strategies", default=DEFAULT_STRATEGIES, show_default=True,
                 help="Comma-separated series: off, hip, always, adaptive, oracle (aipq strategies, with --staging; "
                      "STRATEGY@hive|adaptive|none names the staging too, e.g. adaptive@adaptive), spark (plain "
                      "spark.sql), spark-bf (spark.sql with its runtime Bloom filter forced to fire), and the A/A "
                      "controls off-again and spark-again (off's plan and spark.sql again: how far identical runs "
                      "differ)."),
    click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
                 help="Timed runs per strategy (after two warm-up runs)."),
    click.option("--min-run-seconds", type=click.FloatRange(0), default=0.0, show_default=True,
                 help="Run a query back to back within each timed run until the run lasts about this long "
                      "(at most 20 times; seconds per execution are reported), to average out a short query's "
                      "run-to-run noise. 0: once."),
    click.option("--joins", type=click.Choice(["both", "repartition", "broadcast"]), default="both",
                 show_default=True, help="Repartition joins only (the paper's setting), broadcast allowed, or both."),
    click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Write results.json, results.csv, report.md and PNG plots here."),
]

skew_option = click.option("--skew", type=float, default=None,
                           help="Zipf-skewed TPC-H (tpch gen --skew): orders' customers and lineitem's parts.")
scale_option = click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)


def with_strategy_options(fn):
    for option in reversed(strategy_options):
        fn = option(fn)
    return fn


@bench.command("tpch")
@scale_option
@click.option("--queries", default="3,5,9", show_default=True,
              help=f"TPC-H query numbers, comma-separated (the join-heavy set: {TPCH_JOIN_HEAVY}), or all.")
@skew_option
@with_strategy_options
@planning_options
@click.pass_context
def bench_tpch(ctx, settings: Settings, **options):
    """TPC-H under each information passing strategy and spark.sql: time, shuffle, pruning; rows checked equal."""
    from aipq.bench.suite import run_tpch

    run_tpch(request_from(ctx, settings, **options))


@bench.command("reopt")
@scale_option
@click.option("--queries", default=REORDER_QUERIES, show_default=True,
              help="TPC-H query numbers: each runs as written and in its worst connected order.")
@skew_option
@with_strategy_options
@planning_options
@click.pass_context
def bench_reopt(ctx, settings: Settings, **options):
    """Join orders: TPC-H as written and written in a bad order, under the written order (linear), bushy and
    --plan cost (series STRATEGY[@STAGING]/PLAN), with the tables' statistics collected first."""
    from aipq.bench.suite import run_reorder

    if not _given(ctx, "strategies"):
        options["strategies"] = REORDER_SERIES
    run_reorder(request_from(ctx, settings, **options))


@bench.command("tpcds")
@scale_option
@click.option("--queries", default=TPCDS_JOIN_HEAVY, show_default=True,
              help="TPC-DS query numbers (1 to 99), comma-separated, or all (the whole workload).")
@with_strategy_options
@planning_options
@click.pass_context
def bench_tpcds(ctx, settings: Settings, **options):
    """TPC-DS (needs aipq[tpcds]) under each strategy and spark.sql, as bench tpch."""
    from aipq.bench.suite import run_tpcds

    run_tpcds(request_from(ctx, settings, **options))


@bench.command("api")
@scale_option
@click.option("--queries", default="all", show_default=True, help="TPC-H query numbers, comma-separated, or all.")
@click.option("--workloads", default="trivial,tpch", show_default=True,
              help="trivial (SELECT 1 and counts of small tables: a call's fixed cost) and/or tpch (--queries).")
@click.option("--tables", type=click.Choice(["catalog", "views"]), default="catalog", show_default=True,
              help="Where aipq.sql finds the tables: aipq's catalog, or only the session's temporary views "
                   "(spark.sql reads the same files through the views either way).")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Timed rounds per query (after the warm-up rounds).")
@click.option("--warmup", type=click.IntRange(0), default=2, show_default=True, help="Untimed rounds per query.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json, results.csv, report.md, PNG plots and the session's log here.")
@planning_options
@click.pass_context
def bench_api(ctx, workloads, tables, warmup, settings: Settings, **options):
    """aipq.sql against spark.sql(q).collect() on one user SparkSession (started with aipq.spark_conf(), Spark's
    defaults otherwise), each call timed until its rows are read, interleaved with the A/A controls aipq-again
    and spark-again; rows checked equal. Planning knobs given here are passed to aipq.sql; --conf and --master
    start the user's session."""
    from aipq.bench.suite import run_api

    knobs = {name: str(value) for name, value in settings.knob_values().items() if _given(ctx, name)}
    extra = {"workloads": workloads, "tables": tables, "warmup": warmup, "options": knobs}
    run_api(request_from(ctx, settings, extra=extra, **options))


@bench.command("synthetic")
@click.option("--ratios", default="0.001,0.01,0.1,0.5", show_default=True,
              help="TableA reference ratios: the share of its rows whose key is in TableB and TableC.")
@click.option("--rows", type=click.IntRange(1), default=1_000_000, show_default=True,
              help="Rows per table (about 200 bytes each).")
@click.option("--queries", default="query1,query2", show_default=True,
              help="query1 (A⋈B, then ⋈C: child-to-parent) and/or query2 (A⋈B and B⋈C, then joined: siblings).")
@with_strategy_options
@planning_options
@click.pass_context
def bench_synthetic(ctx, ratios, rows, queries, settings: Settings, **options):
    """The paper's synthetic reference-ratio benchmark (its Figs. 7–8) under each strategy."""
    from aipq.bench.suite import run_synthetic

    extra = {"ratios": ratios, "rows": rows, "queries": queries}
    run_synthetic(request_from(ctx, settings, extra=extra, **options))


@bench.command("stats")
@scale_option
@click.option("--queries", default="3,5,9,10", show_default=True, help="TPC-H query numbers.")
@click.option("--lg-k", "lg_ks", default="8,10,12,14", show_default=True,
              help="HyperLogLog precisions to compare (4–21).")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Timed runs per setting (after one warm-up run).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json, report.md and statistics.png here.")
@planning_options
@click.pass_context
def bench_stats(ctx, lg_ks, settings: Settings, **options):
    """Cost of piggybacked statistics per lg_k, and NDV accuracy against exact counts (the paper's Figs. 11–12)."""
    from aipq.bench.suite import run_stats

    run_stats(request_from(ctx, settings, extra={"lg_ks": lg_ks}, **options))


@bench.command("decisions")
@scale_option
@click.option("--queries", default=TPCH_JOIN_HEAVY, show_default=True, help="TPC-H query numbers.")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Timed runs per edge and without (after one warm-up round).")
@click.option("--tolerance", type=click.FloatRange(0, 1), default=0.03, show_default=True,
              help="Time differences within this share of the query's time count as noise.")
@click.option("--joins", type=click.Choice(["both", "repartition", "broadcast"]), default="both",
              show_default=True, help="Repartition joins only (the paper's setting), broadcast allowed, or both.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json and report.md here.")
@planning_options
@click.pass_context
def bench_decisions(ctx, tolerance, settings: Settings, **options):
    """Decision accuracy: each candidate edge's decision reversed in adaptive's own plan, timed against it."""
    from aipq.bench.suite import run_decisions

    run_decisions(request_from(ctx, settings, extra={"tolerance": tolerance}, **options))


@bench.command("all")
@scale_option
@click.option("--queries", default=TPCH_JOIN_HEAVY, show_default=True, help="TPC-H query numbers.")
@click.option("--ratios", default="0.001,0.01,0.1,0.5", show_default=True, help="Synthetic reference ratios.")
@click.option("--rows", type=click.IntRange(1), default=1_000_000, show_default=True,
              help="Synthetic rows per table.")
@click.option("--doc", type=click.Path(dir_okay=False, path_type=Path), default=Path("docs/benchmarks.md"),
              show_default=True, help="Markdown file whose generated section is replaced.")
@click.option("--only", "only", default=",".join(ALL_PARTS), show_default=True,
              help="Which benchmarks to run again; the reports of the others already under --out are kept.")
@with_strategy_options
@planning_options
@click.pass_context
def bench_all(ctx, ratios, rows, doc, only, settings: Settings, **options):
    """Every benchmark behind docs/benchmarks.md: TPC-H strategies, synthetic ratios, statistics cost and (with
    adaptive among the strategies) decision accuracy, with plots next to the document."""
    from aipq.bench.suite import run_all

    request = request_from(ctx, settings, extra={"ratios": ratios, "rows": rows}, **options)
    run_all(request, [p.strip() for p in only.split(",") if p.strip()], doc)


@bench.command("estimates")
@scale_option
@click.option("--queries", default=",".join(str(n) for n in range(1, 23)), show_default=True,
              help="TPC-H query numbers, comma-separated.")
@planning_options
@click.pass_context
def bench_estimates(ctx, settings: Settings, **options):
    """How far each written stage's estimated rows are from its actual rows (q-error median, 90th percentile,
    max), over TPC-H under the Hive baseline with every table's statistics collected first."""
    from aipq.bench.suite import run_estimates

    run_estimates(request_from(ctx, settings, **options))


@bench.command("staging")
@scale_option
@click.option("--queries", default="3,5,9", show_default=True, help="TPC-H query numbers, comma-separated.")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True, help="Timed runs per setting.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the raw timings here.")
@planning_options
@click.pass_context
def bench_staging(ctx, json_path, settings: Settings, **options):
    """aipq's staged run vs plain spark.sql, same session settings, with and without broadcast joins."""
    from aipq.bench.suite import run_staging

    request = request_from(ctx, settings, extra={"json_path": json_path}, **options)
    run_staging(replace(request, show=lambda kind, results, title: _show(
        kind, results, f"{title}: aipq staged vs spark.sql (median of {request.repeat})")))


@bench.command("batch")
@scale_option
@click.option("--queries", default=",".join(str(n) for n in range(1, 23)), show_default=True,
              help="TPC-H query numbers, comma-separated.")
@click.option("--repeat", type=click.IntRange(1), default=2, show_default=True,
              help="Timed rounds (after one warm-up round).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json and report.md here.")
@planning_options
@click.pass_context
def bench_batch(ctx, settings: Settings, **options):
    """TPC-H's queries as one batch (aipq run FILE...) against one by one, in one session and as separate aipq
    commands: time, bytes read, bytes shuffled."""
    from aipq.bench.suite import run_batch

    run_batch(request_from(ctx, settings, **options))
