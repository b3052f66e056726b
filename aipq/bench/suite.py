"""The benchmarks behind docs/benchmarks.md, each one request in and results out: the data prepared, the series
run, the outputs written to ``--out``, and (``run_all``) the document's generated section replaced. The command
line (``cli/bench.py``) parses a request and renders what comes back through the request's ``show``."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from aipq.bench.series import parse_series
from aipq.catalog import Catalog
from aipq.config import MB, Settings
from aipq.data import generate_skewed_tpch, generate_tpcds, generate_tpch
from aipq.engine.context import RunContext
from aipq.errors import BadInputError
from aipq.explanation import stage_estimates
from aipq.workflow.query import execute

TPCH_JOIN_HEAVY = "2,3,5,7,8,9,10,11,18,21"
DEFAULT_STRATEGIES = "off,hip,always,adaptive,oracle,spark"
# The join-heavy queries whose FROM list has a bad-order variant (Q2's and Q11's have none: tpch query --order).
REORDER_QUERIES = "3,5,7,8,9,10,18,21"
REORDER_SERIES = "off,off-again,off/bushy,off/cost,adaptive@adaptive,adaptive@adaptive/cost,spark"
# TPC-DS queries joining a sales table with its returns or several dimensions, where summaries can act.
TPCDS_JOIN_HEAVY = "17,25,29,50,72,85"
ALL_PARTS = ("tpch", "synthetic", "stats", "decisions")  # the parts of `aipq bench all`, in document order
DOC_BEGIN, DOC_END = "<!-- aipq bench all: begin -->", "<!-- aipq bench all: end -->"


@contextlib.contextmanager
def _no_progress(label: str, total: int) -> Iterator[Callable[[], None]]:
    yield lambda: None


@dataclass(frozen=True)
class BenchRequest:
    """One benchmark as asked for: where, with which settings and options, and how to tell the person watching
    (``status`` while data is prepared, ``progress`` over the runs, ``show`` with each finished result)."""

    home: Path
    settings: Settings
    command: str  # the command as it could be typed again
    scale_factor: float = 1.0
    queries: str = "3,5,9"
    strategies: str = DEFAULT_STRATEGIES
    repeat: int = 3
    joins: str = "both"  # both | repartition | broadcast
    out_dir: Path | None = None
    min_run_seconds: float = 0.0
    skew: float | None = None
    given: frozenset[str] = frozenset()  # the knobs the command line gave (the paper's values fill the others)
    status: Callable[[str], contextlib.AbstractContextManager] = lambda text: contextlib.nullcontext()
    progress: Callable[[str, int], contextlib.AbstractContextManager] = _no_progress
    show: Callable[[str, object, str], None] = lambda kind, results, title: None
    told: Callable[[str], None] = lambda text: None
    extra: dict = field(default_factory=dict)  # a benchmark's own options (ratios, rows, lg_k, tolerance, …)
    aipq_command: tuple[str, ...] = ()  # starts aipq as a process of its own (bench batch): the command line's

    def paper_settings(self, **paper: str) -> Settings:
        """The settings with the paper's value of each knob in ``paper`` the command line did not give.
        Benchmarks are defined on the paper's Hive setting, while ``aipq run`` defaults to adaptive."""
        return replace(self.settings, **{k: v for k, v in paper.items() if k not in self.given})

    @property
    def context(self) -> RunContext:
        return RunContext(self.home, self.settings)


# ---- inputs --------------------------------------------------------------------------------------------------
def numbers(text: str, option: str, kind=int) -> list:
    try:
        values = [kind(part) for part in re.split(r"[,\s]+", text.strip()) if part]
    except ValueError:
        raise BadInputError(f"{option} {text!r} is not a comma-separated list of numbers",
                            hint=f"for example {option} 3,5,9") from None
    if not values:
        raise BadInputError(f"{option} is empty")
    return values


