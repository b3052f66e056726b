"""``aipq bench …``: the benchmarks whose numbers docs/benchmarks.md quotes, each rerunnable with one command."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console

from aipq import app
from aipq.cli.bench_render import batch_report, batch_table, staging_table, strategy_table
from aipq.cli.options import home_dir, planning_options
from aipq.config import MB, PLANS, STRATEGIES, Settings
from aipq.engine.context import RunContext
from aipq.errors import BadInputError, EnvironmentProblem
from aipq.setting_aliases import alias_for, apply_alias

TPCH_JOIN_HEAVY = "2,3,5,7,8,9,10,11,18,21"
DEFAULT_STRATEGIES = "off,hip,always,adaptive,oracle,spark"
DOC_BEGIN, DOC_END = "<!-- aipq bench all: begin -->", "<!-- aipq bench all: end -->"


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
        if not isinstance(param, click.Option) or param.name not in ctx.params:
            continue
        if ctx.get_parameter_source(param.name) in (ParameterSource.DEFAULT, None):
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


def _strategies(text: str) -> list[str]:
    from aipq.bench.strategies import OFF_AGAIN, SPARK_ANCHORS, STAGINGS, series_parts, series_settings

    chosen = [s.strip() for s in text.split(",") if s.strip()]
    known = (*STRATEGIES, *SPARK_ANCHORS, OFF_AGAIN)

    def valid(series: str) -> bool:
        strategy, staging, plan = series_parts(series)
        if strategy not in known:
            return False
        overrides = series_settings(series)
        if strategy in SPARK_ANCHORS and (staging or plan or overrides):
            return False
        for key, value in overrides:
            try:
                if alias_for(key) is None:
                    return False
                apply_alias(Settings(), key, value)
            except (ValueError, BadInputError):
                return False
        return (staging is None or staging in STAGINGS) and (plan is None or plan in PLANS)

    unknown = [s for s in chosen if not valid(s)]
    if unknown:
        raise BadInputError(f"unknown strategy {unknown[0]!r}",
                            hint=f"use {', '.join(known)}; an aipq strategy may name its staging and join "
                                 f"order, and settings: adaptive@{'|'.join(STAGINGS)}/{'|'.join(PLANS)}"
                                 "+aipq.SETTING=VALUE, and +prior=none to start each run with no statistics")
    if not chosen:
        raise BadInputError("--strategies is empty", hint=f"use some of {', '.join(known)}")
    return chosen


def _numbers(text: str, option: str, kind=int) -> list:
    try:
        values = [kind(part) for part in re.split(r"[,\s]+", text.strip()) if part]
    except ValueError:
        raise BadInputError(f"{option} {text!r} is not a comma-separated list of numbers",
                            hint=f"for example {option} 3,5,9") from None
    if not values:
        raise BadInputError(f"{option} is empty")
    return values


def _query_numbers(queries: str, benchmark: str, last: int) -> list[int]:
    numbers = _numbers(queries, "--queries")
    bad = [n for n in numbers if not 1 <= n <= last]
    if bad:
        raise BadInputError(f"there is no {benchmark} query {bad[0]}", hint=f"query numbers run from 1 to {last}")
    return numbers


ALL_PARTS = ("tpch", "synthetic", "stats", "decisions")  # the parts of `aipq bench all`, in document order


def _thresholds(joins: str, settings: Settings) -> list[int]:
    broadcast = settings.broadcast_threshold or 10 * MB
    return {"both": [0, broadcast], "repartition": [0], "broadcast": [broadcast]}[joins]


@contextmanager
def progress_bar(label: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar over a whole benchmark on a terminal (nothing otherwise); yields the step function."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("runs", total=total)
        yield lambda: progress.advance(task)


def _run_strategies(home: Path, workload, strategies: list[str], thresholds: list[int], repeat: int,
                    settings: Settings, label: str, min_run_seconds: float = 0.0):
    from aipq.bench.strategies import compare_strategies

    runs = len(workload) * len(thresholds) * len(strategies) * (repeat + _warmup_rounds())
    settings = paper_settings_unless_given(settings, staging="hive")
    with progress_bar(label, runs) as step:
        return compare_strategies(RunContext(home, settings), workload, strategies, thresholds, repeat, step,
                                  min_run_seconds=min_run_seconds)


def paper_settings_unless_given(settings: Settings, **paper: str) -> Settings:
    """``settings`` with the paper's value of each knob in ``paper`` that the command line did not give.
    Benchmarks are defined on the paper's Hive setting (a series named without ``@STAGING`` runs hive staging),
    while ``aipq run`` defaults to adaptive information passing and staging."""
    ctx = click.get_current_context(silent=True)
    chosen = {name: value for name, value in paper.items()
              if ctx is None or ctx.get_parameter_source(name) in (None, ParameterSource.DEFAULT)}
    return replace(settings, **chosen)


def _warmup_rounds() -> int:
    """Untimed rounds before a strategy benchmark's timed ones (imported late: the module loads PySpark)."""
    from aipq.bench.strategies import WARMUP_ROUNDS

    return WARMUP_ROUNDS


