"""Whether a process still runs, for telling a killed run's leftovers from a running one's."""

from __future__ import annotations

import os


def process_start(pid: int) -> str:
    """When process ``pid`` started (field 22 of /proc/PID/stat), so that a reused pid is not taken for the
    owner; empty where /proc does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[19]
    except OSError:
        return ""


def process_alive(pid: int, started: str) -> bool:
    """Process ``pid`` runs and is the one that started at ``started`` (any, when empty)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not started or process_start(pid) == started