def query_numbers(queries: str, benchmark: str, last: int) -> list[int]:
    """``--queries``: numbers, comma-separated, or ``all`` (1 to ``last``: the whole workload)."""
    if queries.strip().lower() == "all":
        return list(range(1, last + 1))
    found = numbers(queries, "--queries")
    bad = [n for n in found if not 1 <= n <= last]
    if bad:
        raise BadInputError(f"there is no {benchmark} query {bad[0]}", hint=f"query numbers run from 1 to {last}")
    return found


def thresholds(joins: str, settings: Settings) -> list[int]:
    broadcast = settings.broadcast_threshold or 10 * MB
    return {"both": [0, broadcast], "repartition": [0], "broadcast": [broadcast]}[joins]


def prepare_tpch(request: BenchRequest) -> None:
    """TPC-H generated (or found) and registered in the default database, Zipf-skewed with ``skew``."""
    with request.status(f"preparing TPC-H SF {request.scale_factor:g}…"):
        if request.skew is None:
            generate_tpch(request.context, request.scale_factor, "default")
        else:
            generate_skewed_tpch(request.context, request.scale_factor, request.skew, "default")


def bench_context(request: BenchRequest, title: str, settings: Settings, **parameters):
    from aipq.bench.report import BenchContext, describe_machine, today

    machine = describe_machine(RunContext(request.home, settings).spark)
    return BenchContext(title, request.command, machine, today(),
                        {**parameters, "settings": settings.knob_values()})


def _written(request: BenchRequest, paths) -> None:
    request.told(f"wrote {', '.join(p.name for p in paths)} to {request.out_dir}")


# ---- the series benchmarks (TPC-H, TPC-DS, join orders, synthetic) -----------------------------------------------
def run_series(request: BenchRequest, benchmark: str, workload, title: str | None = None,
               synthetic: bool = False, **parameters):
    """A workload's queries under each series, reported through ``show`` and written to ``out_dir``."""
    from aipq.bench.report import write_outputs
    from aipq.bench.runner import WARMUP_ROUNDS, compare_strategies

    chosen = [s.name for s in parse_series(request.strategies)]
    limits = thresholds(request.joins, request.settings)
    settings = request.paper_settings(staging="hive")
    runs = len(workload) * len(limits) * len(chosen) * (request.repeat + WARMUP_ROUNDS)
    with request.progress(f"bench {benchmark.lower().replace('-', '')}", runs) as step:
        results = compare_strategies(RunContext(request.home, settings), workload, chosen, limits, request.repeat,
                                     step, min_run_seconds=request.min_run_seconds)
    title = title or (f"{benchmark} SF {request.scale_factor:g}: information passing strategies "
                      f"(median of {request.repeat})")
    context = bench_context(request, title, request.settings, repeat=request.repeat, warmup_rounds=WARMUP_ROUNDS,
                            min_run_seconds=request.min_run_seconds, **parameters)
    request.show("series", results, context.title)
    if request.out_dir is not None:
        _written(request, write_outputs(request.out_dir, context, results, synthetic=synthetic))
    return results


def run_tpch(request: BenchRequest):
    from aipq.bench.queries import tpch_workload

    workload = tpch_workload(query_numbers(request.queries, "TPC-H", 22))
    parse_series(request.strategies)  # refused before the data is prepared
    prepare_tpch(request)
    name = "TPC-H" if request.skew is None else f"TPC-H skewed (Zipf {request.skew:g})"
    return run_series(request, name, workload, scale_factor=request.scale_factor)


def run_reorder(request: BenchRequest):
    """Join orders: each query as written and in its worst connected order, with statistics collected first."""
    from aipq.bench.queries import reorder_workload

    found = query_numbers(request.queries, "TPC-H", 22)
    parse_series(request.strategies)
    prepare_tpch(request)
    with request.status("collecting the tables' statistics…"):
        workload = reorder_workload(request.context, found)
    name = "TPC-H join orders" if request.skew is None else f"TPC-H join orders, skewed (Zipf {request.skew:g})"
    return run_series(request, name, workload, scale_factor=request.scale_factor)