def _context(title: str, command: str, settings: Settings, home: Path, **parameters):
    from aipq.bench.report import BenchContext, describe_machine, today

    machine = describe_machine(RunContext(home, settings).spark)
    return BenchContext(title, command, machine, today(), {**parameters, "settings": settings.knob_values()})


def _finish(results, context, out_dir: Path | None, synthetic: bool) -> None:
    from aipq.bench.report import write_outputs

    Console().print(strategy_table(results, context.title))
    if out_dir is not None:
        written = write_outputs(out_dir, context, results, synthetic=synthetic)
        Console(stderr=True).print(f"wrote {', '.join(p.name for p in written)} to {out_dir}")


strategy_options = [
    click.option("--strategies", default=DEFAULT_STRATEGIES, show_default=True,
                 help="Comma-separated: off, hip, always, adaptive, oracle (aipq strategies, with --staging; "
                      "STRATEGY@hive|adaptive|none names the staging too, e.g. adaptive@adaptive), spark (plain "
                      "spark.sql), spark-bf (spark.sql with its runtime Bloom filter forced to fire) and "
                      "off-again (off's plan as a series of its own: how far identical runs differ)."),
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


def with_strategy_options(fn):
    for option in reversed(strategy_options):
        fn = option(fn)
    return fn


@bench.command("tpch")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default="3,5,9", show_default=True,
              help=f"TPC-H query numbers, comma-separated (the join-heavy set: {TPCH_JOIN_HEAVY}).")
@skew_option
@with_strategy_options
@planning_options
@click.pass_context
def bench_tpch(ctx, scale_factor, queries, skew, strategies, repeat, min_run_seconds, joins, out_dir,
               settings: Settings):
    """TPC-H under each information passing strategy and spark.sql: time, shuffle, pruning; rows checked equal."""
    run_tpch_bench(home_dir(ctx), scale_factor, queries, strategies, repeat, joins, out_dir, settings,
                   invocation(ctx), min_run_seconds, skew)


def prepare_tpch(home: Path, scale_factor: float, settings: Settings, skew: float | None) -> None:
    """TPC-H generated (or found) and registered in the default database, Zipf-skewed with ``skew``."""
    if skew is None:
        app.generate_tpch(home, scale_factor, "default")
    else:
        app.generate_skewed_tpch(RunContext(home, settings), scale_factor, skew, "default")


def run_tpch_bench(home: Path, scale_factor: float, queries: str, strategies: str, repeat: int, joins: str,
                   out_dir: Path | None, settings: Settings, command: str, min_run_seconds: float = 0.0,
                   skew: float | None = None):
    from aipq.bench.strategies import tpch_workload

    numbers = _query_numbers(queries, "TPC-H", 22)
    chosen = _strategies(strategies)
    with Console(stderr=True).status(f"preparing TPC-H SF {scale_factor:g}…"):
        prepare_tpch(home, scale_factor, settings, skew)
    name = "TPC-H" if skew is None else f"TPC-H skewed (Zipf {skew:g})"
    return _strategy_bench(home, name, scale_factor, tpch_workload(numbers), chosen, repeat, joins, out_dir,
                           settings, command, min_run_seconds)


