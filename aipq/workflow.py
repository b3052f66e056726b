"""Plan and run a workflow file: statements in order, each seeing what the earlier ones created.

The whole file is planned before anything runs — against the catalog as it will be after each earlier
statement — so a typo in the fifth statement fails in a second, not after four long writes. Each statement
is planned again just before it runs, when the tables earlier statements wrote exist and have real sizes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlglot import exp

from aipq import faults
from aipq.app import QueryRun, SqlSource, execute, finish_stage_cache
from aipq.catalog import DEFAULT_DATABASE, Partition, TableEntry, split_name
from aipq.config import Settings, home_writable
from aipq.engine.context import RunContext
from aipq.engine.executor import StageListener
from aipq.engine.session import read_schema
from aipq.engine.statistics import collect_table
from aipq.engine.tables import (
    appended_files,
    committed_here,
    partition_folders,
    publish,
    publish_partitions,
    remove_data,
)
from aipq.errors import BadInputError, ExecutionError, UnknownNameError
from aipq.journal import Journal, durable
from aipq.pipeline import PlannedQuery, plan_statement
from aipq.planner.logical import Project
from aipq.planner.parse import node_position, parse_statements
from aipq.planner.partitions import value_fits
from aipq.planner.resolve import referenced_tables
from aipq.planner.statements import (
    WRITE_FORMATS,
    AnalyzeStep,
    CreateTableStep,
    DropStep,
    PartitionStep,
    QueryStep,
    SetStep,
    ShowStep,
    Step,
    UseStep,
    ViewStep,
    WorkflowCatalog,
    WriteStep,
    in_database,
    to_step,
    view_query,
)
from aipq.planner.table_output import TableShape
from aipq.setting_aliases import alias_for, apply_alias

CREATED_BY = "aipq.created_by"


@dataclass
class PlannedStep:
    step: Step
    settings: Settings
    planned: PlannedQuery | None = None
    skip_reason: str | None = None  # e.g. CREATE TABLE IF NOT EXISTS of an existing table


@dataclass
class Workflow:
    """A planned workflow with what it was planned against, so that running it needs nothing more."""

    source: SqlSource
    steps: list[PlannedStep]
    context: RunContext
    allow_overwrite: bool = False
    journal: Journal | None = None  # what this run commits is recorded there (a workflow file's run)
    resumed: frozenset[int] = frozenset()  # statements an interrupted run committed (``--resume``)
    resuming: bool = False
    redone: frozenset[int] = frozenset()  # statements the interrupted run committed that run again (edited, or after)

    @property
    def queries(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.planned is not None]

    @property
    def is_single_query(self) -> bool:
        return len(self.steps) == 1 and isinstance(self.steps[0].step, QueryStep)


@dataclass
class StepOutcome:
    step: Step
    message: str
    seconds: float = 0.0


@dataclass
class WorkflowRun:
    result: QueryRun | None
    outcomes: list[StepOutcome] = field(default_factory=list)

    def close(self) -> None:
        if self.result is not None:
            self.result.close()


def creator_id(source: SqlSource) -> str | None:
    """Tables a workflow file created in an earlier run count as its own (rerunning it needs no flag)."""
    path = Path(source.name)
    return f"workflow:{path.resolve()}" if path.is_file() else None


def created_by(entry: TableEntry) -> str | None:
    return dict(entry.options).get(CREATED_BY)


def output_types(qualified: exp.Expression) -> list[str]:
    """Spark types of a qualified query's output columns, as sqlglot inferred them."""
    query = qualified
    while isinstance(query, (exp.SetOperation, exp.Subquery)):
        query = query.this
    types = []
    for item in query.selects:
        kind = item.type
        unknown = kind is None or kind.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL)
        types.append("string" if unknown else kind.sql(dialect="spark").lower())
    return types


