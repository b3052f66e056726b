"""Options and helpers shared by the command groups."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import wraps
from pathlib import Path

import click

from aipq.config import DEFAULT_BETA_SECONDS, DEFAULT_REDUCER_BYTES, MB, Settings, size_bytes
from aipq.errors import BadInputError
from aipq.ip.planner import STRATEGIES
from aipq.setting_aliases import alias_for, apply_alias


def parse_size(text: str) -> int:
    size = size_bytes(text)
    if size is None:
        raise click.BadParameter(f"{text!r} is not a size (examples: 0, 512KB, 10MB, 1GB)")
    return size


def _size(text: str, option: str) -> int:
    size = parse_size(text)
    if size < 0:
        raise click.BadParameter(f"{text!r} is negative; give 0 or a size such as 64MB", param_hint=option)
    return size


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


def planning_options(fn):
    @click.option("--plan", type=click.Choice(["linear", "bushy"]), default="linear", show_default=True,
                  help="Join tree shape.")
    @click.option("--broadcast-threshold", default="10MB", show_default=True, metavar="SIZE",
                  help="Join a base table map-side when its files are at most SIZE; 0 = repartition joins only.")
    @click.option("--shuffle-partitions", type=click.IntRange(1, 10000), default=8, show_default=True,
                  help="The most reduce tasks a stage runs; every stage runs this many with --reducer-bytes 0.")
    @click.option("--reducer-bytes", default=f"{DEFAULT_REDUCER_BYTES // MB}MB", show_default=True, metavar="SIZE",
                  help="Size each stage's reduce phase as Hive does (hive.exec.reducers.bytes.per.reducer): "
                       "one reduce task per SIZE of the files it reads, at least one per core; 0 = every stage "
                       "runs --shuffle-partitions.")
    @click.option("--dialect", default="hive", show_default=True, help="SQL dialect (hive, spark, …).")
    @click.option("--master", default=None, help="Spark master URL (default local[2]).")
    @click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark setting (repeatable).")
    @click.option("--ip", type=click.Choice(STRATEGIES), default="off", show_default=True,
                  help="Information passing: off (Hive), hip (hash lists, child-to-parent), always (every "
                       "admissible Bloom filter), oracle (exact key sets on the same edges), adaptive (Bloom "
                       "filters where the benefit estimator expects them to pay).")
    @click.option("--alpha", default="4MB", show_default=True, metavar="SIZE",
                  help="α: summaries larger than SIZE are not loaded.")
    @click.option("--beta", type=float, default=DEFAULT_BETA_SECONDS, show_default=True,
                  help="β: least estimated benefit (seconds) to build or use a summary (benefit estimator).")
    @click.option("--margin", type=click.FloatRange(0.0, 100.0), default=0.0, show_default=True,
                  help="Build or use a summary only when it is expected to save (1 + MARGIN)× its sure costs "
                       "(benefit estimator); 0 = B > β alone, as in the paper.")
    @click.option("--bloom-size", default="auto", show_default=True, metavar="SIZE|auto",
                  help="|F|: Bloom filter size (e.g. 512KB, 4MB); auto sizes each filter for --bloom-fpp.")
    @click.option("--bloom-fpp", type=click.FloatRange(1e-9, 0.5), default=0.01, show_default=True,
                  help="Target false-positive rate of auto-sized Bloom filters.")
    @click.option("--scan-summaries", default="64MB", show_default=True, metavar="SIZE",
                  help="Filtered tables of at most SIZE may summarize their join keys in a pre-pass (always, "
                       "oracle, adaptive); 0 = stage outputs only.")
    @click.option("--statistics", type=click.Choice(["collect", "recollect", "off"]), default="collect",
                  show_default=True, help="Piggybacked statistics: collect what the repository lacks, collect "
                                          "again, or neither.")
    @click.option("--stats-lg-k", type=click.IntRange(4, 21), default=12, show_default=True,
                  help="HyperLogLog precision (log2 buckets); relative error 1.04/sqrt(2^k).")
    @click.option("--stats-columns", default="", metavar="COLUMNS",
                  help="More columns to collect statistics on: COLUMN, TABLE.COLUMN, comma-separated.")
    @wraps(fn)
    def wrapper(*args, plan, broadcast_threshold, shuffle_partitions, reducer_bytes, dialect, master, confs, ip,
                alpha, beta, margin, bloom_size, bloom_fpp, scan_summaries, statistics, stats_lg_k, stats_columns,
                **kwargs):
        spark_conf = {}
        for item in confs:
            if "=" not in item:
                raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
            key, value = item.split("=", 1)
            spark_conf[key.strip()] = value.strip()
        if not dialect.strip():
            raise click.BadParameter("give a SQL dialect (hive, spark, …)", param_hint="--dialect")
        if not math.isfinite(beta):
            raise click.BadParameter(f"{beta} is not a number of seconds", param_hint="--beta")
        columns = tuple(c.strip() for c in stats_columns.split(",") if c.strip())
        for column in columns:
            if not 1 <= len(column.split(".")) <= 3 or not all(p.strip() for p in column.split(".")):
                raise click.BadParameter(f"{column!r} is not COLUMN, TABLE.COLUMN or DB.TABLE.COLUMN",
                                         param_hint="--stats-columns")
        settings = Settings(plan=plan, broadcast_threshold=parse_size(broadcast_threshold),
                            shuffle_partitions=shuffle_partitions,
                            reducer_bytes=_size(reducer_bytes, "--reducer-bytes"), dialect=dialect,
                            spark_conf=spark_conf,
                            master=master, ip=ip, alpha=_size(alpha, "--alpha"), beta=beta, margin=margin,
                            bloom_size=0 if bloom_size.strip().lower() == "auto" else _size(bloom_size,
                                                                                             "--bloom-size"),
                            bloom_fpp=bloom_fpp, scan_summaries=_size(scan_summaries, "--scan-summaries"),
                            statistics=statistics, stats_lg_k=stats_lg_k, stats_columns=columns)
        return fn(*args, settings=_with_aliased_confs(settings), **kwargs)

    return wrapper


# The option that sets each knob a Spark or Hive setting can name (setting_aliases).
_KNOB_OPTIONS = {"shuffle_partitions": "--shuffle-partitions", "reducer_bytes": "--reducer-bytes",
                 "broadcast_threshold": "--broadcast-threshold"}


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
            option = _KNOB_OPTIONS.get(knob)
            if option is None:
                continue
            given = context.get_parameter_source(option.lstrip("-").replace("-", "_"))
            if given == click.core.ParameterSource.COMMANDLINE and \
                    getattr(aliased, knob) != getattr(settings, knob):
                raise click.BadParameter(f"--conf {key}={value} and {option} {context.params.get(knob)} "
                                         f"disagree; give one of them", param_hint="--conf")
        settings = aliased
    return replace(settings, spark_conf=confs)
