"""The ``aipq`` command line: parse arguments, call the package's modules (``workflow``, ``explanation``,
``data``, ``bench``), render."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import traceback
from pathlib import Path

import click

from aipq.cli.bench import bench
from aipq.cli.cache import cache
from aipq.cli.data import calibrate, table, tpcds, tpch
from aipq.cli.explain import explain
from aipq.cli.run import run
from aipq.cli.stats import stats
from aipq.cli.submit import submit_args_command
from aipq.config import default_home
from aipq.errors import EXIT_BAD_INPUT, EXIT_RUNTIME, AipqError


class AipqGroup(click.Group):
    """Turns aipq errors into a message and exit code; a traceback only with --debug."""

    def invoke(self, ctx: click.Context):
        try:
            return call_with_deep_stack(ctx, lambda: super(AipqGroup, self).invoke(ctx))
        except RecursionError:
            if _debug(ctx):
                traceback.print_exc()
            click.echo("error: the SQL is nested too deeply for aipq (parentheses, subqueries or set operations)\n"
                       "hint: split it into views or statements (CREATE TEMPORARY VIEW …)", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except AipqError as error:
            if _debug(ctx):
                traceback.print_exc()
            click.echo(error.render(), err=True)
            ctx.exit(error.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except Exception as error:  # a bug: say so plainly
            if _debug(ctx):
                traceback.print_exc()
            click.echo(f"internal error: {type(error).__name__}: {error}\n"
                       "hint: rerun with --debug for the traceback, and please report it", err=True)
            ctx.exit(EXIT_RUNTIME)


# SQL is a tree, and sqlglot and the planner walk it recursively: a 500-term UNION ALL or a 60-deep nesting of
# subqueries needs more than Python's default 1,000 frames. Commands run on a thread whose stack holds that.
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000


def call_with_deep_stack(ctx: click.Context, body):
    """``body()`` on a thread with a deep stack. Ctrl-C stops it (its Spark jobs are cancelled) and is reported as
    an interruption, whatever the command's thread then ends with."""
    outcome: dict = {}
    finished = threading.Event()

    def target() -> None:
        with ctx:  # click's current context is per thread
            try:
                outcome["value"] = body()
            except BaseException as error:  # noqa: BLE001 — re-raised on the caller's thread
                outcome["error"] = error
            finally:
                finished.set()

    sys.setrecursionlimit(max(sys.getrecursionlimit(), DEEP_RECURSION_LIMIT))
    previous = threading.stack_size(DEEP_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="aipq-command", daemon=True)
        worker.start()
    finally:
        threading.stack_size(previous)
    interrupted = False
    # an Event, not Thread.join: a join interrupted by Ctrl-C can mark a running thread as stopped (CPython 3.11)
    while not finished.is_set():
        try:
            finished.wait(0.25)
        except KeyboardInterrupt:
            interrupted = True
            _interrupt(worker)
    if interrupted:
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _interrupt(worker: threading.Thread) -> None:
    """Ctrl-C on the main thread: raise KeyboardInterrupt in the command's thread and cancel its Spark jobs, so
    that a thread waiting for Spark returns."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(KeyboardInterrupt))
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):
            context.cancelAllJobs()


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug"))


@click.group(cls=AipqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--warehouse", "--home", "home", type=click.Path(file_okay=False),
              help="aipq home (catalog, data, statistics, work files). Default: $AIPQ_HOME or ~/.aipq")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, home: str | None, debug: bool) -> None:
    """aipq: run Hive-style SQL on Spark as a staged job DAG with adaptive information passing."""
    if home is not None and not home.strip():
        raise click.BadParameter("give a folder", param_hint="--home")
    ctx.obj = {"home": (Path(home) if home else default_home()).expanduser()}


for command in (run, explain, tpch, tpcds, table, calibrate, bench, stats, cache, submit_args_command):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="aipq")


if __name__ == "__main__":
    main()
