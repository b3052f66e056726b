"""Plan and run a workflow file: statements in order, each seeing what the earlier ones created.

The whole file is planned before anything runs — against the catalog as it will be after each earlier
statement — so a typo in the fifth statement fails in a second, not after four long writes. Each statement
is planned again just before it runs, when the tables earlier statements wrote exist and have real sizes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlglot import exp

from aipq.app import QueryRun, SqlSource, execute
from aipq.catalog import TableEntry, split_name
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.engine.executor import StageListener
from aipq.engine.session import read_schema
from aipq.engine.statistics import collect_table
from aipq.engine.tables import publish, remove_data
from aipq.errors import BadInputError, ExecutionError, UnknownNameError
from aipq.pipeline import PlannedQuery, plan_statement
from aipq.planner.parse import node_position, parse_statements
from aipq.planner.statements import (
    AnalyzeStep,
    DropStep,
    QueryStep,
    SetStep,
    Step,
    ViewStep,
    WorkflowCatalog,
    WriteStep,
    to_step,
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

    def check_replace(self, step: Step, target: str, entry: TableEntry, verb: str) -> None:
        if not self.may_replace(target, entry):
            raise self.error_at(step, f"would {verb} table {target}, which this workflow did not create",
                                step.statement.this,
                                hint="rerun with --allow-overwrite if that is what you want")

    def plan_query(self, query: exp.Expression, table: TableShape | None = None) -> PlannedQuery:
        return plan_statement(self.view.expand_views(query), self.source.text, self.view, self.settings,
                              self.context.storage, self.source.name, table)

    def plan(self, step: Step) -> PlannedStep:
        planned = PlannedStep(step, self.settings)
        if isinstance(step, QueryStep):
            planned.planned = self.plan_query(step.query)
        elif isinstance(step, ViewStep):
            self.plan_query(step.query)  # only to check it
            self.view.define_view(step, self.source.text, self.source.name)
        elif isinstance(step, WriteStep):
            self.plan_write(step, planned)
        elif isinstance(step, DropStep):
            self.plan_drop(step, planned)
        elif isinstance(step, AnalyzeStep):
            self.plan_analyze(step, planned)
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
                                    hint="create it first with CREATE TABLE … AS SELECT", cls=UnknownNameError)
        if mode == "create":
            planned.planned = self.plan_query(step.query, TableShape(step.target))
            database, name = split_name(step.target)
            types = output_types(planned.planned.qualified)
            columns = tuple(zip(planned.planned.dag.plan.output_names, types))
            self.view.changes[step.target] = TableEntry(
                database, name, self.context.managed_location(database, name), "parquet", columns)
            self.created.add(step.target)
            planned.step = replace(step, mode="create")
            return
        assert existing is not None
        if existing.format != "parquet" or existing.source == "spark":
            raise self.error_at(step, f"table {step.target} is {existing.format} data; aipq writes parquet tables",
                                step.statement.this)
        if mode == "overwrite":
            self.check_replace(step, step.target, existing, "overwrite")
        planned.planned = self.plan_query(step.query, TableShape(step.target, existing.columns, step.columns))

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

    def plan_drop(self, step: DropStep, planned: PlannedStep) -> None:
        name = step.target.removeprefix("default.")
        if step.view:
            if name in self.view.views:
                del self.view.views[name]
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


def plan_workflow(source: SqlSource, context: RunContext, allow_overwrite: bool = False) -> Workflow:
    statements = parse_statements(source.text, context.settings.dialect, source.name)
    planner = _Planner(source, context, allow_overwrite)
    steps = [planner.plan(to_step(i, s, source.text, source.name)) for i, s in enumerate(statements, start=1)]
    return Workflow(source, steps, context, allow_overwrite)


def run_workflow(workflow: Workflow, listener: StageListener | None = None,
                 on_step: Callable[[StepOutcome], None] | None = None, analyze: bool = False,
                 result_format: str | None = None) -> WorkflowRun:
    """Run the steps in order; the last SELECT's rows are the result (written as ``result_format``, csv or
    json, straight away when given)."""
    context = workflow.context
    if workflow.is_single_query:
        planned = workflow.steps[0].planned
        assert planned is not None
        return WorkflowRun(execute(planned, context, listener, analyze, result_format))
    run = WorkflowRun(None)
    planner = _Planner(workflow.source, context, workflow.allow_overwrite)
    try:
        for checked in workflow.steps:
            step = checked.step
            try:
                outcome = _run_step(planner, step, listener, run, result_format)
            except ExecutionError as error:
                error.message = f"statement {step.number} ({step.describe()}): {error.message}"
                raise
            run.outcomes.append(outcome)
            if on_step is not None:
                on_step(outcome)
    except BaseException:
        run.close()
        raise
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


def _run_step(planner: _Planner, step: Step, listener, run: WorkflowRun, result_format: str | None) -> StepOutcome:
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
        query_run = execute(planned_step.planned, context, listener)
        try:
            database, name = split_name(write.target)
            with catalog.table_lock(write.target):  # another aipq process may write the same table
                existing = catalog.lookup(write.target)
                write = _mode_now(write, existing)
                location = existing.path if existing is not None else context.managed_location(database, name)
                commit = publish(storage, query_run.record.result_path, location, write.mode,
                                 context.settings.commit)
                if write.mode == "create":
                    options = ((CREATED_BY, planner.creator or "workflow"),)
                    catalog.register(TableEntry(database, name, commit.path, "parquet",
                                                read_schema(context.spark, storage, commit.path, "parquet"),
                                                options))
                    planner.view.changes.pop(write.target, None)
                elif commit.path != location:
                    assert existing is not None
                    catalog.register(replace(existing, path=commit.path))
                commit.cleanup()
            rows = query_run.record.result_rows
        finally:
            query_run.close()
        verb = {"create": "created", "overwrite": "overwrote", "append": "appended to"}[write.mode]
        return StepOutcome(step, f"{verb} {write.target}: {rows:,} row(s)", time.perf_counter() - started)
    if isinstance(step, AnalyzeStep):
        return _analyze(context, catalog, step, started)
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
