"""The options of ``aipq.sql`` and ``aipq.run_file``: the knobs by name (``ip="adaptive"``), ``conf`` and ``master``
as the command line's ``--conf`` and ``--master``, and what ``aipq run``'s other options say (``allow_overwrite``,
``resume``, ``keep_work``, ``report``, ``output``), each checked as the command line checks it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aipq.config import KNOB, Settings
from aipq.errors import BadInputError
from aipq.setting_aliases import alias_for, apply_alias

# ``aipq run``'s options that are not knobs, by their Python names (the CLI's --limit, --quiet and --analyze shape
# what it prints, and the API prints nothing: a Result holds the rows and the run record instead)
RUN_OPTIONS = ("allow_overwrite", "resume", "keep_work", "report", "output", "output_format", "force")
_PRINTING = {"limit": "Result.rows or Result.dataframe.limit(n)", "quiet": "nothing is printed",
             "analyze": "Result.run holds each stage's measured figures"}


@dataclass(frozen=True)
class RunOptions:
    """What ``aipq run``'s non-knob options ask of a run."""

    allow_overwrite: bool = False  # a workflow may replace or drop tables it did not create
    resume: bool = False  # skip the statements an interrupted run of the same workflow committed
    keep_work: bool = False  # keep the stage outputs (in the work directory and the stage-output cache)
    report: str | None = None  # write the run's report (JSON) here
    output: str | None = None  # write the result's rows here
    output_format: str | None = None  # csv, json or parquet (from output's extension when not given)
    force: bool = False  # let output replace an existing file


def split_options(options: dict[str, Any]) -> tuple[Settings, RunOptions]:
    """The settings and the run options ``options`` give; an unknown name or a bad value is a BadInputError."""
    knobs = {k: v for k, v in options.items() if k not in RUN_OPTIONS}
    run = {k: v for k, v in options.items() if k in RUN_OPTIONS}
    for name in ("allow_overwrite", "resume", "keep_work", "force"):
        if name in run and not isinstance(run[name], bool):
            raise BadInputError(f"{name}={run[name]!r}: give True or False")
    for name in ("report", "output"):
        if run.get(name) is not None:
            run[name] = str(Path(run[name]).expanduser())
    return settings_from(knobs), RunOptions(**run)


def settings_from(options: dict[str, Any]) -> Settings:
    """Settings from knob names (and ``conf``, ``master``), each value checked as the command line checks it; a
    ``conf`` entry that names a knob given too with another value is refused, as ``--conf`` is."""
    options = dict(options)
    conf = {str(k): str(v) for k, v in (options.pop("conf", None) or {}).items()}
    master = options.pop("master", None)
    values = {}
    for name, value in options.items():
        knob = KNOB.get(name)
        if knob is None:
            hint = _PRINTING.get(name)
            raise BadInputError(f"unknown option {name!r}",
                                hint=f"{name} is the command line's display option: {hint}" if hint else
                                f"use a knob's name ({', '.join(sorted(KNOB))}) or one of {', '.join(RUN_OPTIONS)}")
        try:
            values[name] = knob.parse(value if isinstance(value, str) else str(value))
        except ValueError as problem:
            raise BadInputError(f"{name}={value!r}: {problem}") from None
    settings = Settings(**values, master=master)
    for key, value in conf.items():
        if alias_for(key) is None:
            settings = replace(settings, spark_conf={**settings.spark_conf, key: value})
            continue
        try:
            aliased = apply_alias(settings, key, value)
        except ValueError as problem:
            raise BadInputError(str(problem)) from None
        _refuse_disagreement(key, value, settings, aliased, values)
        settings = aliased
    return settings


def _refuse_disagreement(key: str, value: str, before: Settings, after: Settings, given: dict[str, Any]) -> None:
    """``conf={key: value}`` sets a knob that was also given by name with another value: which one was meant is
    not for aipq to guess (the command line refuses the same)."""
    alias = alias_for(key)
    assert alias is not None
    for knob in alias.knobs:
        if knob in given and getattr(after, knob) != getattr(before, knob):
            raise BadInputError(f"conf {key}={value} and {knob}={given[knob]!r} disagree",
                                hint="give one of them")
