"""What ``--resume`` reads: the workflow file's journal, and, for a statement killed while committing, whether its
commit happened, judged from what it left rather than from the journal alone."""

from __future__ import annotations

from pathlib import Path

from aipq.config import home_writable
from aipq.engine.context import RunContext
from aipq.engine.tables import appended_files, committed_here
from aipq.errors import BadInputError, ExecutionError
from aipq.workflow.journal import Journal
from aipq.workflow.model import created_by
from aipq.workflow.source import SqlSource
from aipq.workflow.statements import Step, WriteStep


def journal_for(source: SqlSource, context: RunContext, resume: bool) -> Journal | None:
    """Where a workflow file's (or a text's with an identity: ``aipq.sql``) run records what it commits (None for
    other sources, or a read-only home)."""
    if source.identity is None and not Path(source.name).is_file():
        if resume:
            raise BadInputError("--resume continues a workflow FILE", hint="aipq run --resume workflow.sql")
        return None
    if not home_writable(Path(context.home)):
        if resume:
            raise BadInputError(f"{context.home} is read-only: no run of this workflow could record what it did",
                                hint="run it without --resume")
        return None
    if source.identity is not None:
        return Journal.for_identity(Path(context.home), source.identity)
    return Journal.for_file(Path(context.home), source.name)


def committed_before_kill(context: RunContext, creator: str | None, journal: Journal, step: Step) -> bool:
    """A statement killed while committing, judged by what it left: a new table it registered is done, an
    append whose tagged files are in place is done, and so is an overwrite whose tagged data is the table's (or
    every partition's) current data; anything else is written again."""
    found = journal.committing(step)
    if found is None or not isinstance(step, WriteStep):
        return False
    entry = context.catalog.lookup(step.target)
    if step.mode == "create":
        return entry is not None and creator is not None and created_by(entry) == creator
    if entry is None:
        return False
    tag, storage = found.get("tag", ""), context.storage
    if not entry.partitioned:
        if step.mode == "append":
            return bool(appended_files(storage, entry.path, tag))
        return committed_here(storage, entry.path, tag)
    if step.mode == "append":
        landed = sum(bool(appended_files(storage, p.path, tag)) for p in entry.partitions)
    else:
        landed = sum(committed_here(storage, p.path, tag) for p in entry.partitions)
    if landed == 0:
        return False
    if landed == int(found.get("partitions", -1)):
        return True
    raise ExecutionError(f"statement {step.number} ({step.describe()}) was interrupted while committing "
                         "its partitions: some of its rows may be in place",
                         hint=f"check table {step.target}, then run the workflow again without --resume")