def _strategy_bench(home: Path, benchmark: str, scale_factor: float, workload, chosen: list[str], repeat: int,
                    joins: str, out_dir: Path | None, settings: Settings, command: str, min_run_seconds: float):
    """A benchmark's queries under each strategy and spark.sql, reported and written to ``out_dir``."""
    results = _run_strategies(home, workload, chosen, _thresholds(joins, settings), repeat, settings,
                              f"bench {benchmark.lower().replace('-', '')}", min_run_seconds)
    context = _context(f"{benchmark} SF {scale_factor:g}: information passing strategies (median of {repeat})",
                       command, settings, home, scale_factor=scale_factor, repeat=repeat,
                       warmup_rounds=_warmup_rounds(), min_run_seconds=min_run_seconds)
    _finish(results, context, out_dir, synthetic=False)
    return results


# The join-heavy queries whose FROM list has a bad-order variant (Q2's and Q11's have none: tpch query --order).
REORDER_QUERIES = "3,5,7,8,9,10,18,21"
REORDER_SERIES = "off,off-again,off/bushy,off/cost,adaptive@adaptive,adaptive@adaptive/cost,spark"


@bench.command("reopt")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default=REORDER_QUERIES, show_default=True,
              help="TPC-H query numbers: each runs as written and in its worst connected order.")
@skew_option
@with_strategy_options
@planning_options
@click.pass_context
def bench_reopt(ctx, scale_factor, queries, skew, strategies, repeat, min_run_seconds, joins, out_dir,
                settings: Settings):
    """Join orders: TPC-H as written and written in a bad order, under the written order (linear), bushy and
    --plan cost (series STRATEGY[@STAGING]/PLAN), with the tables' statistics collected first."""
    from aipq.bench.strategies import reorder_workload

    if ctx.get_parameter_source("strategies") == ParameterSource.DEFAULT:
        strategies = REORDER_SERIES
    home = home_dir(ctx)
    numbers = _query_numbers(queries, "TPC-H", 22)
    chosen = _strategies(strategies)
    err = Console(stderr=True)
    with err.status(f"preparing TPC-H SF {scale_factor:g} and its statistics…"):
        prepare_tpch(home, scale_factor, settings, skew)
        workload = reorder_workload(RunContext(home, settings), numbers)
    title = "TPC-H join orders" if skew is None else f"TPC-H join orders, skewed (Zipf {skew:g})"
    _strategy_bench(home, title, scale_factor, workload, chosen, repeat, joins, out_dir, settings,
                    invocation(ctx), min_run_seconds)


# TPC-DS queries joining a sales table with its returns or several dimensions, where summaries can act.
TPCDS_JOIN_HEAVY = "17,25,29,50,72,85"


@bench.command("tpcds")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default=TPCDS_JOIN_HEAVY, show_default=True,
              help="TPC-DS query numbers (1 to 99), comma-separated.")
@with_strategy_options
@planning_options
@click.pass_context
def bench_tpcds(ctx, scale_factor, queries, strategies, repeat, min_run_seconds, joins, out_dir, settings: Settings):
    """TPC-DS (needs aipq[tpcds]) under each strategy and spark.sql, as bench tpch."""
    from aipq.bench.strategies import tpcds_workload

    home = home_dir(ctx)
    numbers = _query_numbers(queries, "TPC-DS", 99)
    chosen = _strategies(strategies)
    with Console(stderr=True).status(f"preparing TPC-DS SF {scale_factor:g}…"):
        app.generate_tpcds(RunContext(home, settings), scale_factor, "tpcds")
    _strategy_bench(home, "TPC-DS", scale_factor, tpcds_workload(numbers), chosen, repeat, joins, out_dir, settings,
                    invocation(ctx), min_run_seconds)


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
def bench_synthetic(ctx, ratios, rows, queries, strategies, repeat, min_run_seconds, joins, out_dir,
                    settings: Settings):
    """The paper's synthetic reference-ratio benchmark (its Figs. 7–8) under each strategy."""
    run_synthetic_bench(home_dir(ctx), ratios, rows, queries, strategies, repeat, joins, out_dir, settings,
                        invocation(ctx), min_run_seconds)