class _Planner:
    """Walks the steps with the workflow's view of the catalog, checking each one."""

    def __init__(self, source: SqlSource, context: RunContext, allow_overwrite: bool):
        self.source = source
        self.context = context
        self.settings = context.settings
        self.allow_overwrite = allow_overwrite
        self.view = WorkflowCatalog(context.catalog)
        self.creator = creator_id(source)
        self.created: set[str] = set()
        # partitioned tables an earlier statement writes (not yet run): which partitions they will hold is
        # known only once it has
        self.written: set[str] = set()
        self.resumed: frozenset[int] = frozenset()  # statements an interrupted run committed: not run again
        # statements the interrupted run committed that run again (edited since, or after an edited one): a table
        # such a CREATE TABLE … AS SELECT created then is replaced, not an error
        self.redone: frozenset[int] = frozenset()

    def error_at(self, step: Step, message: str, node: exp.Expression | None = None, hint: str | None = None,
                 cls=BadInputError):
        position = node_position(node, self.source.text) if node is not None else None
        if position is None:
            identifier = next(iter(step.statement.find_all(exp.Identifier)), None)
            position = node_position(identifier, self.source.text) if identifier is not None else None
        return cls(f"statement {step.number} ({step.describe()}): {message}", position=position,
                   source_name=self.source.name, hint=hint)

    def may_replace(self, target: str, entry: TableEntry) -> bool:
        return (self.allow_overwrite or target in self.created
                or (self.creator is not None and created_by(entry) == self.creator))

    def redoes(self, step: Step, entry: TableEntry) -> bool:
        """Whether ``step`` writes again the table ``entry`` that its own earlier version created in the
        interrupted run (resumed after an edit)."""
        return step.number in self.redone and self.creator is not None and created_by(entry) == self.creator

    def check_replace(self, step: Step, target: str, entry: TableEntry, verb: str) -> None:
        if not self.may_replace(target, entry):
            raise self.error_at(step, f"would {verb} table {target}, which this workflow did not create",
                                step.statement.this,
                                hint="rerun with --allow-overwrite if that is what you want")

    def plan_query(self, query: exp.Expression, table: TableShape | None = None) -> PlannedQuery:
        return plan_statement(self.view.expand_views(query), self.source.text, self.view, self.settings,
                              self.context.storage, self.source.name, table, self.context.join_costing())

    def plan(self, step: Step) -> PlannedStep:
        planned = PlannedStep(step, self.settings)
        if step.number in self.resumed:
            planned.skip_reason = "done before the interruption (--resume)"
            return planned
        if isinstance(step, ShowStep):
            planned.planned = self.plan_query(self.catalog_rows(step))
        elif isinstance(step, QueryStep):
            planned.planned = self.plan_query(step.query)
        elif isinstance(step, ViewStep) and step.persistent:
            self.plan_kept_view(step, planned)
        elif isinstance(step, ViewStep):
            self.plan_query(step.query)  # only to check it
            self.view.define_view(step, self.source.text, self.source.name)
        elif isinstance(step, WriteStep):
            self.plan_write(step, planned)
        elif isinstance(step, DropStep):
            self.plan_drop(step, planned)
        elif isinstance(step, AnalyzeStep):
            self.plan_analyze(step, planned)
        elif isinstance(step, CreateTableStep):
            self.plan_create_table(step, planned)
        elif isinstance(step, PartitionStep):
            self.plan_partitions(step, planned)
        elif isinstance(step, SetStep):
            try:
                self.settings = apply_setting(self.settings, step)
            except BadInputError as error:
                raise self.error_at(step, error.message, step.statement, hint=error.hint) from None
            planned.settings = self.settings
            if step.ignored:
                planned.skip_reason = "a Hive/MapReduce setting with no meaning here; ignored"
        return planned

    def plan_write(self, step: WriteStep, planned: PlannedStep) -> None:
        existing = self.view.lookup(step.target)
        mode = step.mode
        if mode == "create" and existing is not None and self.redoes(step, existing):
            existing = None  # replaced when it runs (``_run_step``)
        if mode == "create" and existing is not None:
            if step.if_not_exists:
                planned.skip_reason = "the table exists (IF NOT EXISTS)"
                return
            raise self.error_at(step, f"table {step.target} already exists", step.statement.this,
                                hint="use CREATE TABLE IF NOT EXISTS, INSERT OVERWRITE TABLE, or DROP TABLE first")
        if mode != "create" and existing is None:
            if isinstance(step.statement, exp.Create):  # CREATE OR REPLACE of a new table
                mode = "create"
            else:
                raise self.error_at(step, f"unknown table {step.target}", step.statement.this,
                                    hint="create it first with CREATE TABLE", cls=UnknownNameError)
        if mode == "create":
            planned.planned = self.plan_query(step.query, TableShape(step.target, partition_by=step.partitioned_by,
                                                                     format=step.format))
            database, name = split_name(step.target)
            self.view.changes[step.target] = TableEntry(
                database, name, self.context.managed_location(database, name), step.format,
                _table_columns(planned.planned), partition_columns=step.partitioned_by)
            self.created.add(step.target)
            planned.step = replace(step, mode="create")
            return
        assert existing is not None
        if existing.format not in WRITE_FORMATS or existing.source == "spark":
            raise self.error_at(step, f"table {step.target} is {existing.format} data; aipq writes parquet and ORC "
                                "tables", step.statement.this)
        if mode == "overwrite":
            self.check_replace(step, step.target, existing, "overwrite")
        if not existing.partitioned:
            if step.partition is not None:
                raise self.error_at(step, f"table {step.target} is not partitioned", step.statement.this,
                                    hint="leave out the PARTITION clause")
            planned.planned = self.plan_query(step.query, TableShape(step.target, existing.columns, step.columns,
                                                                     format=existing.format))
            return
        spec = step.partition if step.partition is not None else tuple((c, None) for c in existing.partition_columns)
        if [c for c, _ in spec] != list(existing.partition_columns):
            raise self.error_at(step, f"table {step.target} is partitioned by ({', '.join(existing.partition_columns)})"
                                f", not ({', '.join(c for c, _ in spec)})", step.statement.this,
                                hint="name every partition column, in order: PARTITION (col = 'value', …) or (col)")
        dynamic = tuple(c for c, value in spec if value is None)
        types = existing.column_types()
        self.check_partition_values(step, spec, types)
        data = tuple((c, t) for c, t in existing.columns if c not in existing.partition_columns)
        filled = data + tuple((c, types[c]) for c in dynamic)
        listed = step.columns + dynamic if step.columns else ()
        planned.planned = self.plan_query(step.query, TableShape(step.target, filled, listed, dynamic,
                                                                 existing.format))
        planned.step = replace(step, partition=spec)
        self.written.add(step.target)

    def catalog_rows(self, step: ShowStep) -> exp.Expression:
        """SHOW and DESCRIBE as a SELECT of literal rows (Spark's column names), from the catalog as this
        workflow sees it here."""
        if step.what == "tables":
            names = [name for name in self.view.known_names()
                     if ("." not in name if step.target == DEFAULT_DATABASE else name.startswith(step.target + "."))]
            rows = [(step.target, n.split(".")[-1], "true" if n in self.view.views else "false") for n in names]
            return literal_rows(("namespace", "tablename", "istemporary"), rows)
        entry = self.view.lookup(step.target)
        if entry is None:
            raise self.error_at(step, f"unknown table {step.target}", step.statement, cls=UnknownNameError)
        if step.what == "partitions":
            if not entry.partitioned:
                raise self.error_at(step, f"table {step.target} is not partitioned", step.statement)
            return literal_rows(("partition",), [(p.spec(entry.partition_columns),) for p in entry.partitions])
        return literal_rows(("col_name", "data_type", "comment"),
                            [(c, t, "partition column" if c in entry.partition_columns else None)
                             for c, t in entry.columns])

    def check_partition_values(self, step: Step, spec, types: dict[str, str]) -> None:
        for column, value in spec:
            if column in types and not value_fits(value, types[column]):
                raise self.error_at(step, f"partition value {value!r} of column {column} is not of type "
                                    f"{types[column]}", step.statement, hint=f"give {column} a {types[column]} value")

    def plan_create_table(self, step: CreateTableStep, planned: PlannedStep) -> None:
        if self.view.lookup(step.target) is not None:
            if step.if_not_exists:
                planned.skip_reason = "the table exists (IF NOT EXISTS)"
                return
            raise self.error_at(step, f"table {step.target} already exists", step.statement.this,
                                hint="use CREATE TABLE IF NOT EXISTS, or DROP TABLE first")
        self.view.changes[step.target] = new_table(self.context, step)
        self.created.add(step.target)

    def plan_partitions(self, step: PartitionStep, planned: PlannedStep) -> None:
        entry = self.view.lookup(step.target)
        if entry is None:
            raise self.error_at(step, f"unknown table {step.target}", step.statement, cls=UnknownNameError)
        if not entry.partitioned:
            raise self.error_at(step, f"table {step.target} is not partitioned", step.statement,
                                hint="partitioned tables are created with CREATE TABLE … PARTITIONED BY (…)")
        for spec in step.specs:
            columns = [c for c, _ in spec]
            unknown = [c for c in columns if c not in entry.partition_columns]
            if unknown or (step.action == "add" and columns != list(entry.partition_columns)):
                raise self.error_at(step, f"table {step.target} is partitioned by "
                                    f"({', '.join(entry.partition_columns)}), not ({', '.join(columns)})",
                                    step.statement, hint="give a value for every partition column, in order")
        for spec in step.specs:
            self.check_partition_values(step, spec, entry.column_types())
        if step.action == "repair" or step.target in self.written:
            return
        if step.action == "add":
            existing = {p.values for p in entry.partitions}
            known = [spec for spec in step.specs if tuple(v for _, v in spec) in existing]
            if known and not step.if_exists:
                raise self.error_at(step, f"partition {_spec_text(known[0])} of {step.target} already exists",
                                    step.statement, hint="write ADD IF NOT EXISTS PARTITION")
            return
        matched = [p for p in entry.partitions if any(_matches(p, entry, spec) for spec in step.specs)]
        missing = [spec for spec in step.specs if not any(_matches(p, entry, spec) for p in entry.partitions)]
        if missing and not step.if_exists:
            raise self.error_at(step, f"table {step.target} has no partition {_spec_text(missing[0])}",
                                step.statement, hint="write DROP IF EXISTS PARTITION", cls=UnknownNameError)
        self.check_replace(step, step.target, entry, "drop partitions of")
        self.view.changes[step.target] = replace(entry, partitions=tuple(p for p in entry.partitions
                                                                         if p not in matched))

    def plan_analyze(self, step: AnalyzeStep, planned: PlannedStep) -> None:
        entry = self.view.lookup(step.target)
        if entry is None:
            raise self.error_at(step, f"unknown table {step.target}", step.statement, cls=UnknownNameError,
                                hint="register it with aipq table add, or create it earlier in the workflow")
        known = {name for name, _ in entry.columns}
        for column in step.statement.find_all(exp.Column):
            if column.name.lower() not in known:
                raise self.error_at(step, f"table {step.target} has no column {column.name!r}", column,
                                    cls=UnknownNameError, hint=f"its columns: {', '.join(sorted(known))}")
        if not step.scan:
            planned.skip_reason = "NOSCAN reads no rows (file sizes are read when a query is planned)"

    def plan_kept_view(self, step: ViewStep, planned: PlannedStep) -> None:
        if self.view.view_query(step.target) is not None and not step.replace:
            if step.if_not_exists:
                planned.skip_reason = "the view exists (IF NOT EXISTS)"
                return
            raise self.error_at(step, f"view {step.target} already exists", step.statement.this,
                                hint="use CREATE OR REPLACE VIEW, or DROP VIEW first")
        if self.view.lookup(step.target) is not None:
            raise self.error_at(step, f"{step.target} is a table", step.statement.this,
                                hint="give the view another name")
        temporary = [t for t in referenced_tables(step.query) if not t.db and t.name.lower() in self.view.views]
        if temporary:
            raise self.error_at(step, f"a view kept in the catalog cannot read the temporary view {temporary[0].name}",
                                temporary[0], hint="make it a TEMPORARY VIEW too, or read the tables directly")
        self.plan_query(view_query(step))  # only to check it
        self.view.kept_views[step.target] = view_query(step).sql(dialect="hive")

    def plan_drop(self, step: DropStep, planned: PlannedStep) -> None:
        name = step.target.removeprefix("default.")
        if step.view:
            if name in self.view.views:
                del self.view.views[name]
            elif self.view.view_query(step.target) is not None:
                self.view.kept_views[step.target] = None
            elif not step.if_exists:
                raise self.error_at(step, f"unknown view {name}", cls=UnknownNameError)
            return
        existing = self.view.lookup(step.target)
        if existing is None:
            if not step.if_exists:
                raise self.error_at(step, f"unknown table {step.target}", step.statement,
                                    hint="DROP TABLE IF EXISTS skips a missing table", cls=UnknownNameError)
            planned.skip_reason = "no such table (IF EXISTS)"
            return
        self.check_replace(step, step.target, existing, "drop")
        self.view.changes[step.target] = None