def run_tpcds(request: BenchRequest):
    from aipq.bench.queries import tpcds_workload

    workload = tpcds_workload(query_numbers(request.queries, "TPC-DS", 99))
    parse_series(request.strategies)
    with request.status(f"preparing TPC-DS SF {request.scale_factor:g}…"):
        generate_tpcds(request.context, request.scale_factor, "tpcds")
    return run_series(request, "TPC-DS", workload, scale_factor=request.scale_factor)


def run_synthetic(request: BenchRequest):
    """The paper's synthetic reference-ratio benchmark (its Figs. 7–8): ``extra`` holds ratios, rows, queries."""
    from aipq.bench import synthetic
    from aipq.bench.queries import BenchQuery

    ratios, rows = numbers(request.extra["ratios"], "--ratios", float), request.extra["rows"]
    names = [q.strip().lower() for q in request.extra["queries"].split(",") if q.strip()]
    unknown = [n for n in names if n not in synthetic.QUERIES]
    if unknown or not names:
        raise BadInputError(f"unknown synthetic query {(unknown or [''])[0]!r}",
                            hint=f"use {', '.join(synthetic.QUERIES)}")
    parse_series(request.strategies)
    with request.status(f"preparing synthetic tables ({rows:,} rows, ratios {request.extra['ratios']})…"):
        for ratio in ratios:
            synthetic.generate(request.context, ratio, rows)
    workload = [BenchQuery(f"{name} @ {ratio:g}", synthetic.query_text(name, ratio), ratio)
                for name in names for ratio in ratios]
    title = f"Synthetic reference ratios, {rows:,} rows per table (median of {request.repeat})"
    return run_series(request, "synthetic", workload, title, synthetic=True, rows=rows, ratios=ratios)


# ---- statistics, decisions, staging and batches ----------------------------------------------------------------
def run_stats(request: BenchRequest):
    """Cost of piggybacked statistics per lg_k, and NDV accuracy against exact counts (``extra``: lg_ks)."""
    from aipq.bench.report import write_stats_outputs
    from aipq.bench.stats import measure_collection
    from aipq.tpch.queries import query_text

    found = query_numbers(request.queries, "TPC-H", 22)
    precisions = numbers(request.extra["lg_ks"], "--lg-k")
    bad = [k for k in precisions if not 4 <= k <= 21]
    if bad:
        raise BadInputError(f"lg_k {bad[0]} is outside 4–21", hint="for example --lg-k 8,10,12,14")
    settings = request.paper_settings(ip="off", staging="hive")
    prepare_tpch(replace(request, skew=None))
    workload = [(f"Q{n}", query_text(n)) for n in found]
    with request.progress("bench stats", len(found) * (len(precisions) + 1) * (request.repeat + 1)) as step:
        overheads, errors = measure_collection(request.home, workload, precisions, request.repeat, settings, step)
    context = bench_context(request, f"TPC-H SF {request.scale_factor:g}: cost and accuracy of piggybacked "
                            f"statistics (median of {request.repeat})", settings,
                            scale_factor=request.scale_factor, repeat=request.repeat)
    request.show("stats", (overheads, errors), context.title)
    if request.out_dir is not None:
        _written(request, write_stats_outputs(request.out_dir, context, overheads, errors))


