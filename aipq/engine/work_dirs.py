"""A run's work directory: where its stage outputs and summaries are written, marked with its process so that a
later run can tell a killed run's directory from a running one's."""

from __future__ import annotations

import os
import socket
import time
import uuid

from aipq.engine import stage_cache
from aipq.engine.processes import process_alive, process_start
from aipq.engine.storage import Storage, join

OWNER_FILE = "_owner"
KEPT_FILE = "_kept"


def new_run_id() -> str:
    """A run's id: when it started, and a random tag."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def new_work_dir(storage: Storage, root: str) -> tuple[str, str]:
    """A new run's work directory under ``root``, marked with this process's id so that a later run can tell
    that a killed run left it behind (``remove_stale_work_dirs``)."""
    run_id = new_run_id()
    remove_stale_work_dirs(storage, root)
    work_dir = join(root, run_id)
    storage.mkdirs(work_dir)
    storage.write_text(join(work_dir, OWNER_FILE), f"{socket.gethostname()} {os.getpid()} "
                                                   f"{process_start(os.getpid())}\n")
    return run_id, work_dir


def keep_work_dir(storage: Storage, work_dir: str) -> None:
    """Mark a run's work directory as kept (``--keep-work``): stale-directory cleaning leaves it alone."""
    storage.write_text(join(work_dir, KEPT_FILE), "")


def remove_work_dir(storage: Storage, work_dir: str) -> None:
    storage.delete(work_dir)


def _owner_alive(storage: Storage, work_dir: str, modified_ms: int) -> bool:
    if storage.exists(join(work_dir, KEPT_FILE)):
        return True
    young = time.time() - modified_ms / 1000 < 86400  # when nothing else tells, removed once a day old
    try:
        host, pid_text, *started = storage.read_text(join(work_dir, OWNER_FILE)).split()
        pid = int(pid_text)
    except Exception:  # noqa: BLE001 — no owner mark on any store: an older aipq's run, or one just starting
        return young
    if host != socket.gethostname():
        return young  # another machine's run
    return process_alive(pid, started[0] if started else "")


def remove_stale_work_dirs(storage: Storage, root: str) -> None:
    """Remove the work directories of runs whose process is gone (killed runs leave theirs behind); the
    stage-output cache beside them stays."""
    for work_dir, is_dir, modified_ms in storage.children(root):
        if is_dir and work_dir.rstrip("/").rsplit("/", 1)[-1] != stage_cache.FOLDER \
                and not _owner_alive(storage, work_dir, modified_ms):
            storage.delete(work_dir)
