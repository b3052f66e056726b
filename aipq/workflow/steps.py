"""Run one statement of a workflow: each kind of statement has its handler (``HANDLERS``), run against the
catalog as it is now, under the table's lock where it changes a table."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from aipq.catalog import Catalog, Partition, TableEntry, split_name
from aipq.engine.context import RunContext
from aipq.engine.dag_run import StageListener
from aipq.engine.statistics import collect_table
from aipq.engine.tables import (
    TableWrite,
    commit_table_write,
    partition_folders,
    partitions_written,
    remove_data,
)
from aipq.errors import BadInputError, ExecutionError
from aipq.workflow.catalog_view import view_query
from aipq.workflow.journal import Journal
from aipq.workflow.model import CREATED_BY, PlannedStep, StepOutcome, WorkflowRun, created_by
from aipq.workflow.planner import WorkflowPlanner, matches, new_table, table_columns
from aipq.workflow.query import execute
from aipq.workflow.statements import (
    AnalyzeStep,
    CreateDatabaseStep,
    CreateTableStep,
    DropStep,
    PartitionStep,
    QueryStep,
    Step,
    UseStep,
    ViewStep,
    WriteStep,
)


@dataclass
class StepRun:
    """What a statement's handler runs with: the statement as planned just now, the command's context under the
    statement's settings, and the workflow's run so far."""

    planner: WorkflowPlanner
    planned: PlannedStep
    context: RunContext
    run: WorkflowRun
    listener: StageListener | None
    result_format: str | None
    journal: Journal | None
    started: float

    @property
    def catalog(self) -> Catalog:
        return self.planner.view.base

    def outcome(self, message: str, timed: bool = True) -> StepOutcome:
        return StepOutcome(self.planned.step, message, time.perf_counter() - self.started if timed else 0.0)


def run_step(planner: WorkflowPlanner, step: Step, run: WorkflowRun, listener: StageListener | None,
             result_format: str | None, journal: Journal | None) -> StepOutcome:
    """Plan the statement again (the tables earlier statements wrote exist now) and run its handler."""
    started = time.perf_counter()
    planned = planner.plan(step)
    if planned.skip_reason is not None:
        return StepOutcome(step, f"skipped: {planned.skip_reason}")
    context = planner.context.with_settings(planned.settings)
    doing = StepRun(planner, planned, context, run, listener, result_format, journal, started)
    for kind in type(step).__mro__:
        if kind in HANDLERS:
            return HANDLERS[kind](doing, step)
    return doing.outcome("done")


def select(doing: StepRun, step: QueryStep) -> StepOutcome:
    """A SELECT (or SHOW): its rows are the workflow's result until a later one's are."""
    assert doing.planned.planned is not None
    run = doing.run
    if run.result is not None:
        run.result.close()
    run.result = execute(doing.planned.planned, doing.context, doing.listener, result_format=doing.result_format)
    outcome = doing.outcome(f"{run.result.record.result_rows:,} row(s)")
    outcome.record = run.result.record
    return outcome


def write_table(doing: StepRun, step: WriteStep) -> StepOutcome:
    """CREATE TABLE … AS SELECT and INSERT: the query written completely, then committed under the table's lock
    (another aipq process may write the same table); the journal marks the commit before it starts."""
    planned, catalog, storage = doing.planned.planned, doing.catalog, doing.context.storage
    assert planned is not None and isinstance(doing.planned.step, WriteStep)
    interrupted = doing.journal.committing(step) if doing.journal is not None else None
    if interrupted is not None and catalog.lookup(step.target) is None:
        remove_data(storage, interrupted["location"])  # a new table's data the killed run left unregistered
    query_run = execute(planned, doing.context, doing.listener)
    try:
        with catalog.table_lock(step.target):
            write = _table_write(doing, step, query_run.record.result_path)
            if doing.journal is not None:
                doing.journal.mark(step, "committing", tag=write.tag, location=write.location,
                                   partitions=str(partitions_written(storage, write)))
            commit_table_write(doing.context.spark, storage, catalog, write)
        doing.planner.view.changes.pop(step.target, None)
        if write.partitioned:
            doing.planner.written.discard(step.target)
    finally:
        query_run.close()
    verb = {"create": "created", "overwrite": "overwrote", "append": "appended to"}[write.mode]
    outcome = doing.outcome(f"{verb} {step.target}: {query_run.record.result_rows:,} row(s)")
    outcome.record = query_run.record
    outcome.written = {"table": step.target, "mode": write.mode, "rows": query_run.record.result_rows}
    return outcome


def _table_write(doing: StepRun, step: Step, result: str) -> TableWrite:
    """The write against the catalog as it is now: a table this statement's earlier version created (resumed
    after an edit) is dropped first; one another process created since planning is an error, or replaced by
    CREATE OR REPLACE."""
    planned_write, catalog, planner = doing.planned.step, doing.catalog, doing.planner
    assert isinstance(planned_write, WriteStep) and doing.planned.planned is not None
    existing = catalog.lookup(planned_write.target)
    if existing is not None and planned_write.mode == "create" and planner.redoes(step, existing):
        catalog.drop(planned_write.target)
        remove_data(doing.context.storage, existing.path)
        existing = None
    if existing is not None and planned_write.or_replace:  # as DROP TABLE would drop it (its data if managed)
        drop(doing, DropStep(step.number, step.statement, target=planned_write.target))
        existing = None
    write = _mode_now(planned_write, existing)
    database, name = split_name(write.target)
    location = existing.path if existing is not None else doing.context.managed_location(database, name)
    return TableWrite(result, write.target, write.mode, write.format, existing, location, uuid.uuid4().hex[:8],
                      doing.context.settings.commit, options=((CREATED_BY, planner.creator or "workflow"),),
                      columns=table_columns(doing.planned.planned) if write.partitioned_by else (),
                      partitioned_by=write.partitioned_by, partition=write.partition)


def _mode_now(write: WriteStep, existing: TableEntry | None) -> WriteStep:
    """The write's mode against the catalog as it is now, under the table's lock: another process may have
    created the table since this statement was planned."""
    if write.mode != "create" or existing is None:
        return write
    raise ExecutionError(f"table {write.target} was created by another run while this statement ran",
                         hint="rerun the statement; CREATE OR REPLACE TABLE replaces it")


def analyze(doing: StepRun, step: AnalyzeStep) -> StepOutcome:
    """ANALYZE TABLE: the table's statistics collected now, in one pass (``aipq stats collect``)."""
    entry = doing.catalog.lookup(step.target)
    if entry is None:
        raise ExecutionError(f"table {step.target} is gone", hint="another run dropped it; register it again")
    found = collect_table(doing.context, entry, list(step.columns) or None, "ANALYZE TABLE")
    if found is None:
        raise ExecutionError(f"the data of {step.target} changed while it was read", hint="run it again")
    return doing.outcome(f"statistics of {step.target}: {found.rows:,} rows, {len(found.columns)} column(s)")


