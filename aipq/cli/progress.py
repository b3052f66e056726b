"""A per-stage progress display on a terminal: stage i of n, with Spark's task progress."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aipq.engine.dag_run import StageListener
from aipq.engine.records import StageMetrics
from aipq.planner.stages import Stage


def task_counts(spark, job_group: str) -> tuple[int, int]:
    """(completed, total) tasks of the Spark jobs in a job group, from Spark's status tracker."""
    tracker = spark.sparkContext.statusTracker()
    done = total = 0
    for job_id in tracker.getJobIdsForGroup(job_group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else []:
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
    return done, total


class RichStageProgress(StageListener):
    def __init__(self, spark, console: Console):
        self.spark = spark
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("tasks"), TimeElapsedColumn(), console=console, transient=True)
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._task = None

    def __enter__(self) -> RichStageProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._halt_poller()
        self.progress.stop()

    def stage_started(self, stage: Stage, index: int, total: int, job_group: str) -> None:
        self._halt_poller()
        self._task = self.progress.add_task(f"stage {index}/{total} {stage.name} {stage.operator}", total=None)
        self._stop.clear()
        self._poller = threading.Thread(target=self._poll, args=(job_group, self._task), daemon=True)
        self._poller.start()

    def stage_finished(self, metrics: StageMetrics) -> None:
        self._halt_poller()
        if self._task is not None:
            self.progress.update(self._task, completed=1, total=1, visible=False)

    def _poll(self, job_group: str, task) -> None:
        while not self._stop.wait(0.2):
            try:
                done, total = task_counts(self.spark, job_group)
            except Exception:  # the tracker is best-effort display only
                continue
            if total:
                self.progress.update(task, completed=done, total=total)

    def _halt_poller(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=1)
            self._poller = None
