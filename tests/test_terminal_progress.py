"""The per-stage progress a person sees: ``aipq run`` in a real terminal (a tmux pane), read with
``capture-pane`` while it runs and after."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt install tmux)")]


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def test_a_terminal_shows_each_stage_while_it_runs_and_the_summary_after(tpch, home, tmp_path):
    session = f"aipq-{uuid.uuid4().hex[:8]}"
    done_mark = tmp_path / "done"
    command = (f"{sys.executable} -m aipq --home {home} run tpch:9 --broadcast-threshold 0 --ip off "
               f"--staging hive; echo $? > {done_mark}; sleep 60")  # the pane stays to be read
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", command], check=True)
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 300
        while not done_mark.exists() and time.monotonic() < deadline:
            screen = _pane(session)
            seen.update(line.strip() for line in screen.splitlines() if "stage " in line and "/" in line)
            time.sleep(0.1)
        final = _pane(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert done_mark.read_text().strip() == "0", final
    stages = {line.split()[1] for line in seen if line.startswith("stage ")}
    assert len(stages) >= 2, seen  # several stages were shown in turn, each as "stage i/n"
    assert any("tasks" in line for line in seen), seen  # with Spark's task progress
    assert "information passing off" in final  # the transient bars gave way to the run's summary
    assert "S1" in final and "rows" in final