def create_database(doing: StepRun, step: CreateDatabaseStep) -> StepOutcome:
    created = doing.catalog.create_database(step.database, step.location, step.if_not_exists)
    return doing.outcome(f"created database {step.database}" if created else "done", timed=False)


def use_database(doing: StepRun, step: UseStep) -> StepOutcome:
    return doing.outcome(f"unqualified table names are in database {step.database}", timed=False)


def create_table(doing: StepRun, step: CreateTableStep) -> StepOutcome:
    """CREATE TABLE with columns: registered, with an empty folder at a managed location."""
    entry, catalog, storage = new_table(doing.context, step), doing.catalog, doing.context.storage
    creator = doing.planner.creator
    if creator is not None and created_by(entry) is not None:
        entry = replace(entry, options=((CREATED_BY, creator),))
    with catalog.table_lock(step.target):
        if catalog.lookup(step.target) is not None:
            raise ExecutionError(f"table {step.target} was created by another run while this workflow ran",
                                 hint="rerun; CREATE TABLE IF NOT EXISTS skips an existing table")
        if step.location is None:
            if storage.data_files(entry.path):
                raise BadInputError(f"{entry.path} already holds data that no registered table owns",
                                    hint="move or delete it, or register it with aipq table add")
            storage.mkdirs(entry.path)
        catalog.register(entry)
    doing.planner.view.changes.pop(step.target, None)
    return doing.outcome(f"created {step.target}" + (f" at {step.location}" if step.location else ""))


