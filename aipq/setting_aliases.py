"""The names ``--conf`` and a workflow's SET know aipq's knobs by: ``aipq.<knob>`` for each (``aipq.ip``,
``aipq.staging``, ``aipq.work.dir``, …), and Spark's and Hive's names for settings that aipq's planner owns.

How many reduce tasks a stage runs and which joins are map-side are planning decisions here: the planner shapes
the stages around them and the benefit estimator prices them. A ``--conf`` or a workflow's ``SET`` of Spark's or
Hive's name for one therefore sets aipq's knob. Passed on to Spark it would act behind the planner's back: Spark
would run a reduce task count the estimator did not price, or broadcast a join that the plan shuffles (or, for
``-1``, leave broadcast joins on that the user meant to turn off).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from aipq.config import DEFAULT_REDUCER_BYTES, KNOBS, Knob, Settings, absolute_uri, size_bytes
from aipq.errors import BadInputError


@dataclass(frozen=True)
class SettingAlias:
    knob: str  # the Settings field it sets
    expects: str  # what a valid value looks like, for the error message
    parse: Callable[[str, object], object | None]  # (value, the knob's current value) → new value, None if bad
    # other knobs the same setting sets: (the Settings field, its value from the setting's valid value text)
    also: tuple[tuple[str, Callable[[str], object]], ...] = ()

    @property
    def knobs(self) -> tuple[str, ...]:
        return (self.knob, *(knob for knob, _ in self.also))


def _positive_count(text: str, _current: object) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _bytes(text: str, _current: object) -> int | None:
    size = size_bytes(text)
    return size if size is not None and size >= 0 else None


def _broadcast_threshold(text: str, _current: object) -> int | None:
    size = size_bytes(text)
    return None if size is None else max(size, 0)  # Spark's -1 (any size ≤ 0): repartition joins only


def _hive_auto_convert_join(text: str, current: object) -> int | None:
    """Hive's switch for map joins: off is repartition joins only; on keeps the threshold in force, or Spark's
    default one when map joins were off."""
    value = text.strip().lower()
    if value == "false":
        return 0
    if value == "true":
        return current if isinstance(current, int) and current > 0 else Settings().broadcast_threshold
    return None


_REDUCE_TASKS = SettingAlias("shuffle_partitions", "a positive number", _positive_count)


def _fixed_reduce_tasks(text: str, current: object) -> int | None:
    """Hive's mapred.reduce.tasks: a count, or -1 (its default) for Hive to size each job itself, which keeps
    the count in force as the most a stage runs."""
    if text.strip() == "-1":
        return current if isinstance(current, int) else None
    return _positive_count(text, current)


# A positive count runs that many in every stage (no sizing by bytes); -1 sizes each stage again, by the default
# bytes per task, up to the count in force.
_HIVE_REDUCE_TASKS = SettingAlias(
    "shuffle_partitions", "a positive number, or -1 to size each stage by its input", _fixed_reduce_tasks,
    also=(("reducer_bytes", lambda text: DEFAULT_REDUCER_BYTES if text.strip() == "-1" else 0),))

def _strict_cartesian(text: str, _current: object) -> str | None:
    return {"true": "refuse", "false": "allow"}.get(text.strip().lower())


def _uri(text: str, _current: object) -> str | None:
    return absolute_uri(text.strip()) or None


def _hive_mapred_mode(text: str, _current: object) -> str | None:
    return {"strict": "refuse", "nonstrict": "allow"}.get(text.strip().lower())


_EXPECTS = {"int": "an integer", "float": "a number", "size": "a size such as 10MB", "size-or-auto": "a size or auto",
            "columns": "COLUMN, TABLE.COLUMN or DB.TABLE.COLUMN, comma-separated", "uri": "a folder URI"}


def _knob_setting(knob: Knob) -> SettingAlias:
    """``aipq.<knob>``: the knob itself, read as its command-line option reads it."""
    def parse(text: str, _current: object) -> object | None:
        try:
            return knob.parse(text.strip().lower() if knob.kind == "choice" else text.strip())
        except ValueError:
            return None

    expects = f"one of {', '.join(knob.choices)}" if knob.kind == "choice" else _EXPECTS.get(knob.kind, "a value")
    return SettingAlias(knob.name, expects, parse)


# Spark's and Hive's names for aipq's knobs, each with how its values read.
SPARK_AND_HIVE: dict[str, SettingAlias] = {
    "hive.strict.checks.cartesian.product": SettingAlias("cartesian", "true or false", _strict_cartesian),
    "hive.mapred.mode": SettingAlias("cartesian", "strict or nonstrict", _hive_mapred_mode),
    "spark.sql.shuffle.partitions": _REDUCE_TASKS,
    "hive.exec.reducers.max": _REDUCE_TASKS,
    "mapred.reduce.tasks": _HIVE_REDUCE_TASKS,
    "mapreduce.job.reduces": _HIVE_REDUCE_TASKS,
    "hive.exec.reducers.bytes.per.reducer": SettingAlias("reducer_bytes", "a number of bytes (0: a fixed count)",
                                                         _bytes),
    "spark.sql.autobroadcastjointhreshold": SettingAlias(
        "broadcast_threshold", "a size such as 10MB, or -1 for no broadcast joins", _broadcast_threshold),
    "hive.auto.convert.join": SettingAlias("broadcast_threshold", "true or false", _hive_auto_convert_join),
    "spark.sql.warehouse.dir": SettingAlias("warehouse", "a folder URI", _uri),
}
ALIASES: dict[str, SettingAlias] = {**{k.setting: _knob_setting(k) for k in KNOBS}, **SPARK_AND_HIVE}


def alias_for(key: str) -> SettingAlias | None:
    """The aipq knob that setting ``key`` names (its ``aipq.`` name, or Spark's or Hive's), if it names one. An
    ``aipq.`` name that names no knob is a mistake: BadInputError naming the known ones."""
    found = ALIASES.get(key.strip().lower())
    if found is None and key.strip().lower().startswith("aipq."):
        raise BadInputError(f"unknown aipq setting {key.strip()!r}",
                            hint="aipq's settings: " + ", ".join(k.setting for k in KNOBS))
    return found


def apply_alias(settings: Settings, key: str, value: str) -> Settings:
    """``settings`` with the knob that ``key`` names set from ``value``; ValueError saying what a valid value is
    when it is not one. ``key`` must have an alias."""
    alias = ALIASES[key.strip().lower()]
    parsed = alias.parse(value, getattr(settings, alias.knob))
    if parsed is None:
        raise ValueError(f"{key} must be {alias.expects}, not {value!r}")
    return replace(settings, **{alias.knob: parsed, **{knob: follow(value) for knob, follow in alias.also}})
