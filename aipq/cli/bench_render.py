"""Tables of the benchmark commands (``aipq bench``): the rendering of aipq/bench's results."""

from __future__ import annotations

import statistics

from rich.table import Table

from aipq.bench.batch import measured_size, speedup_over_baseline
from aipq.bench.results import headlines, paired_speedup, pruning_efficiency, speedup
from aipq.bench.runner import joins_label
from aipq.bench.staging import StagingResult
from aipq.bench.stats import overhead_rows
from aipq.bench.workload import series_totals
from aipq.cli.render import format_size


def staging_table(results: list[StagingResult], title: str) -> Table:
    table = Table(title=title)
    for column in ("query", "joins", "stages", "aipq s", "spark.sql s", "aipq / spark"):
        table.add_column(column, justify="right")
    for r in results:
        joins = ("repartition only" if r.broadcast_threshold <= 0
                 else f"broadcast ≤ {format_size(r.broadcast_threshold)}")
        table.add_row(f"Q{r.query}", joins, str(r.stages), f"{statistics.median(r.aipq_seconds):.2f}",
                      f"{statistics.median(r.spark_seconds):.2f}", f"{r.ratio:.2f}×")
    return table


def strategy_table(results, title: str) -> Table:
    """Median (min–max) time per query and strategy, speedups against off (of medians and paired by round) and
    spark, shuffled bytes, pruning efficiency; the report's headline statements as the caption."""

    efficiency = pruning_efficiency(results)
    table = Table(title=title)
    for column in ("query", "joins", "strategy", "stages", "seconds (min–max)", "vs off", "paired", "vs spark",
                   "shuffle write", "pruning eff."):
        table.add_column(column, justify="left" if column in ("joins", "strategy") else "right")
    for r in results:
        joins = joins_label(r.broadcast_threshold)
        if r.broadcast_threshold > 0:
            joins += f" ≤ {format_size(r.broadcast_threshold)}"
        cells = []
        for ratio in (speedup(results, r, "off"), paired_speedup(results, r, "off"), speedup(results, r, "spark")):
            cells.append("" if ratio is None else f"{ratio:.2f}×")
        times = [m.seconds for m in r.runs]
        eff = efficiency.get((r.query, r.broadcast_threshold, r.strategy))
        table.add_row(r.query, joins, r.strategy, str(r.stages),
                      f"{r.median_seconds:.2f} ({min(times):.2f}–{max(times):.2f})", *cells,
                      format_size(r.shuffle_write_bytes), "" if eff is None else f"{eff:.0%}")
    table.caption = "\n".join([*(line.text() for line in headlines(results)), *workload_caption(results)])
    return table


def workload_caption(results) -> list[str]:
    """Per series against spark: geo-mean beside total time, and the queries slower beyond the A/A spread."""
    lines = []
    for total in series_totals(results):
        slower = ", ".join(s.text() for s in total.slower[:10]) + (" …" if len(total.slower) > 10 else "")
        lines.append(f"{total.series} vs spark ({total.joins} joins): geo-mean {total.geo_mean:.2f}×, total "
                     f"{total.seconds:.1f} s against {total.spark_seconds:.1f} s ({total.total_ratio:.2f}×); "
                     f"{len(total.slower)} of {total.queries} slower beyond the A/A spread"
                     + (f": {slower}" if slower else ""))
    return lines


def stats_overhead_table(overheads, errors, title: str) -> Table:
    """Per query and lg_k: time with and without collecting every statistic; mean NDV error per lg_k."""
    import statistics as stats_module


    table = Table(title=title)
    for column in ("query", "lg_k", "RSE", "off s", "collecting s", "slowdown", "paired", "storing s",
                   "mean NDV err"):
        table.add_column(column, justify="right")
    mean_error = {k: stats_module.mean(e.error for e in errors if e.lg_k == k) for k in {e.lg_k for e in errors}}
    for r in overhead_rows(overheads):
        error = mean_error.get(r["lg_k"])
        table.add_row(r["query"], str(r["lg_k"]), f"{r['rse']:.1%}", f"{r['off_seconds']:.2f}",
                      f"{r['median_seconds']:.2f}", f"{r['slowdown']:+.1%}", f"{r['paired_slowdown']:+.1%}",
                      f"{r['storing_seconds']:.2f}",
                      "" if error is None else f"{error:.2%}")
    return table


def batch_table(results, title: str) -> Table:
    """``aipq bench batch``: each mode's median time, its speed against one by one, bytes read and shuffled."""
    table = Table(title=title)
    for column in ("mode", "seconds (median)", "vs one by one", "read", "shuffle write"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for result in results:
        run = result.runs[0]
        table.add_row(result.mode, f"{result.median_seconds:.2f}", f"{speedup_over_baseline(results, result):.2f}×",
                      measured_size(run.input_bytes), measured_size(run.shuffle_write_bytes))
    return table


def decisions_table(found, title: str) -> Table:
    """Each edge's estimated benefit, the decision and what reversing it measured; accuracy as the caption."""
    edges, share, tolerance = found
    table = Table(title=title, caption=f"accuracy {share.by_sign:.0%} by sign, {share.within_noise:.0%} within "
                                       f"noise ({tolerance:.0%}), {share.where_clear:.0%} where the runs separate, "
                                       f"over {len(edges)} edges")
    for column in ("query", "joins", "summary", "target", "est. B s", "decision", "measured s", "right"):
        table.add_column(column)
    for edge in edges:
        row = edge.as_dict(tolerance)
        table.add_row(row["query"], row["joins"], row["summary"], row["target"], f"{row['estimated_benefit']:.4f}",
                      row["decision"], f"{row['measured_benefit']:+.3f}", row["verdict"])
    return table


def _stats_table(found, title: str) -> Table:
    overheads, errors = found
    return stats_overhead_table(overheads, errors, title)


def estimates_table(errors: dict[str, list[float]], title: str) -> Table:
    """Per query its stages' largest q-error; over all stages the median, 90th percentile and maximum."""
    every = sorted(e for found in errors.values() for e in found)
    summary = (f"{len(every)} stages: median {statistics.median(every):.2f}, 90th percentile "
               f"{every[int(0.9 * (len(every) - 1))]:.2f}, max {every[-1]:,.2f}") if every else "no stage written"
    table = Table(title=title, caption=summary)
    for column in ("query", "stages", "largest q-error"):
        table.add_column(column, justify="right")
    for query, found in errors.items():
        table.add_row(query, str(len(found)), f"{max(found):,.2f}" if found else "")
    return table


# how each benchmark's results are shown, by the kind ``bench/suite.py`` names them
RENDERERS = {"series": strategy_table, "stats": _stats_table, "decisions": decisions_table,
             "staging": staging_table, "batch": batch_table, "estimates": estimates_table}
