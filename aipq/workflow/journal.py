"""What a workflow file's run has committed, so that ``aipq run --resume FILE`` continues after a failure or a
kill (issue 43): one JSON file per workflow file under ``<home>/journals``, rewritten atomically (a new file
renamed over the old) when a statement that changes tables or the catalog starts committing and when it is done.

A resumed run skips the statements the journal has as done, as long as every such statement before them is done
too and none was edited since (each is kept with a fingerprint of its text). SET, USE, temporary views and
queries run again: they are cheap or their rows are the result. A statement killed while committing is resolved
from what it left: a new table this workflow registered is done, data a new table left unregistered is removed
and written again, an append whose tagged files are in the table is done, an overwrite is written again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from aipq.errors import warn
from aipq.workflow.statements import AnalyzeStep, CreateTableStep, DropStep, PartitionStep, Step, ViewStep, WriteStep


def durable(step: Step) -> bool:
    """Whether the statement changes tables or the catalog (what a resumed run need not do again)."""
    if isinstance(step, ViewStep):
        return step.persistent
    return isinstance(step, (WriteStep, CreateTableStep, DropStep, PartitionStep, AnalyzeStep))


def fingerprint(step: Step) -> str:
    return hashlib.sha256(f"{step.number}:{step.statement.sql(dialect='hive')}".encode()).hexdigest()[:16]


@dataclass
class Journal:
    path: Path
    source: str
    entries: dict[str, dict] = field(default_factory=dict)  # statement number → its state and fingerprint

    @classmethod
    def for_file(cls, home: Path, source: str) -> Journal:
        """The journal of the workflow file ``source`` (as it is now on disk, if it has one)."""
        resolved = str(Path(source).resolve())
        key = hashlib.sha256(resolved.encode()).hexdigest()[:16]
        return cls._read(Path(home) / "journals" / f"{Path(source).stem}-{key}.json", resolved)

    @classmethod
    def for_identity(cls, home: Path, identity: str) -> Journal:
        """The journal of a workflow given as text, known by ``identity`` (a digest of the text)."""
        return cls._read(Path(home) / "journals" / f"{identity}.json", identity)

    @classmethod
    def _read(cls, path: Path, source: str) -> Journal:
        journal = cls(path, source)
        try:
            journal.entries = json.loads(journal.path.read_text()).get("statements", {})
        except (OSError, ValueError):
            journal.entries = {}
        return journal

    def entry(self, step: Step) -> dict | None:
        found = self.entries.get(str(step.number))
        return found if found is not None and found.get("fingerprint") == fingerprint(step) else None

    def done(self, step: Step) -> bool:
        found = self.entry(step)
        return found is not None and found.get("state") == "done"

    def committing(self, step: Step) -> dict | None:
        found = self.entry(step)
        return found if found is not None and found.get("state") == "committing" else None

    def mark(self, step: Step, state: str, **details: str) -> None:
        self.entries[str(step.number)] = {"fingerprint": fingerprint(step), "state": state,
                                          "statement": step.describe(), **details}
        self._save()

    def reset(self) -> None:
        """A run from the start: what an earlier run committed no longer counts."""
        self.entries = {}
        self.clear()

    def clear(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as error:
            warn(f"could not remove the workflow journal {self.path}: {error}")

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            staged = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            staged.write_text(json.dumps({"source": self.source, "statements": self.entries}, indent=1))
            os.replace(staged, self.path)
        except OSError as error:
            warn(f"could not write the workflow journal {self.path} ({error}); --resume will redo this run's "
                 "statements")
