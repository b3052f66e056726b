"""What a benchmark leaves in its ``--out`` folder: results.json, results.csv, report.md and PNG plots.

report.md is self-contained Markdown (command, machine, date, tables, headline statements, plot links), so
``aipq bench all`` can splice it into docs/benchmarks.md unchanged.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from aipq.bench.results import CSV_COLUMNS, csv_rows, headlines, pruning_efficiency
from aipq.bench.runner import StrategyResult, joins_label
from aipq.bench.series import OFF_AGAIN, SPARK, SPARK_AGAIN, SPARK_BF, WITHOUT_SUMMARIES
from aipq.bench.steal import StealTally, steal_line
from aipq.bench.workload import series_totals, slower_lines, sorted_ratios, total_lines
from aipq.engine import jvm
from aipq.stats.sketches import relative_standard_error

STRATEGY_COLOURS = {"off": "#7f7f7f", "hip": "#1f77b4", "always": "#ff7f0e", "adaptive": "#2ca02c",
                    "oracle": "#9467bd", SPARK: "#d62728", SPARK_BF: "#e377c2", OFF_AGAIN: "#c7c7c7",
                    SPARK_AGAIN: "#ff9896",
                    "off@none": "#8c564b", "off@adaptive": "#bcbd22", "adaptive@adaptive": "#17becf",
                    "adaptive@none": "#98df8a"}


@dataclass
class BenchContext:
    """Where and how a benchmark ran, for every report it writes."""

    title: str
    command: str
    machine: str
    date: str
    parameters: dict


def describe_host() -> str:
    """The machine without Spark: cores, memory, system, Python."""
    memory = ""
    try:
        with open("/proc/meminfo") as meminfo:
            kib = int(meminfo.readline().split()[1])
        memory = f", {kib / 1024 ** 2:.0f} GB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{os.cpu_count()} cores{memory}, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}")


def describe_machine(spark) -> str:
    java = jvm.java_version(spark)
    return f"{describe_host()}, Spark {spark.version} ({spark.sparkContext.master}), Java {java}"


def today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def write_outputs(out_dir: Path, context: BenchContext, results: list[StrategyResult],
                  synthetic: bool = False, notes: tuple[str, ...] = (), time_only: bool = False) -> list[Path]:
    """Write every output; returns the files written. ``notes``: the benchmark's own lines under "From this
    run"; ``time_only``: no shuffle or pruning plots (series that measure neither)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = csv_rows(results)
    payload = {"title": context.title, "command": context.command, "machine": context.machine,
               "date": context.date, **context.parameters, "summary": rows,
               "headlines": [line.__dict__ for line in headlines(results)],
               "workload": [total.as_dict() for total in series_totals(results)],
               "results": [r.as_dict() for r in results]}
    written = [out_dir / "results.json", out_dir / "results.csv"]
    # compact: every run's per-stage, per-summary and per-probe figures make an indented file of megabytes
    written[0].write_text(json.dumps(payload, separators=(",", ":"), default=str))
    with written[1].open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    plots = synthetic_plots(out_dir, results) if synthetic else tpch_plots(out_dir, results, time_only)
    plots += ratio_plots(out_dir, results)
    written += plots
    report = out_dir / "report.md"
    report.write_text(markdown_report(context, results, [p.name for p in plots], notes=notes))
    written.append(report)
    return written