def _create_table(context: RunContext, catalog, planner: _Planner, step: CreateTableStep,
                  started: float) -> StepOutcome:
    entry = new_table(context, step)
    if planner.creator is not None and created_by(entry) is not None:
        entry = replace(entry, options=((CREATED_BY, planner.creator),))
    with catalog.table_lock(step.target):
        if catalog.lookup(step.target) is not None:
            raise ExecutionError(f"table {step.target} was created by another run while this workflow ran",
                                 hint="rerun; CREATE TABLE IF NOT EXISTS skips an existing table")
        if step.location is None:
            if context.storage.data_files(entry.path):
                raise BadInputError(f"{entry.path} already holds data that no registered table owns",
                                    hint="move or delete it, or register it with aipq table add")
            context.storage.mkdirs(entry.path)
        catalog.register(entry)
    planner.view.changes.pop(step.target, None)
    return StepOutcome(step, f"created {step.target}" + (f" at {step.location}" if step.location else ""),
                       time.perf_counter() - started)


def _change_partitions(context: RunContext, catalog, planner: _Planner, step: PartitionStep,
                       started: float) -> StepOutcome:
    """ALTER TABLE … ADD/DROP PARTITION and MSCK REPAIR TABLE against the catalog as it is now."""
    storage = context.storage
    with catalog.table_lock(step.target):
        entry = catalog.lookup(step.target)
        if entry is None or not entry.partitioned:
            raise ExecutionError(f"table {step.target} is gone or no longer partitioned", hint="run it again")
        known = {p.values: p for p in entry.partitions}
        if step.action == "repair":
            found = partition_folders(storage, entry.path, entry.partition_columns)
            added = tuple(Partition(values, path) for values, path in found if values not in known)
            catalog.set_partitions(step.target, added=added)
            message = f"registered {len(added)} partition(s) of {step.target} found in {entry.path}"
        elif step.action == "add":
            added = []
            for spec, location in zip(step.specs, step.locations):
                values = tuple(v for _, v in spec)
                if values in known:
                    continue
                partition = Partition(values, location or entry.partition_folder(values))
                storage.mkdirs(partition.path)
                added.append(partition)
            catalog.set_partitions(step.target, added=tuple(added))
            message = f"added {len(added)} partition(s) to {step.target}"
        else:
            dropped = tuple(p for p in entry.partitions if any(_matches(p, entry, spec) for spec in step.specs))
            catalog.set_partitions(step.target, dropped=dropped)
            owned = created_by(entry) is not None
            for partition in dropped:
                if owned and partition.path.startswith(entry.path.rstrip("/") + "/"):
                    remove_data(storage, partition.path)
            message = f"dropped {len(dropped)} partition(s) of {step.target}" + (" and their data" if owned else "")
    planner.view.changes.pop(step.target, None)
    return StepOutcome(step, message, time.perf_counter() - started)


