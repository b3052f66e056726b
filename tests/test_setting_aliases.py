"""Spark's and Hive's names for aipq's planning knobs, from --conf and from a workflow's SET, reach the planner."""

from __future__ import annotations

import re

import pytest

from aipq.config import DEFAULT_REDUCER_BYTES, MB, Settings
from aipq.setting_aliases import alias_for, apply_alias

JOIN = ("SELECT n_name, count(*) AS suppliers FROM supplier JOIN nation ON s_nationkey = n_nationkey "
        "GROUP BY n_name ORDER BY n_name")


@pytest.mark.parametrize("key, value, knob, expected", [
    ("spark.sql.shuffle.partitions", "3", "shuffle_partitions", 3),
    ("hive.exec.reducers.max", "12", "shuffle_partitions", 12),
    ("hive.exec.reducers.bytes.per.reducer", "256000000", "reducer_bytes", 256000000),
    ("spark.sql.autoBroadcastJoinThreshold", "-1", "broadcast_threshold", 0),
    ("spark.sql.autoBroadcastJoinThreshold", "20m", "broadcast_threshold", 20 * MB),
    ("hive.auto.convert.join", "false", "broadcast_threshold", 0),
    ("hive.auto.convert.join", "TRUE", "broadcast_threshold", 10 * MB),
    ("mapred.reduce.tasks", "5", "shuffle_partitions", 5),
    ("mapred.reduce.tasks", "5", "reducer_bytes", 0),
    ("mapreduce.job.reduces", "-1", "shuffle_partitions", Settings().shuffle_partitions),
    ("mapreduce.job.reduces", "-1", "reducer_bytes", DEFAULT_REDUCER_BYTES),
])
def test_each_alias_sets_its_knob(key, value, knob, expected):
    assert getattr(apply_alias(Settings(broadcast_threshold=10 * MB), key, value), knob) == expected


def test_turning_map_joins_on_keeps_the_threshold_in_force():
    assert apply_alias(Settings(broadcast_threshold=50 * MB), "hive.auto.convert.join", "true") \
        .broadcast_threshold == 50 * MB
    assert apply_alias(Settings(broadcast_threshold=0), "hive.auto.convert.join", "true") \
        .broadcast_threshold == Settings().broadcast_threshold


@pytest.mark.parametrize("key, value", [("spark.sql.shuffle.partitions", "0"),
                                        ("spark.sql.shuffle.partitions", "many"),
                                        ("hive.exec.reducers.bytes.per.reducer", "-5"),
                                        ("spark.sql.autoBroadcastJoinThreshold", "big"),
                                        ("hive.auto.convert.join", "yes"),
                                        ("mapred.reduce.tasks", "0")])
def test_a_bad_value_says_what_a_good_one_is(key, value):
    with pytest.raises(ValueError, match=f"{key} must be .*not '{value}'"):
        apply_alias(Settings(), key, value)


def test_other_settings_have_no_alias():
    assert alias_for("spark.sql.adaptive.enabled") is None and alias_for("hive.exec.parallel") is None


def test_cli_conf_sets_the_knob_and_reaches_the_run(aipq):
    explained = aipq("explain", "--sql", JOIN, "--conf", "spark.sql.autoBroadcastJoinThreshold=-1",
                     "--conf", "spark.sql.shuffle.partitions=3")
    assert explained.exit_code == 0, explained.output
    assert "repartition joins only" in explained.output and "at most 3" in explained.output

    ran = aipq("run", "--handoff", "off", "--sql", JOIN, "--conf", "spark.sql.shuffle.partitions=3",
               "--reducer-bytes", "0", "--broadcast-threshold", "0", "--analyze", "--format", "csv")
    assert ran.exit_code == 0, ran.output
    assert "JOIN" in ran.output and set(re.findall(r"(\d+) reduce tasks", ran.output)) == {"3"}


def test_cli_conf_and_the_knobs_own_option_must_agree(aipq):
    result = aipq("explain", "--sql", JOIN, "--conf", "spark.sql.shuffle.partitions=4", "--shuffle-partitions", "6")
    assert result.exit_code != 0 and "disagree" in result.output and "Traceback" not in result.output
    agreeing = aipq("explain", "--sql", JOIN, "--conf", "spark.sql.shuffle.partitions=6",
                    "--shuffle-partitions", "6")
    assert agreeing.exit_code == 0, agreeing.output
    bad = aipq("explain", "--sql", JOIN, "--conf", "spark.sql.autoBroadcastJoinThreshold=big")
    assert bad.exit_code != 0 and "-1 for no broadcast joins" in bad.output


def test_a_workflows_fixed_reducer_count_runs_in_every_stage(aipq, tmp_path):
    """Hive's mapred.reduce.tasks sets two knobs: the count, and no sizing by bytes, so every stage runs it."""
    workflow = tmp_path / "fixed_reducers.sql"
    workflow.write_text(f"SET mapred.reduce.tasks=3;\nSET hive.auto.convert.join=false;\n{JOIN};\n")
    ran = aipq("run", "--handoff", "off", str(workflow), "--analyze")
    assert ran.exit_code == 0, ran.output
    assert "ignored" not in ran.output and set(re.findall(r"(\d+) reduce tasks", ran.output)) == {"3"}
    result = aipq("explain", "--sql", JOIN, "--conf", "mapred.reduce.tasks=4", "--reducer-bytes", "64MB")
    assert result.exit_code != 0 and "disagree" in result.output and "--reducer-bytes" in result.output


def test_a_workflows_hive_join_setting_is_honoured_not_ignored(aipq, tmp_path):
    workflow = tmp_path / "no_map_joins.sql"
    workflow.write_text(f"SET hive.auto.convert.join=false;\n{JOIN};\n")
    explained = aipq("explain", str(workflow))
    assert explained.exit_code == 0, explained.output
    assert "repartition joins only" in explained.output and "ignored" not in explained.output
    workflow.write_text(f"SET hive.auto.convert.join=maybe;\n{JOIN};\n")
    bad = aipq("run", str(workflow))
    assert bad.exit_code != 0 and "statement 1" in bad.output and "true or false" in bad.output