def change_partitions(doing: StepRun, step: PartitionStep) -> StepOutcome:
    """ALTER TABLE … ADD/DROP PARTITION and MSCK REPAIR TABLE against the catalog as it is now."""
    catalog = doing.catalog
    with catalog.table_lock(step.target):
        entry = catalog.lookup(step.target)
        if entry is None or not entry.partitioned:
            raise ExecutionError(f"table {step.target} is gone or no longer partitioned", hint="run it again")
        change = {"repair": _repair_partitions, "add": _add_partitions}.get(step.action, _drop_partitions)
        message = change(doing, step, entry)
    doing.planner.view.changes.pop(step.target, None)
    return doing.outcome(message)


def _repair_partitions(doing: StepRun, step: PartitionStep, entry: TableEntry) -> str:
    known = {p.values for p in entry.partitions}
    found = partition_folders(doing.context.storage, entry.path, entry.partition_columns)
    added = tuple(Partition(values, path) for values, path in found if values not in known)
    doing.catalog.set_partitions(step.target, added=added)
    return f"registered {len(added)} partition(s) of {step.target} found in {entry.path}"


def _add_partitions(doing: StepRun, step: PartitionStep, entry: TableEntry) -> str:
    known = {p.values for p in entry.partitions}
    added = []
    for spec, location in zip(step.specs, step.locations):
        values = tuple(v for _, v in spec)
        if values in known:
            continue
        partition = Partition(values, location or entry.partition_folder(values))
        doing.context.storage.mkdirs(partition.path)
        added.append(partition)
    doing.catalog.set_partitions(step.target, added=tuple(added))
    return f"added {len(added)} partition(s) to {step.target}"


def _drop_partitions(doing: StepRun, step: PartitionStep, entry: TableEntry) -> str:
    dropped = tuple(p for p in entry.partitions if any(matches(p, entry, spec) for spec in step.specs))
    doing.catalog.set_partitions(step.target, dropped=dropped)
    owned = created_by(entry) is not None
    for partition in dropped:
        if owned and partition.path.startswith(entry.path.rstrip("/") + "/"):
            remove_data(doing.context.storage, partition.path)
    return f"dropped {len(dropped)} partition(s) of {step.target}" + (" and their data" if owned else "")


def create_view(doing: StepRun, step: ViewStep) -> StepOutcome:
    """CREATE VIEW kept in the catalog (a temporary view lives in the workflow's planner only)."""
    if not step.persistent:
        return doing.outcome("done")
    doing.catalog.register_view(step.target, doing.planner.view.kept_views.pop(step.target, None)
                                or view_query(step).sql(dialect="hive"))
    return doing.outcome(f"created view {step.target}")


def drop(doing: StepRun, step: DropStep) -> StepOutcome:
    """DROP VIEW, or DROP TABLE: the data of a table aipq created goes too, a registered table's stays."""
    catalog, view = doing.catalog, doing.planner.view
    if step.view:
        if catalog.view_query(step.target) is None:
            return doing.outcome("done")
        catalog.drop_view(step.target)
        view.kept_views.pop(step.target, None)
        return doing.outcome(f"dropped view {step.target}")
    entry = catalog.lookup(step.target)
    if entry is None:
        return doing.outcome("done")
    managed = catalog.deletes_files_on_drop(step.target)  # a metastore's MANAGED table: the metastore deletes them
    catalog.drop(step.target)
    view.changes.pop(step.target, None)
    if managed is not None:
        return doing.outcome(f"dropped {step.target} and deleted its files at {managed} (a managed table)",
                             timed=False)
    base = doing.planner.context  # the command's warehouse, not one a SET in the workflow gave
    if created_by(entry) is not None and base.in_managed_folder(entry):
        remove_data(base.storage, entry.path)
        return doing.outcome(f"dropped {step.target} and deleted its files at {entry.path}", timed=False)
    where = "" if entry.source == "spark" else f" at {entry.path}"  # Spark reads it by name: its files are Spark's
    return doing.outcome(f"dropped {step.target}; its files{where} are kept (an external table)", timed=False)


# the handler of each kind of statement (a subclass finds its own before its base's); SET has none: its settings
# are the planned step's
HANDLERS: dict[type, Callable[[StepRun, Step], StepOutcome]] = {
    QueryStep: select, WriteStep: write_table, AnalyzeStep: analyze, UseStep: use_database,
    CreateDatabaseStep: create_database,
    CreateTableStep: create_table, PartitionStep: change_partitions, ViewStep: create_view, DropStep: drop,
}