def run_synthetic_bench(home: Path, ratios: str, rows: int, queries: str, strategies: str, repeat: int,
                        joins: str, out_dir: Path | None, settings: Settings, command: str,
                        min_run_seconds: float = 0.0):
    from aipq.bench import synthetic
    from aipq.bench.strategies import BenchQuery

    values = _numbers(ratios, "--ratios", float)
    names = [q.strip().lower() for q in queries.split(",") if q.strip()]
    unknown = [n for n in names if n not in synthetic.QUERIES]
    if unknown or not names:
        raise BadInputError(f"unknown synthetic query {(unknown or [''])[0]!r}",
                            hint=f"use {', '.join(synthetic.QUERIES)}")
    chosen = _strategies(strategies)
    with Console(stderr=True).status(f"preparing synthetic tables ({rows:,} rows, ratios {ratios})…"):
        for ratio in values:
            synthetic.generate(RunContext(home, settings), ratio, rows)
    workload = [BenchQuery(f"{name} @ {ratio:g}", synthetic.query_text(name, ratio), ratio)
                for name in names for ratio in values]
    thresholds = _thresholds(joins, settings)
    results = _run_strategies(home, workload, chosen, thresholds, repeat, settings, "bench synthetic",
                              min_run_seconds)
    context = _context(f"Synthetic reference ratios, {rows:,} rows per table (median of {repeat})",
                       command, settings, home, rows=rows, ratios=values, repeat=repeat,
                       warmup_rounds=_warmup_rounds(), min_run_seconds=min_run_seconds)
    _finish(results, context, out_dir, synthetic=True)
    return results


@bench.command("stats")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default="3,5,9,10", show_default=True, help="TPC-H query numbers.")
@click.option("--lg-k", "lg_ks", default="8,10,12,14", show_default=True,
              help="HyperLogLog precisions to compare (4–21).")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Timed runs per setting (after one warm-up run).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json, report.md and statistics.png here.")
@planning_options
@click.pass_context
def bench_stats(ctx, scale_factor, queries, lg_ks, repeat, out_dir, settings: Settings):
    """Cost of piggybacked statistics per lg_k, and NDV accuracy against exact counts (the paper's Figs. 11–12)."""
    run_stats_bench(home_dir(ctx), scale_factor, queries, lg_ks, repeat, out_dir, settings, invocation(ctx))


def run_stats_bench(home: Path, scale_factor: float, queries: str, lg_ks: str, repeat: int, out_dir: Path | None,
                    settings: Settings, command: str):
    from aipq.bench.stats import measure_collection
    from aipq.cli.bench_render import stats_overhead_table
    from aipq.tpch.queries import query_text

    numbers = _numbers(queries, "--queries")
    precisions = _numbers(lg_ks, "--lg-k")
    settings = paper_settings_unless_given(settings, ip="off", staging="hive")
    bad = [k for k in precisions if not 4 <= k <= 21]
    if bad:
        raise BadInputError(f"lg_k {bad[0]} is outside 4–21", hint="for example --lg-k 8,10,12,14")
    err = Console(stderr=True)
    with err.status(f"preparing TPC-H SF {scale_factor:g}…"):
        app.generate_tpch(home, scale_factor, "default")
    workload = [(f"Q{n}", query_text(n)) for n in numbers]
    with progress_bar("bench stats", len(numbers) * (len(precisions) + 1) * (repeat + 1)) as step:
        overheads, errors = measure_collection(home, workload, precisions, repeat, settings, step)
    context = _context(f"TPC-H SF {scale_factor:g}: cost and accuracy of piggybacked statistics "
                       f"(median of {repeat})", command, settings, home, scale_factor=scale_factor, repeat=repeat)
    Console().print(stats_overhead_table(overheads, errors, context.title))
    if out_dir is not None:
        from aipq.bench.report import write_stats_outputs

        written = write_stats_outputs(out_dir, context, overheads, errors)
        err.print(f"wrote {', '.join(p.name for p in written)} to {out_dir}")


@bench.command("decisions")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
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
def bench_decisions(ctx, scale_factor, queries, repeat, tolerance, joins, out_dir, settings: Settings):
    """Decision accuracy: each candidate edge's decision reversed in adaptive's own plan, timed against it."""
    run_decision_bench(home_dir(ctx), scale_factor, queries, repeat, tolerance, out_dir, settings,
                       invocation(ctx), joins)