def run_decisions(request: BenchRequest):
    """Each candidate edge's decision reversed in adaptive's own plan, timed against it (``extra``: tolerance)."""
    from aipq.bench.decisions import accuracy, measure_decisions
    from aipq.bench.report import write_decision_outputs
    from aipq.bench.steal import StealTally
    from aipq.tpch.queries import query_text

    found, tolerance = query_numbers(request.queries, "TPC-H", 22), request.extra["tolerance"]
    prepare_tpch(replace(request, skew=None))
    workload = [(f"Q{n}", query_text(n)) for n in found]
    limits = thresholds(request.joins, request.settings)
    settings = request.paper_settings(staging="hive")
    steal = StealTally()
    with request.progress("bench decisions", len(workload) * (request.repeat + 1) * len(limits)) as step:
        edges = measure_decisions(request.home, workload, request.repeat, settings, step, limits, steal)
    title = f"TPC-H SF {request.scale_factor:g}: benefit estimator decisions (median of {request.repeat})"
    request.show("decisions", (edges, accuracy(edges, tolerance), tolerance), title)
    if request.out_dir is not None:
        context = bench_context(request, title, settings, scale_factor=request.scale_factor, repeat=request.repeat)
        _written(request, write_decision_outputs(request.out_dir, context, edges, tolerance, steal))
    return edges


def run_staging(request: BenchRequest):
    """aipq's staged run against plain spark.sql, same session settings, with and without broadcast joins."""
    from aipq.bench.staging import compare_staging

    found = query_numbers(request.queries, "TPC-H", 22)
    settings = request.paper_settings(ip="off", staging="hive")
    prepare_tpch(replace(request, skew=None))
    limits = [0, settings.broadcast_threshold or 10 * MB]
    with request.progress("bench staging", len(found) * len(limits) * request.repeat) as step:
        results = compare_staging(RunContext(request.home, settings), found, limits, request.repeat, step)
    request.show("staging", results, f"TPC-H SF {request.scale_factor:g}")
    json_path = request.extra.get("json_path")
    if json_path:
        json_path.write_text(json.dumps([r.__dict__ for r in results], indent=2))
    return results


def run_batch(request: BenchRequest):
    """TPC-H's queries as one batch against one by one, in one session and as separate aipq commands."""
    from aipq.bench.batch import MODES, batch_report, measure_batches

    found = query_numbers(request.queries, "TPC-H", 22)
    prepare_tpch(replace(request, skew=None))
    with request.progress("bench batch", len(MODES) * (request.repeat + 1)) as step:
        results = measure_batches(request.context, found, request.repeat, request.aipq_command, step)
    context = bench_context(request, f"TPC-H SF {request.scale_factor:g}: {len(found)} queries as one batch and "
                            f"one by one (median of {request.repeat})", request.settings,
                            scale_factor=request.scale_factor, repeat=request.repeat, queries=found)
    request.show("batch", results, context.title)
    out_dir = request.out_dir
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "results.json").write_text(json.dumps({**context.__dict__,
                                                          "modes": [r.as_dict() for r in results]}, indent=2))
        (out_dir / "report.md").write_text(batch_report(results, context))
        request.told(f"wrote results.json, report.md to {out_dir}")
    return results


def run_estimates(request: BenchRequest):
    """How far the planner's row estimates are from the rows each written stage wrote (q-error), over TPC-H's
    queries under the Hive baseline (every stage written), after the tables' statistics were collected in one
    pass: the estimates a first run over known tables is planned with (no earlier run of a subplan counted)."""
    from aipq.engine.statistics import collect_table
    from aipq.estimator.join_estimates import q_error
    from aipq.pipeline import plan_query
    from aipq.tpch.queries import query_text

    found = query_numbers(request.queries, "TPC-H", 22)
    prepare_tpch(request)
    context = RunContext(request.home, replace(request.settings, ip="off", staging="hive", cache_size=0))
    with request.status("collecting the tables' statistics…"):
        for name in ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"):
            collect_table(context, context.catalog.lookup(name), None, "aipq bench estimates")
    errors: dict[str, list[float]] = {}
    with request.progress("bench estimates", len(found)) as step:
        for number in found:
            planned = plan_query(query_text(number), context.catalog, context.settings, context.storage)
            estimates = stage_estimates(planned.dag, context, history_before=None)
            ran = execute(planned, context)
            errors[f"Q{number}"] = [q_error(estimates[m.stage_id]["estimated_rows"], m.rows_written)
                                    for m in ran.record.stages
                                    if m.materialized and estimates[m.stage_id]["estimated_rows"] is not None]
            ran.close()
            step()
    request.show("estimates", errors, f"TPC-H SF {request.scale_factor:g}: q-error of each written stage's rows")
    return errors


