"""Rich renderings of a run: result tables and run summaries (the explain tree: ``aipq/explanation.py``)."""

from __future__ import annotations

from rich.table import Table

from aipq.engine.records import RunRecord
from aipq.files import format_size


def result_caption(shown: int, total: int) -> str:
    return f"{total} row(s)" if total <= shown else f"first {shown} of {total} rows"


def result_table(names: tuple[str, ...], rows: list[tuple]) -> Table:
    table = Table(show_lines=False)
    for i, name in enumerate(names):
        numeric = bool(rows) and all(isinstance(r[i], (int, float)) or type(r[i]).__name__ == "Decimal"
                                     for r in rows if r[i] is not None)
        table.add_column(name, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*["NULL" if v is None else str(v) for v in row])
    return table


def run_summary(record: RunRecord) -> Table:
    title = f"run {record.run_id}: {record.seconds:.2f} s · information passing {record.strategy}"
    table = Table(title=title, title_justify="left")
    for column in ("stage", "operator", "time", "rows written", "bytes written", "shuffle write", "pruned"):
        table.add_column(column, justify="left" if column in ("stage", "operator", "pruned") else "right")
    for m in record.stages:
        pruned = ", ".join([f"{p.target} {p.rows_in:,}→{p.rows_out:,}" for p in m.probes if p.rows_in is not None]
                           + [f"{p.target} {p.partitions[0]} of {p.partitions[1]} partitions" for p in m.probes
                              if p.partitions])
        built = ", ".join(f"builds {s.kind} {s.column}" for s in m.summaries)
        if not m.materialized:
            table.add_row(f"S{m.stage_id}", m.operator, "", m.staging, "", "", pruned)
            continue
        if m.reused:
            table.add_row(f"S{m.stage_id}", m.operator, "reused", f"{m.rows_written:,}", format_size(m.bytes_written),
                          "", m.staging)
            continue
        table.add_row(f"S{m.stage_id}", m.operator, f"{m.seconds:.2f} s", f"{m.rows_written:,}",
                      format_size(m.bytes_written), format_size(m.shuffle.shuffle_write_bytes),
                      "; ".join(x for x in (pruned, built) if x))
    return table
