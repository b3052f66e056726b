"""A benchmark series: one way of running every query, named ``STRATEGY[@STAGING][/PLAN][+SETTING=VALUE…]``
(``adaptive@adaptive/cost+aipq.runtime.broadcast=off``), parsed once into a ``Series``.

Besides aipq's strategies there are the anchors a user would run instead (``spark``: ``spark.sql`` with Spark's
defaults; ``spark-bf``: the same with Spark's runtime Bloom filter made to fire at this scale) and the A/A
controls that show how far identical work differs within one run (``off-again``: off's plan again;
``spark-again``: ``spark`` again)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from aipq.config import PLANS, STRATEGIES, Settings
from aipq.errors import BadInputError
from aipq.setting_aliases import alias_for, apply_alias

SPARK = "spark"
SPARK_BF = "spark-bf"
SPARK_AGAIN = "spark-again"
SPARK_ANCHORS = (SPARK, SPARK_BF, SPARK_AGAIN)
OFF_AGAIN = "off-again"
STAGINGS = ("hive", "adaptive", "none")
# A series setting of the benchmark rather than a knob: each run starts with no statistics known.
PRIOR_NONE = ("prior", "none")
KNOWN = (*STRATEGIES, *SPARK_ANCHORS, OFF_AGAIN)
# Series that build no summary: pruning efficiency says nothing of them.
WITHOUT_SUMMARIES = ("off", *SPARK_ANCHORS, OFF_AGAIN)


@dataclass(frozen=True)
class Series:
    name: str
    strategy: str  # as named: an aipq strategy, an anchor or a control
    staging: str | None = None  # after ``@``; None: the benchmark's own
    plan: str | None = None  # after ``/``; None: the benchmark's own
    settings: tuple[tuple[str, str], ...] = ()  # after ``+``, applied over the benchmark's own
    prior_statistics: bool = True  # False with ``+prior=none``: each run starts from an empty repository

    @classmethod
    def parse(cls, name: str) -> Series:
        head, *items = name.split("+")
        head, _, plan = head.partition("/")
        strategy, _, staging = head.partition("@")
        pairs = [(key.strip(), value.strip()) for key, _, value in (item.partition("=") for item in items)]
        return cls(name, strategy, staging or None, plan or None, tuple(p for p in pairs if p != PRIOR_NONE),
                   PRIOR_NONE not in pairs)

    @property
    def is_spark(self) -> bool:
        return self.strategy in SPARK_ANCHORS

    @property
    def forced_bloom(self) -> bool:
        return self.strategy == SPARK_BF

    @property
    def ip(self) -> str:
        """The aipq strategy the series runs: the anchors and off-again run off's (plain) plan."""
        return "off" if self.strategy in (*SPARK_ANCHORS, OFF_AGAIN) else self.strategy

    def run_settings(self, base: Settings, broadcast_threshold: int) -> Settings:
        """The benchmark's settings as this series runs them. ``off`` and its control run the Hive baseline,
        which has no pre-aggregation below joins."""
        settings = replace(base, broadcast_threshold=broadcast_threshold, ip=self.ip,
                           staging=self.staging or base.staging, plan=self.plan or base.plan,
                           preaggregate="off" if self.ip == "off" else base.preaggregate)
        for key, value in self.settings:
            settings = apply_alias(settings, key, value)
        return settings

    def problem(self) -> str | None:
        """What is wrong with the name, or None."""
        if self.strategy not in KNOWN:
            return f"{self.strategy!r} is no strategy, anchor or control"
        if self.is_spark and (self.staging or self.plan or self.settings or not self.prior_statistics):
            return f"{self.strategy} runs spark.sql as it is: it takes no staging, plan or settings"
        if self.staging is not None and self.staging not in STAGINGS:
            return f"unknown staging {self.staging!r}"
        if self.plan is not None and self.plan not in PLANS:
            return f"unknown plan {self.plan!r}"
        for key, value in self.settings:
            try:
                if alias_for(key) is None:
                    return f"unknown setting {key!r}"
                apply_alias(Settings(), key, value)
            except (ValueError, BadInputError) as error:
                return f"{key}={value}: {error}"
        return None


def parse_series(text: str) -> list[Series]:
    """``--strategies``: series names, comma-separated, each checked."""
    chosen = [Series.parse(s.strip()) for s in text.split(",") if s.strip()]
    if not chosen:
        raise BadInputError("--strategies is empty", hint=f"use some of {', '.join(KNOWN)}")
    for series in chosen:
        problem = series.problem()
        if problem is not None:
            raise BadInputError(f"unknown strategy {series.name!r}: {problem}",
                                hint=f"use {', '.join(KNOWN)}; an aipq strategy may name its staging and join "
                                     f"order, and settings: adaptive@{'|'.join(STAGINGS)}/{'|'.join(PLANS)}"
                                     "+aipq.SETTING=VALUE, and +prior=none to start each run with no statistics")
    return chosen