def _in_current_database(step: Step, database: str) -> Step:
    """The table (or, for SHOW TABLES, the database) a statement read as text names, in the current database
    when unqualified."""
    if isinstance(step, ShowStep) and step.what == "tables":
        return replace(step, target=step.target or database)
    if isinstance(step, (PartitionStep, ShowStep)) and "." not in step.target:
        return replace(step, target=f"{database}.{step.target}")
    return step


def literal_rows(names: tuple[str, ...], rows: list[tuple[str | None, ...]]) -> exp.Expression:
    """SELECT names FROM VALUES rows, in the order given (no row: one row filtered out, since VALUES needs
    one)."""
    values = [exp.Tuple(expressions=[exp.Null() if v is None else exp.Literal.string(v) for v in row]
                        + [exp.Literal.number(i)]) for i, row in enumerate(rows or [tuple("" for _ in names)])]
    source = exp.Values(expressions=values, alias=exp.TableAlias(
        this=exp.to_identifier("_catalog"), columns=[exp.to_identifier(n) for n in (*names, "_position")]))
    query = exp.select(*names).from_(source).order_by("_position")
    return query if rows else query.where(exp.false())


def _written(step: Step, write: WriteStep, query_run: QueryRun, started: float) -> StepOutcome:
    verb = {"create": "created", "overwrite": "overwrote", "append": "appended to"}[write.mode]
    return StepOutcome(step, f"{verb} {write.target}: {query_run.record.result_rows:,} row(s)",
                       time.perf_counter() - started)