def markdown_report(context: BenchContext, results: list[StrategyResult], plots: list[str],
                    heading: str = "###", notes: tuple[str, ...] = ()) -> str:
    efficiency = pruning_efficiency(results)
    rows = {(r["query"], r["joins"], r["strategy"]): r for r in csv_rows(results)}
    lines = [f"{heading} {context.title}", "",
             f"Command: `{context.command}`  ", f"Machine: {context.machine}  ", f"Date: {context.date}", "",
             *workload_lines(results),
             "| query | joins | strategy | stages | median s (min–max) | vs off | vs off, paired | vs spark | "
             "shuffle write | rows shuffled | pruning eff. |",
             "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in results:
        row = rows[(r.query, joins_label(r.broadcast_threshold), r.strategy)]
        eff = efficiency.get((r.query, r.broadcast_threshold, r.strategy))
        vs_off, paired, vs_spark = row["speedup_vs_off"], row["speedup_vs_off_paired"], row["speedup_vs_spark"]
        lines.append(
            f"| {r.query} | {row['joins']} | {r.strategy} | {r.stages} | {row['median_seconds']:.2f} "
            f"({row['min_seconds']:.2f}–{row['max_seconds']:.2f}) | {_times(vs_off)} | {_times(paired)} | "
            f"{_times(vs_spark)} | "
            f"{_mb(r.shuffle_write_bytes)} | {r.shuffle_write_records:,} | "
            f"{'' if eff is None else f'{eff:.0%}'} |")
    lines += ["", "From this run:", ""]
    lines += [f"- {line.text()}" for line in headlines(results)]
    lines += [f"- {note}" for note in notes]
    reruns = {(r.query, r.broadcast_threshold): r.rerun_rounds for r in results}  # a round reruns every strategy
    lines.append("- " + steal_line(sum(reruns.values()), sum(m.steal_seconds for r in results for m in r.runs),
                                   sum(len(r.runs) for r in results)))
    batched = {(r.query, joins_label(r.broadcast_threshold)): r.runs[0].executions for r in results
               if r.runs and r.runs[0].executions > 1}
    if batched:
        lines.append("- Executions back to back in each timed run (`--min-run-seconds`; seconds are per "
                     "execution, the same count for every strategy): "
                     + ", ".join(f"{query} {joins} ×{count}" for (query, joins), count in batched.items()))
    lines += q_error_lines(results)
    lines += ["", *[f"![{name}]({name})" for name in plots], ""]
    return "\n".join(lines)


def workload_lines(results: list[StrategyResult]) -> list[str]:
    """The workload against ``spark`` before the per-query table: each series' geo-mean beside its total time,
    and the queries it ran slower than ``spark`` beyond their A/A spread (``bench/workload.py``)."""
    totals = series_totals(results)
    if not totals:
        return []
    control = any(r.strategy == SPARK_AGAIN for r in results)
    return [*total_lines(totals), "", *slower_lines(totals, control), ""]


def q_error_lines(results: list[StrategyResult]) -> list[str]:
    """Per aipq series, how far the written stages' output rows were from their estimates from the tables'
    statistics (q-error: the factor either way), over every query's first timed run."""
    by_series: dict[str, list[float]] = {}
    for result in results:
        stages = (result.runs[0].detail or {}).get("stages", {}) if result.runs else {}
        by_series.setdefault(result.strategy, []).extend(s["q_error"] for s in stages.values() if "q_error" in s)
    found = {series: sorted(errors) for series, errors in by_series.items() if errors}
    if not found:
        return []
    lines = ["", "| series | written stages | median q-error | 90th percentile | max |", "|---|--:|--:|--:|--:|"]
    for series, errors in found.items():
        p90 = errors[min(len(errors) - 1, int(0.9 * len(errors)))]
        lines.append(f"| {series} | {len(errors)} | {statistics.median(errors):.2f} | {p90:.2f} | "
                     f"{errors[-1]:.2f} |")
    return lines


def _times(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}×"


def _mb(size: int) -> str:
    return f"{size / 1024 ** 2:.1f} MB"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def _by_joins(results: list[StrategyResult]) -> dict[str, list[StrategyResult]]:
    grouped: dict[str, list[StrategyResult]] = {}
    for r in results:
        grouped.setdefault(joins_label(r.broadcast_threshold), []).append(r)
    return grouped


def _grouped_bars(path: Path, results: list[StrategyResult], value, ylabel: str, title: str,
                  skip: tuple[str, ...] = ()) -> Path:
    """One panel per join setting; per query a group of bars, one per strategy (the shape of the paper's
    Fig. 10)."""
    plt = _pyplot()
    panels = _by_joins(results)
    figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    for axis, (joins, mine) in zip(axes[0], panels.items()):
        queries = list(dict.fromkeys(r.query for r in mine))
        strategies = [s for s in dict.fromkeys(r.strategy for r in mine) if s not in skip]
        width = 0.8 / max(1, len(strategies))
        for index, strategy in enumerate(strategies):
            heights = []
            for query in queries:
                found = [value(r) for r in mine if (r.query, r.strategy) == (query, strategy)]
                heights.append(found[0] if found and found[0] is not None else 0.0)
            positions = [q + (index - (len(strategies) - 1) / 2) * width for q in range(len(queries))]
            axis.bar(positions, heights, width, label=strategy, color=STRATEGY_COLOURS.get(strategy))
        axis.set_xticks(range(len(queries)), queries)
        axis.set_title(f"{title} — {joins} joins")
        axis.set_ylabel(ylabel)
        axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def tpch_plots(out_dir: Path, results: list[StrategyResult], time_only: bool = False) -> list[Path]:
    efficiency = pruning_efficiency(results)
    time = _grouped_bars(out_dir / "time.png", results, lambda r: r.median_seconds, "seconds (median)",
                         "time per query")
    if time_only:
        return [time]
    return [
        time,
        _grouped_bars(out_dir / "shuffle.png", results, lambda r: r.shuffle_write_bytes / 1024 ** 2,
                      "shuffle write (MB)", "shuffled bytes"),
        _grouped_bars(out_dir / "pruning.png", results,
                      lambda r: efficiency.get((r.query, r.broadcast_threshold, r.strategy)),
                      "pruning efficiency (1 = oracle)", "pruning efficiency", skip=WITHOUT_SUMMARIES),
    ]


def ratio_plots(out_dir: Path, results: list[StrategyResult]) -> list[Path]:
    """ratios.png: per join setting, each series' per-query ratios to ``spark`` sorted from the lowest (a
    distribution: the share of the workload below 1× reads off the x axis); none without a ``spark`` series."""
    found = sorted_ratios(results)
    if not found:
        return []
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter
    panels = list(dict.fromkeys(joins for _, joins in found))
    figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    for axis, joins in zip(axes[0], panels):
        for (series, mine), values in found.items():
            if mine != joins:
                continue
            share = [(index + 0.5) / len(values) for index in range(len(values))]
            axis.plot(share, [ratio for _, ratio in values], marker="o", markersize=3, label=series,
                      color=STRATEGY_COLOURS.get(series))
            for (query, ratio), x in list(zip(values, share))[:3]:  # the worst three, named
                axis.annotate(query, (x, ratio), fontsize="x-small", xytext=(3, -8), textcoords="offset points")
        axis.axhline(1.0, color="#999999", linestyle="--", linewidth=1)
        axis.set_yscale("log", base=2)
        axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
        axis.set_xlabel("share of the queries (sorted by ratio)")
        axis.set_ylabel("spark seconds / series seconds")
        axis.set_title(f"per-query ratio to spark — {joins} joins")
        axis.legend(fontsize="small")
    figure.tight_layout()
    path = out_dir / "ratios.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


def final_stage_seconds(result: StrategyResult) -> float | None:
    """Median time of the query's last stage (the paper's Job2 of Query1, Job3 of Query2)."""
    times = []
    for run in result.runs:
        stages = (run.detail or {}).get("stages") or {}
        if stages:
            times.append(list(stages.values())[-1]["seconds"])  # in execution order (summary pre-passes first)
    return statistics.median(times) if times else None


def synthetic_plots(out_dir: Path, results: list[StrategyResult]) -> list[Path]:
    """Time against the reference ratio, one line per strategy, for the whole query and its last stage (the
    shape of the paper's Figs. 7–8)."""
    plt = _pyplot()
    paths = []
    for name, value, ylabel in (("time.png", lambda r: r.median_seconds, "seconds, whole query (median)"),
                                ("final_stage.png", final_stage_seconds, "seconds, last stage (median)")):
        keys = list(dict.fromkeys((r.query.split(" @ ")[0], joins_label(r.broadcast_threshold)) for r in results))
        figure, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 4), squeeze=False)
        for axis, (query, joins) in zip(axes[0], keys):
            mine = [r for r in results if r.query.split(" @ ")[0] == query
                    and joins_label(r.broadcast_threshold) == joins]
            for strategy in dict.fromkeys(r.strategy for r in mine):
                points = sorted((r.ratio, value(r)) for r in mine if r.strategy == strategy
                                and r.ratio is not None and value(r) is not None)
                if points:
                    axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=strategy,
                              color=STRATEGY_COLOURS.get(strategy))
            axis.set_xscale("log")
            axis.set_xlabel("reference ratio of TableA")
            axis.set_ylabel(ylabel)
            axis.set_title(f"{query} — {joins} joins")
            axis.legend(fontsize="small")
        figure.tight_layout()
        path = out_dir / name
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths


