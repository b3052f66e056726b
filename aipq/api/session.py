"""The session a call of the API runs on. The caller's (``spark=``), or else the process's running one, or else
one aipq starts, checked first (a classic session, running, with aipq's classes on its driver); the call's stages
then run on a clone of it (``clone_session``): the same SparkContext, a copy of its settings, temporary views and
functions as they are when the call starts, and settings of its own. So a call never changes a setting that the
caller's other threads (or its next ``spark.sql``) see, and two calls from two threads never see each other's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aipq.config import Settings
from aipq.engine.jvm import session_stopped
from aipq.engine.session import check_aipq_classes, check_classic_session, get_session
from aipq.errors import BadInputError

# What a job started from a thread carries (set by ``SparkContext.setJobGroup``, which aipq's stages call on the
# calling thread): given back as they were when the call returns.
_THREAD_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def callers_session(spark, settings: Settings, home: Path):
    """The session the call is about: ``spark`` checked, or the process's running one, or a new one."""
    if spark is None:
        return get_session(settings, home)  # the running one is checked for aipq's classes and fixed settings
    check_classic_session(spark)
    if not hasattr(spark, "_jsparkSession"):
        raise BadInputError(f"spark= must be a SparkSession, not {type(spark).__name__}",
                            hint="give the session itself (SparkSession.builder….getOrCreate()), or none")
    if session_stopped(spark):
        raise BadInputError("the SparkSession given as spark= was stopped",
                            hint="give a running session, or none: aipq then uses the process's running one or "
                                 "starts one")
    check_aipq_classes(spark, "the SparkSession given as spark=")
    return spark


@contextmanager
def thread_job_properties_kept(spark) -> Iterator[None]:
    """The calling thread's job group and description as they were before the call, after it."""
    context = spark.sparkContext
    before = {key: context.getLocalProperty(key) for key in _THREAD_JOB_PROPERTIES}
    try:
        yield
    finally:
        for key, value in before.items():
            context.setLocalProperty(key, value)


def home_folder(home: str | Path | None, default: Path) -> Path:
    """The aipq home ``home=`` names (or the default one): a folder, made when missing."""
    folder = Path(home).expanduser() if home is not None else default
    if folder.exists() and not folder.is_dir():
        raise BadInputError(f"the aipq home {folder} is a file, not a folder",
                            hint="give home= a folder (it is created if missing), or leave it out for "
                                 f"{default}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInputError(f"cannot create the aipq home {folder}: {error.strerror or error}",
                            hint="give home= a writable folder") from error
    return folder