def _commit_partitions(context: RunContext, catalog, creator: str | None, planned: PlannedQuery, result: str,
                       write: WriteStep, existing: TableEntry | None, location: str, tag: str) -> None:
    """Put a finished write to a partitioned table in place, partition by partition (those the write does not
    touch stay as they were), and register the partitions written."""
    storage = context.storage
    if existing is None:  # CREATE TABLE … PARTITIONED BY (…) AS SELECT
        if storage.data_files(location):
            raise BadInputError(f"{location} already holds data that no registered table owns",
                                hint="move or delete it, or register it with aipq table add")
        database, name = split_name(write.target)
        table = TableEntry(database, name, location, write.format, _table_columns(planned),
                           ((CREATED_BY, creator or "workflow"),), partition_columns=write.partitioned_by)
        storage.mkdirs(location)
        spec = tuple((c, None) for c in write.partitioned_by)
    else:
        table, spec = existing, write.partition or tuple((c, None) for c in existing.partition_columns)
    mode = "append" if write.mode == "append" else "overwrite"
    written = publish_partitions(storage, result, table, spec, mode, context.settings.commit, tag)
    if existing is None:
        catalog.register(replace(table, partitions=tuple(p for p, _ in written)))
    else:
        catalog.set_partitions(write.target, added=tuple(p for p, _ in written))
    for _, commit in written:
        commit.cleanup()


