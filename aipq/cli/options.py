"""Options and helpers shared by the command groups."""

from __future__ import annotations

from dataclasses import replace
from functools import wraps
from pathlib import Path

import click

from aipq.config import KNOB, KNOBS, Knob, Settings
from aipq.errors import BadInputError
from aipq.setting_aliases import alias_for, apply_alias


def home_dir(ctx: click.Context, local: Path | None = None) -> Path:
    home = (local.expanduser() if local else ctx.obj["home"])
    if home.exists() and not home.is_dir():
        raise BadInputError(f"the aipq home {home} is a file, not a folder",
                            hint="point --home or AIPQ_HOME at a folder (it is created if missing)")
    if not home.exists():
        try:
            home.mkdir(parents=True)
        except OSError as error:
            raise BadInputError(f"cannot create the aipq home {home}: {error.strerror or error}",
                                hint="point --home or AIPQ_HOME at a writable folder") from error
    return home


def _knob_option(knob: Knob):
    """The click option of a knob with a flag: its text is read by ``Knob.parse`` (one parser for the command
    line, as for ``--conf`` and SET aliases)."""
    shown = knob.shown if knob.shown is not None else str(knob.default)
    if knob.kind == "switch":  # on when given
        return click.option(knob.flag, knob.name, flag_value=knob.choices[1], default=knob.choices[0],
                            help=knob.help)
    metavar = {"choice": "[" + "|".join(knob.choices) + "]", "size": "SIZE", "size-or-auto": "SIZE|auto",
               "columns": "COLUMNS", "int": "INTEGER", "float": "NUMBER", "uri": "URI"}.get(knob.kind, "TEXT")
    return click.option(knob.flag, knob.name, default=shown, show_default=bool(shown), metavar=metavar,
                        help=knob.help)


def planning_options(fn):
    """The planning knobs (every ``config.KNOBS`` entry with a flag), --master and --conf, as one ``settings``."""
    knobs = [k for k in KNOBS if k.flag]

    @wraps(fn)
    def wrapper(*args, master, confs, **kwargs):
        spark_conf = {}
        for item in confs:
            if "=" not in item:
                raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
            key, value = item.split("=", 1)
            spark_conf[key.strip()] = value.strip()
        values = {}
        for knob in knobs:
            try:
                values[knob.name] = knob.parse(kwargs.pop(knob.name))
            except ValueError as problem:
                raise click.BadParameter(str(problem), param_hint=knob.flag) from None
        settings = Settings(**values, spark_conf=spark_conf, master=master)
        return fn(*args, settings=_with_aliased_confs(settings), **kwargs)

    wrapper = click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
                           help="Spark setting (repeatable).")(wrapper)
    wrapper = click.option("--master", default=None, help="Spark master URL (default local[2]).")(wrapper)
    for knob in reversed(knobs):
        wrapper = _knob_option(knob)(wrapper)
    return wrapper


def _with_aliased_confs(settings: Settings) -> Settings:
    """``settings`` with each ``--conf`` that names one of aipq's knobs (``spark.sql.shuffle.partitions``,
    ``spark.sql.autoBroadcastJoinThreshold``, …) moved from Spark's settings onto the knob; an error when the
    knob's own option was also given with another value."""
    context = click.get_current_context()
    confs = dict(settings.spark_conf)
    for key, value in settings.spark_conf.items():
        alias = alias_for(key)
        if alias is None:
            continue
        del confs[key]
        try:
            aliased = apply_alias(settings, key, value)
        except ValueError as problem:
            raise click.BadParameter(str(problem), param_hint="--conf") from None
        for knob in alias.knobs:
            option = KNOB[knob].flag
            given = context.get_parameter_source(knob)
            if option and given == click.core.ParameterSource.COMMANDLINE and \
                    getattr(aliased, knob) != getattr(settings, knob):
                raise click.BadParameter(f"--conf {key}={value} and {option} {context.params.get(knob)} "
                                         f"disagree; give one of them", param_hint="--conf")
        settings = aliased
    return replace(settings, spark_conf=confs)