def run_decision_bench(home: Path, scale_factor: float, queries: str, repeat: int, tolerance: float,
                       out_dir: Path | None, settings: Settings, command: str, joins: str = "both"):
    from rich.table import Table

    from aipq.bench.decisions import accuracy, measure_decisions
    from aipq.bench.steal import StealTally
    from aipq.tpch.queries import query_text

    numbers = _numbers(queries, "--queries")
    err = Console(stderr=True)
    with err.status(f"preparing TPC-H SF {scale_factor:g}…"):
        app.generate_tpch(home, scale_factor, "default")
    workload = [(f"Q{n}", query_text(n)) for n in numbers]
    thresholds = _thresholds(joins, settings)
    settings = paper_settings_unless_given(settings, staging="hive")
    with progress_bar("bench decisions", len(workload) * (repeat + 1) * len(thresholds)) as step:
        steal = StealTally()
        edges = measure_decisions(home, workload, repeat, settings, step, thresholds, steal)
    share = accuracy(edges, tolerance)
    title = f"TPC-H SF {scale_factor:g}: benefit estimator decisions (median of {repeat})"
    table = Table(title=title, caption=f"accuracy {share.by_sign:.0%} by sign, {share.within_noise:.0%} within "
                                       f"noise ({tolerance:.0%}), {share.where_clear:.0%} where the runs separate, "
                                       f"over {len(edges)} edges")
    for column in ("query", "joins", "summary", "target", "est. B s", "decision", "measured s", "right"):
        table.add_column(column)
    for e in edges:
        row = e.as_dict(tolerance)
        table.add_row(row["query"], row["joins"], row["summary"], row["target"], f"{row['estimated_benefit']:.4f}",
                      row["decision"], f"{row['measured_benefit']:+.3f}", row["verdict"])
    Console().print(table)
    if out_dir is not None:
        from aipq.bench.report import write_decision_outputs

        context = _context(title, command, settings, home, scale_factor=scale_factor, repeat=repeat)
        written = write_decision_outputs(out_dir, context, edges, tolerance, steal)
        err.print(f"wrote {', '.join(p.name for p in written)} to {out_dir}")
    return edges


@bench.command("all")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
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
def bench_all(ctx, scale_factor, queries, ratios, rows, doc, only, strategies, repeat, min_run_seconds, joins, out_dir,
              settings: Settings):
    """Every benchmark behind docs/benchmarks.md: TPC-H strategies, synthetic ratios, statistics cost and (with
    adaptive among the strategies) decision accuracy, with plots next to the document."""
    home = home_dir(ctx)
    out_dir = out_dir or doc.parent / "bench"
    command = invocation(ctx)
    chosen = [p.strip() for p in only.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(ALL_PARTS))
    if unknown:
        raise BadInputError(f"--only: unknown benchmark(s) {', '.join(unknown)}",
                            hint=f"choose from {', '.join(ALL_PARTS)}")
    if "tpch" in chosen:
        run_tpch_bench(home, scale_factor, queries, strategies, repeat, joins, out_dir / "tpch", settings, command,
                       min_run_seconds)
    if "synthetic" in chosen:
        run_synthetic_bench(home, ratios, rows, "query1,query2", strategies, repeat, joins, out_dir / "synthetic",
                            settings, command, min_run_seconds)
    if "stats" in chosen:
        run_stats_bench(home, scale_factor, "3,5,9,10", "8,10,12,14", repeat, out_dir / "stats", settings, command)
    if "decisions" in chosen and "adaptive" in strategies:
        run_decision_bench(home, scale_factor, queries, repeat, 0.03, out_dir / "decisions", settings, command,
                           joins)
    splice_reports(doc, out_dir, [p for p in ALL_PARTS if (out_dir / p / "report.md").exists()])
    Console(stderr=True).print(f"updated {doc}")


def splice_reports(doc: Path, out_dir: Path, parts: list[str]) -> None:
    """Replace the document's generated section (between the markers, appended if missing) with the reports,
    their image links made relative to the document."""
    sections = []
    for part in parts:
        report = (out_dir / part / "report.md").read_text()
        relative = _relative(out_dir / part, doc.parent)
        sections.append(report_summary(report, relative))
    generated = "\n".join([DOC_BEGIN, "", *[s + "\n" for s in sections], DOC_END])
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if DOC_BEGIN in text and DOC_END in text:
        before, rest = text.split(DOC_BEGIN, 1)
        after = rest.split(DOC_END, 1)[1]
        text = before + generated + after
    else:
        text = text.rstrip() + "\n\n" + generated + "\n"
    partial = doc.with_name(doc.name + ".partial")
    partial.write_text(text)
    partial.replace(doc)