def write_stats_outputs(out_dir: Path, context: BenchContext, overheads, errors) -> list[Path]:
    """``aipq bench stats``: results.json, report.md and statistics.png."""
    from aipq.bench.stats import overhead_rows

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = overhead_rows(overheads)
    payload = {"title": context.title, "command": context.command, "machine": context.machine,
               "date": context.date, **context.parameters, "overhead": rows,
               "ndv_errors": [e.as_dict() for e in errors],
               "runs": [o.__dict__ for o in overheads]}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    plots = _stats_plots(out_dir, rows, errors)
    lines = [f"### {context.title}", "", f"Command: `{context.command}`  ", f"Machine: {context.machine}  ",
             f"Date: {context.date}", "",
             "| query | lg_k | RSE | no statistics, s | collecting all, s | slowdown | paired by round "
             "| storing beside the stages, s |",
             "|---|--:|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['query']} | {r['lg_k']} | {r['rse']:.1%} | {r['off_seconds']:.2f} | {r['median_seconds']:.2f} "
              f"| {r['slowdown']:+.1%} | {r['paired_slowdown']:+.1%} | {r['storing_seconds']:.2f} |" for r in rows]
    lines += ["", "| lg_k | columns | mean NDV error | max NDV error | RSE |", "|--:|--:|--:|--:|--:|"]
    for lg_k in sorted({e.lg_k for e in errors}):
        mine = [e.error for e in errors if e.lg_k == lg_k]
        lines.append(f"| {lg_k} | {len(mine)} | {statistics.mean(mine):.2%} | {max(mine):.2%} | "
                     f"{relative_standard_error(lg_k):.2%} |")
    lines += ["", "From this run:", ""]
    for lg_k in sorted({r["lg_k"] for r in rows}):
        mine = [r["slowdown"] for r in rows if r["lg_k"] == lg_k]
        paired = [r["paired_slowdown"] for r in rows if r["lg_k"] == lg_k]
        lines.append(f"- lg_k {lg_k}: mean slowdown {statistics.mean(mine):+.1%} (max {max(mine):+.1%}) "
                     f"over {len(mine)} queries when every statistic is collected; paired by round "
                     f"{statistics.mean(paired):+.1%} (max {max(paired):+.1%})")
    reruns = {o.query: o.rerun_rounds for o in overheads}  # a round reruns every setting of its query
    lines.append("- " + steal_line(sum(reruns.values()), sum(sum(o.steal_seconds) for o in overheads),
                                   sum(len(o.seconds) for o in overheads)))
    lines += ["", *[f"![{p.name}]({p.name})" for p in plots], ""]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    return [out_dir / "results.json", *plots, report]


