"""``aipq submit-args``: what spark-submit needs to start aipq as its driver program, so that a cluster's
launcher, ``spark-defaults.conf`` and ``--master``/``--conf`` apply (client mode)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

import aipq
from aipq.engine.jvm import COLLECTOR_JAR


def submit_args() -> list[str]:
    """aipq's jar, this Python as the driver's, and aipq's entry point as the application."""
    main = Path(aipq.__file__).with_name("__main__.py")
    return ["--jars", str(COLLECTOR_JAR), "--conf", f"spark.pyspark.driver.python={sys.executable}", str(main)]


@click.command("submit-args")
def submit_args_command():
    """Print spark-submit's arguments for running aipq as its driver:
    spark-submit --master yarn $(aipq submit-args) run nightly.sql"""
    click.echo(shlex.join(submit_args()))
