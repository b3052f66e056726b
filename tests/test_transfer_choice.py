"""``adaptive`` prices predicate transfer's schedule and runs it only where it pays more than its own summaries
(``--transfer-choice``, issue 83). The schedule itself is tested in test_transfer.py."""

from __future__ import annotations

import json

import duckdb
from conftest import assert_same_rows, oracle_rows

from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.estimator.parameters import DEFAULT_PREPASS_SECONDS
from aipq.pipeline import plan_query, transfer_alternative
from aipq.tpch.queries import query_text
from aipq.workflow.transfer_choice import transfer_choice


def _choice(home, tpch, number: int, **settings):
    context = RunContext(home, Settings(**settings))
    planned = plan_query(query_text(number), tpch, context.settings, context.storage, costing=context.join_costing())
    return planned, context, transfer_choice(planned, context)


def test_the_schedule_is_priced_from_its_reading_probes_and_its_passes(home, tpch, tpch_statistics):
    planned, context, choice = _choice(home, tpch, 5, broadcast_threshold=0)
    schedule = transfer_alternative(planned, context.settings, context.storage, context.join_costing())
    assert choice is not None and choice.transfer is not None and schedule is not None
    # every pass is a pre-pass: at least a job's fixed cost each
    assert choice.transfer.passes >= len(schedule.transfer_passes) * DEFAULT_PREPASS_SECONDS
    reading = [t for t in schedule.transfers if t.stage not in schedule.transfer_passes]
    assert 0 < choice.transfer.probes <= len(reading)
    # at the tests' scale a pass's job costs more than the rows its filters remove: adaptive keeps its summaries
    assert not choice.chosen and "β" in choice.why


def test_nothing_is_priced_off_adaptive_or_without_a_filtered_table(home, tpch, tpch_statistics):
    assert _choice(home, tpch, 5, transfer_choice="off")[2] is None
    assert _choice(home, tpch, 5, ip="always")[2] is None
    assert _choice(home, tpch, 1)[2] is None  # one table


def test_a_chosen_transfer_runs_the_schedule_and_gives_duckdbs_rows(aipq, duck, tmp_path, tpch_statistics):
    """β so low that any schedule pays more than adaptive's summaries: the query runs as ``--ip transfer`` would,
    and says so in explain and in its run's report."""
    low = ("--beta", "-1000", "--broadcast-threshold", "0")
    info = json.loads(aipq("explain", "tpch:5", *low, "--format", "json").output)
    assert info["transfer_choice"]["chosen"] and info["transfer_schedule"]["passes"]
    assert not info["handoff"]["chosen"]
    out, report = tmp_path / "q5.parquet", tmp_path / "q5.json"
    result = aipq("run", "tpch:5", *low, "--output", str(out), "--report", str(report), "--force", "--quiet")
    assert result.exit_code == 0, result.output
    run = json.loads(report.read_text())["result"]
    assert run["strategy"] == "transfer" and run["transfer_choice"]["chosen"]
    rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
    assert_same_rows(rows, oracle_rows(duck, query_text(5)), ordered=True)
    kept = aipq("explain", "tpch:5", *low, "--transfer-choice", "off", "--format", "json").output
    assert json.loads(kept)["transfer_choice"] is None