def run_api(request: BenchRequest):
    """``aipq.sql`` against ``spark.sql`` on one user session (``bench/api_calls.py``); ``extra``: workloads,
    warmup, tables (catalog or views) and the knobs given to pass to ``aipq.sql``."""
    import tempfile

    from aipq.bench.api_calls import (
        api_results,
        api_workload,
        fixed_cost_lines,
        machine_line,
        run_user_program,
        tpch_views,
        user_spec,
    )
    from aipq.bench.report import BenchContext, today, write_outputs

    workloads = [w.strip() for w in request.extra["workloads"].split(",") if w.strip()]
    workload = api_workload(workloads, query_numbers(request.queries, "TPC-H", 22))
    prepare_tpch(replace(request, skew=None))
    views = tpch_views(Catalog(request.home))
    warmup, tables = request.extra["warmup"], request.extra["tables"]
    with contextlib.ExitStack() as stack:
        # views: aipq finds the tables as a user without its catalog would, only through the session
        home = request.home if tables == "catalog" else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="aipq-bench-api-home-")))
        log = (request.out_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))) / "user-session.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        spec = user_spec(request.settings, request.extra["options"], workload, views, home, request.repeat, warmup,
                         log.with_name("user-session.json"))
        with request.progress("bench api", len(workload) * 4 * (request.repeat + warmup)) as step:
            found = run_user_program(spec, step, log)
    results = api_results(found)
    title = (f"aipq.sql against spark.sql on one user session, TPC-H SF {request.scale_factor:g} "
             f"(median of {request.repeat})")
    context = BenchContext(title, request.command, machine_line(found["session"]), today(),
                           {"scale_factor": request.scale_factor, "repeat": request.repeat, "warmup_rounds": warmup,
                            "tables": tables, "session": found["session"], "options": request.extra["options"]})
    request.show("series", results, title)
    if request.out_dir is not None:
        _written(request, write_outputs(request.out_dir, context, results, notes=tuple(fixed_cost_lines(results)),
                                        time_only=True))
    return results


# ---- every benchmark behind the document -----------------------------------------------------------------------
def run_all(request: BenchRequest, parts: list[str], doc: Path) -> None:
    """The parts of docs/benchmarks.md asked for, each into ``out_dir/PART``, then the document's generated
    section replaced with every part's report found there (the others' kept)."""
    unknown = sorted(set(parts) - set(ALL_PARTS))
    if unknown:
        raise BadInputError(f"--only: unknown benchmark(s) {', '.join(unknown)}",
                            hint=f"choose from {', '.join(ALL_PARTS)}")
    out_dir = request.out_dir or doc.parent / "bench"

    def part(name: str, **changes) -> BenchRequest:
        return replace(request, out_dir=out_dir / name, **changes)

    if "tpch" in parts:
        run_tpch(part("tpch"))
    if "synthetic" in parts:
        run_synthetic(part("synthetic", extra={**request.extra, "queries": "query1,query2"}))
    if "stats" in parts:
        run_stats(part("stats", queries="3,5,9,10", extra={**request.extra, "lg_ks": "8,10,12,14"}))
    if "decisions" in parts and "adaptive" in request.strategies:
        run_decisions(part("decisions", extra={**request.extra, "tolerance": 0.03}))
    splice_reports(doc, out_dir, [p for p in ALL_PARTS if (out_dir / p / "report.md").exists()])
    request.told(f"updated {doc}")


def splice_reports(doc: Path, out_dir: Path, parts: list[str]) -> None:
    """Replace the document's generated section (between the markers, appended if missing) with the reports,
    their image links made relative to the document."""
    sections = []
    for part in parts:
        report = (out_dir / part / "report.md").read_text()
        relative = os.path.relpath((out_dir / part).resolve(), doc.parent.resolve())
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