def _stats_plots(out_dir: Path, rows: list[dict], errors) -> list[Path]:
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for query in dict.fromkeys(r["query"] for r in rows):
        points = sorted((r["lg_k"], 100 * r["slowdown"]) for r in rows if r["query"] == query)
        axes[0].plot([p[0] for p in points], [p[1] for p in points], marker="o", label=query)
    axes[0].axhline(5, color="#999999", linestyle="--", linewidth=1, label="5 % target")
    axes[0].set_xlabel("lg_k (HLL precision)")
    axes[0].set_ylabel("slowdown from collection (%)")
    axes[0].set_title("collection overhead (cf. the paper's Fig. 11)")
    axes[0].legend(fontsize="small")
    lg_ks = sorted({e.lg_k for e in errors})
    axes[1].plot(lg_ks, [100 * statistics.mean(e.error for e in errors if e.lg_k == k) for k in lg_ks],
                 marker="o", label="mean error")
    axes[1].plot(lg_ks, [100 * max(e.error for e in errors if e.lg_k == k) for k in lg_ks],
                 marker="s", label="max error")
    axes[1].plot(lg_ks, [100 * relative_standard_error(k) for k in lg_ks], linestyle="--", label="RSE")
    axes[1].set_xlabel("lg_k (HLL precision)")
    axes[1].set_ylabel("NDV error (%)")
    axes[1].set_title("distinct-count accuracy (cf. the paper's Fig. 12)")
    axes[1].legend(fontsize="small")
    figure.tight_layout()
    path = out_dir / "statistics.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