def _partition_count(storage, result: str, write: WriteStep, existing: TableEntry | None) -> int:
    """How many partitions a finished write to a partitioned table commits (0 for an unpartitioned table)."""
    if not (write.partitioned_by or (existing is not None and existing.partitioned)):
        return 0
    columns = existing.partition_columns if existing is not None else write.partitioned_by
    spec = write.partition or tuple((c, None) for c in columns)
    return len(partition_folders(storage, result, tuple(c for c, value in spec if value is None)))


def new_table(context: RunContext, step: CreateTableStep) -> TableEntry:
    """The catalog entry of CREATE TABLE (no data yet, or an external table's data at its LOCATION)."""
    database, name = split_name(step.target)
    location = step.location or context.managed_location(database, name)
    options = step.options if step.location else ((CREATED_BY, "workflow"),)
    return TableEntry(database, name, location, step.format, step.columns, options,
                      partition_columns=step.partition_columns)


def _spec_text(spec: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(f"{c}='{v}'" for c, v in spec) + ")"


def _matches(partition: Partition, entry: TableEntry, spec: tuple[tuple[str, str], ...]) -> bool:
    values = dict(zip(entry.partition_columns, partition.values))
    return all(values[c] == v for c, v in spec)


def _table_columns(planned: PlannedQuery) -> tuple[tuple[str, str], ...]:
    """(name, Spark type) of a CREATE TABLE … AS SELECT's columns, in the table's order (partition columns
    moved last): the table's projection renames the query's columns, which ``output_types`` gives in order."""
    root = planned.dag.plan.root
    types = output_types(planned.qualified)
    by_internal = {item.name: name for name, item in root.items} if isinstance(root, Project) else {}
    query_order = [by_internal.get(internal, internal) for internal in root.children[0].output] if by_internal \
        else list(planned.dag.plan.output_names)
    type_of = dict(zip(query_order, types))
    return tuple((name, type_of.get(name, "string")) for name in planned.dag.plan.output_names)


def apply_setting(settings: Settings, step: SetStep) -> Settings:
    key, value = step.key, step.value
    if alias_for(key) is not None:
        try:
            return apply_alias(settings, key, value)
        except ValueError as problem:
            raise BadInputError(str(problem)) from None
    if key.startswith("spark."):
        return replace(settings, spark_conf={**settings.spark_conf, key: value})
    return settings


def journal_for(source: SqlSource, context: RunContext, resume: bool) -> Journal | None:
    """Where a workflow file's run records what it commits (None for other sources, or a read-only home)."""
    if not Path(source.name).is_file():
        if resume:
            raise BadInputError("--resume continues a workflow FILE", hint="aipq run --resume workflow.sql")
        return None
    if not home_writable(Path(context.home)):
        if resume:
            raise BadInputError(f"{context.home} is read-only: no run of this workflow could record what it did",
                                hint="run it without --resume")
        return None
    return Journal.for_file(Path(context.home), source.name)


def plan_workflow(source: SqlSource, context: RunContext, allow_overwrite: bool = False, record: bool = False,
                  resume: bool = False) -> Workflow:
    """Plan every statement; with ``record`` (``aipq run`` of a file) the run records what it commits in the
    file's journal, and with ``resume`` the statements an interrupted run committed (the journal's leading done
    ones) are skipped."""
    journal = journal_for(source, context, resume) if record or resume else None
    statements = parse_statements(source.text, context.settings.dialect, source.name)
    planner = _Planner(source, context, allow_overwrite)
    steps = []
    database, views = DEFAULT_DATABASE, set()
    resumed: set[int] = set()
    skipping = resume and journal is not None
    for number, statement in enumerate(statements, start=1):
        step = to_step(number, in_database(statement, database, views), source.text, source.name)
        step = _in_current_database(step, database)
        if isinstance(step, UseStep):
            database = step.database
        elif isinstance(step, ViewStep):
            views.add(step.name)
        if skipping and durable(step):
            assert journal is not None
            if journal.done(step) or _committed_before_kill(context, planner, journal, step):
                resumed.add(step.number)
                planner.resumed = frozenset(resumed)
            else:
                skipping = False
        if resume and journal is not None and not skipping and str(step.number) in journal.entries:
            planner.redone |= {step.number}
        steps.append(planner.plan(step))
    return Workflow(source, steps, context, allow_overwrite, journal, frozenset(resumed), resume, planner.redone)


def _committed_before_kill(context: RunContext, planner: _Planner, journal: Journal, step: Step) -> bool:
    """A statement killed while committing, judged by what it left: a new table it registered is done, an
    append whose tagged files are in place is done, and so is an overwrite whose tagged data is the table's (or
    every partition's) current data; anything else is written again."""
    found = journal.committing(step)
    if found is None or not isinstance(step, WriteStep):
        return False
    entry = context.catalog.lookup(step.target)
    if step.mode == "create":
        return entry is not None and planner.creator is not None and created_by(entry) == planner.creator
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


def run_workflow(workflow: Workflow, listener: StageListener | None = None,
                 on_step: Callable[[StepOutcome], None] | None = None, analyze: bool = False,
                 result_format: str | None = None, finish_cache: bool = True) -> WorkflowRun:
    """Run the steps in order; the last SELECT's rows are the result (written as ``result_format``, csv or
    json, straight away when given). The stage outputs the command kept go at the end, unless ``finish_cache``
    is False (a batch, whose later files read them too)."""
    context = workflow.context
    journal = workflow.journal
    if journal is not None and not workflow.resuming:
        journal.reset()  # from the start: an earlier run's commits do not count
    cache = context.stage_cache
    if cache is not None:
        cache.resuming = workflow.resuming
    try:
        ran = _run_steps(workflow, listener, on_step, analyze, result_format)
    except BaseException:
        if journal is None and finish_cache:  # nothing can resume it: its stage outputs go
            finish_stage_cache(context)
        raise
    if finish_cache:
        finish_stage_cache(context)
    return ran


def _run_steps(workflow: Workflow, listener: StageListener | None, on_step: Callable[[StepOutcome], None] | None,
               analyze: bool, result_format: str | None) -> WorkflowRun:
    context, journal = workflow.context, workflow.journal
    if workflow.is_single_query:
        planned = workflow.steps[0].planned
        assert planned is not None
        return WorkflowRun(execute(planned, context, listener, analyze, result_format))
    run = WorkflowRun(None)
    planner = _Planner(workflow.source, context, workflow.allow_overwrite)
    planner.resumed, planner.redone = workflow.resumed, workflow.redone
    try:
        for checked in workflow.steps:
            step = checked.step
            faults.reached("statement")
            try:
                outcome = _run_step(planner, step, listener, run, result_format, journal)
            except ExecutionError as error:
                error.message = f"statement {step.number} ({step.describe()}): {error.message}"
                raise
            if journal is not None and durable(step) and step.number not in workflow.resumed:
                journal.mark(step, "done")
            run.outcomes.append(outcome)
            if on_step is not None:
                on_step(outcome)
    except BaseException:
        run.close()
        raise
    if journal is not None:
        journal.clear()  # all done: nothing to resume
    return run


def _analyze(context: RunContext, catalog, step: AnalyzeStep, started: float) -> StepOutcome:
    """ANALYZE TABLE: the table's statistics collected now, in one pass (``aipq stats collect``)."""
    entry = catalog.lookup(step.target)
    if entry is None:
        raise ExecutionError(f"statement {step.number} ({step.describe()}): table {step.target} is gone",
                             hint="another run dropped it; register it again")
    found = collect_table(context, entry, list(step.columns) or None, "ANALYZE TABLE")
    if found is None:
        raise ExecutionError(f"statement {step.number} ({step.describe()}): the data of {step.target} changed "
                             "while it was read", hint="run it again")
    return StepOutcome(step, f"statistics of {step.target}: {found.rows:,} rows, {len(found.columns)} column(s)",
                       time.perf_counter() - started)


def _mode_now(write: WriteStep, existing: TableEntry | None) -> WriteStep:
    """The write's mode against the catalog as it is now, under the table's lock: another process may have
    created the table since this statement was planned."""
    if write.mode != "create" or existing is None:
        return write
    if isinstance(write.statement, exp.Create) and write.statement.args.get("replace"):
        return replace(write, mode="overwrite")  # CREATE OR REPLACE: replace what the other run created
    raise ExecutionError(f"table {write.target} was created by another run while this statement ran",
                         hint="rerun the statement; CREATE OR REPLACE TABLE replaces it")


def _run_step(planner: _Planner, step: Step, listener, run: WorkflowRun, result_format: str | None,
              journal: Journal | None = None) -> StepOutcome:
    started = time.perf_counter()
    catalog = planner.view.base
    planned_step = planner.plan(step)  # again, now that earlier statements' tables exist
    if planned_step.skip_reason is not None:
        return StepOutcome(step, f"skipped: {planned_step.skip_reason}")
    context = planner.context.with_settings(planned_step.settings)
    storage = context.storage
    if isinstance(step, QueryStep):
        assert planned_step.planned is not None
        if run.result is not None:
            run.result.close()
        run.result = execute(planned_step.planned, context, listener, result_format=result_format)
        rows = run.result.record.result_rows
        return StepOutcome(step, f"{rows:,} row(s)", time.perf_counter() - started)
    if isinstance(step, WriteStep):
        assert planned_step.planned is not None
        write = planned_step.step
        assert isinstance(write, WriteStep)
        database, name = split_name(write.target)
        interrupted = journal.committing(step) if journal is not None else None
        if interrupted is not None and catalog.lookup(write.target) is None:
            remove_data(storage, interrupted["location"])  # a new table's data the killed run left unregistered
        query_run = execute(planned_step.planned, context, listener)
        try:
            with catalog.table_lock(write.target):  # another aipq process may write the same table
                existing = catalog.lookup(write.target)
                if existing is not None and write.mode == "create" and planner.redoes(step, existing):
                    catalog.drop(write.target)  # what this statement's earlier version created
                    remove_data(storage, existing.path)
                    existing = None
                write = _mode_now(write, existing)
                location = existing.path if existing is not None else context.managed_location(database, name)
                tag = uuid.uuid4().hex[:8]
                if journal is not None:
                    journal.mark(step, "committing", tag=tag, location=location,
                                 partitions=str(_partition_count(storage, query_run.record.result_path, write,
                                                                 existing)))
                if write.partitioned_by or (existing is not None and existing.partitioned):
                    _commit_partitions(context, catalog, planner.creator, planned_step.planned,
                                       query_run.record.result_path, write, existing, location, tag)
                    planner.view.changes.pop(write.target, None)
                    planner.written.discard(write.target)
                    return _written(step, write, query_run, started)
                commit = publish(storage, query_run.record.result_path, location, write.mode,
                                 context.settings.commit, tag)
                if write.mode == "create":
                    options = ((CREATED_BY, planner.creator or "workflow"),)
                    catalog.register(TableEntry(database, name, commit.path, write.format,
                                                read_schema(context.spark, storage, commit.path, write.format),
                                                options))
                    planner.view.changes.pop(write.target, None)
                elif commit.path != location:
                    assert existing is not None
                    catalog.register(replace(existing, path=commit.path))
                commit.cleanup()
        finally:
            query_run.close()
        return _written(step, write, query_run, started)
    if isinstance(step, AnalyzeStep):
        return _analyze(context, catalog, step, started)
    if isinstance(step, UseStep):
        return StepOutcome(step, f"unqualified table names are in database {step.database}")
    if isinstance(step, CreateTableStep):
        return _create_table(context, catalog, planner, step, started)
    if isinstance(step, PartitionStep):
        return _change_partitions(context, catalog, planner, step, started)
    if isinstance(step, ViewStep) and step.persistent:
        catalog.register_view(step.target, planner.view.kept_views.pop(step.target, None) or
                              view_query(step).sql(dialect="hive"))
        return StepOutcome(step, f"created view {step.target}", time.perf_counter() - started)
    if isinstance(step, DropStep) and step.view and catalog.view_query(step.target) is not None:
        catalog.drop_view(step.target)
        planner.view.kept_views.pop(step.target, None)
        return StepOutcome(step, f"dropped view {step.target}", time.perf_counter() - started)
    if isinstance(step, DropStep) and not step.view:
        entry = catalog.lookup(step.target)
        if entry is not None:
            catalog.drop(step.target)
            planner.view.changes.pop(step.target, None)
            if created_by(entry) is not None and entry.path.startswith(planner.context.warehouse.rstrip("/") + "/"):
                remove_data(planner.context.storage, entry.path)
                return StepOutcome(step, f"dropped {step.target} and its data")
            return StepOutcome(step, f"dropped {step.target} (its files at {entry.path} are kept)")
    return StepOutcome(step, "done", time.perf_counter() - started)