def report_summary(report: str, relative: str) -> str:
    """A report's entry in the document: its title and the lines saying how it was made, its plots, and a link
    to its full tables (the document stays a page a reader can take in)."""
    lines = report.strip().splitlines()
    head = [lines[0]] if lines else []
    for line in lines[1:]:
        if line.startswith(("Command:", "Machine:", "Date:", "Commit:")) or (not line.strip() and len(head) == 1):
            head.append(line)
        elif len(head) > 1:
            break
    plots = [f"![{alt}]({relative}/{name})" for alt, name in re.findall(r"!\[([^\]]*)\]\(([^)/]+)\)", report)]
    return "\n".join([*head, "", f"Full tables: [{relative}/report.md]({relative}/report.md)", "", *plots]).strip()


def _relative(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), start.resolve())


@bench.command("staging")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default="3,5,9", show_default=True, help="TPC-H query numbers, comma-separated.")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True, help="Timed runs per setting.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the raw timings here.")
@planning_options
@click.pass_context
def bench_staging(ctx, scale_factor, queries, repeat, json_path, settings: Settings):
    """aipq's staged run vs plain spark.sql, same session settings, with and without broadcast joins."""
    from aipq.bench.staging import compare_staging

    home = home_dir(ctx)
    numbers = _numbers(queries, "--queries")
    settings = paper_settings_unless_given(settings, ip="off", staging="hive")
    err = Console(stderr=True)
    with err.status(f"preparing TPC-H SF {scale_factor:g}…"):
        app.generate_tpch(home, scale_factor, "default")
    thresholds = [0, settings.broadcast_threshold or 10 * MB]
    total = len(numbers) * len(thresholds) * repeat
    done = [0]

    def tick():
        done[0] += 1
        err.print(f"[dim]{done[0]}/{total} timed pairs[/dim]")

    results = compare_staging(RunContext(home, settings), numbers, thresholds, repeat, tick)
    Console().print(staging_table(results, scale_factor, repeat))
    if json_path:
        json_path.write_text(json.dumps([r.__dict__ for r in results], indent=2))


@bench.command("batch")
@click.option("--sf", "scale_factor", type=float, default=1.0, show_default=True)
@click.option("--queries", default=",".join(str(n) for n in range(1, 23)), show_default=True,
              help="TPC-H query numbers, comma-separated.")
@click.option("--repeat", type=click.IntRange(1), default=2, show_default=True,
              help="Timed rounds (after one warm-up round).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write results.json and report.md here.")
@planning_options
@click.pass_context
def bench_batch(ctx, scale_factor, queries, repeat, out_dir, settings: Settings):
    """TPC-H's queries as one batch (aipq run FILE...) against one by one, in one session and as separate aipq
    commands: time, bytes read, bytes shuffled."""
    from aipq.bench.batch import MODES, measure_batches

    home = home_dir(ctx)
    numbers = _numbers(queries, "--queries")
    err = Console(stderr=True)
    with err.status(f"preparing TPC-H SF {scale_factor:g}…"):
        app.generate_tpch(home, scale_factor, "default")
    with progress_bar("bench batch", len(MODES) * (repeat + 1)) as step:
        results = measure_batches(RunContext(home, settings), numbers, repeat, step)
    context = _context(f"TPC-H SF {scale_factor:g}: {len(numbers)} queries as one batch and one by one "
                       f"(median of {repeat})", invocation(ctx), settings, home, scale_factor=scale_factor,
                       repeat=repeat, queries=numbers)
    Console().print(batch_table(results, context.title))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "results.json").write_text(json.dumps({**context.__dict__,
                                                          "modes": [r.as_dict() for r in results]}, indent=2))
        (out_dir / "report.md").write_text(batch_report(results, context))
        err.print(f"wrote results.json, report.md to {out_dir}")