def write_decision_outputs(out_dir: Path, context: BenchContext, edges, tolerance: float,
                           steal: StealTally | None = None) -> list[Path]:
    """``aipq bench decisions``: results.json and report.md."""
    from aipq.bench.decisions import accuracy

    out_dir.mkdir(parents=True, exist_ok=True)
    share = accuracy(edges, tolerance)
    payload = {"title": context.title, "command": context.command, "machine": context.machine,
               "date": context.date, **context.parameters, "tolerance": tolerance,
               "accuracy": share.by_sign, "accuracy_within_noise": share.within_noise,
               "accuracy_where_clear": share.where_clear,
               "runs_rerun_for_steal": steal.rerun if steal else None,
               "steal_seconds": round(steal.stolen_seconds, 2) if steal else None,
               "edges": [e.as_dict(tolerance) for e in edges]}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    lines = [f"### {context.title}", "", f"Command: `{context.command}`  ", f"Machine: {context.machine}  ",
             f"Date: {context.date}", "",
             "Seconds are those of the stages the edge can change (its producer, the stage it prunes and every "
             "stage after that one), median of the runs; the whole query's difference and every run are in "
             "results.json. Right: *yes* when the decision has the measured benefit's sign; *noise* when not, but "
             f"the difference is within {tolerance:.0%} of the query's time; *unclear* when beyond that, but the "
             "runs with and without the edge overlap (the sign is not known); *no* otherwise.", "",
             "| query | joins | summary | target | relation | estimated B, s | decision | s without | s with | "
             "measured benefit, s | query's difference, s | right |",
             "|---|---|---|---|---|--:|---|--:|--:|--:|--:|---|"]
    for e in edges:
        row = e.as_dict(tolerance)
        mark = row["verdict"]
        lines.append(f"| {row['query']} | {row['joins']} | {row['summary']} | {row['target']} | {row['relation']} | "
                     f"{row['estimated_benefit']:.4f} | {row['decision']} | {row['seconds_without']:.2f} | "
                     f"{row['seconds_with']:.2f} | {row['measured_benefit']:+.3f} | "
                     f"{row['measured_query_benefit']:+.3f} | {mark} |")
    lines += ["", "From this run:", "",
              f"- decision accuracy over {len(edges)} candidate edges: {share.by_sign:.0%} by the sign of the "
              f"measured benefit; {share.within_noise:.0%} counting differences within {tolerance:.0%} of the "
              f"query's time as noise; {share.where_clear:.0%} counting edges whose runs overlap as noise "
              f"({sum(e.clear() for e in edges)} of {len(edges)} edges have runs that separate, "
              f"{sum(e.clear() and e.right() for e in edges)} of them decided right)"]
    for joins in sorted({e.joins for e in edges}):
        some = [e for e in edges if e.joins == joins]
        part = accuracy(some, tolerance)
        used = sum(e.used for e in some)
        lines.append(f"- {joins} joins: {len(some)} edges, {used} used; {part.by_sign:.0%} by sign, "
                     f"{part.within_noise:.0%} within noise, {part.where_clear:.0%} where the runs separate")
    if steal is not None:
        lines.append("- " + steal_line(steal.rerun, steal.stolen_seconds, steal.runs, unit="runs"))
    lines.append("")
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    return [out_dir / "results.json", report]
