"""Plan a workflow file: every statement checked and planned before anything runs, against the catalog as it will
be after each earlier statement (``WorkflowCatalog``), so a typo in the fifth statement fails in a second, not
after four long writes. The runner plans each statement again just before it runs, with a planner of its own
(``WorkflowPlanner.for_run``), when the tables earlier statements wrote exist and have real sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from aipq.catalog import DEFAULT_DATABASE, Partition, TableEntry, split_name
from aipq.config import Settings
from aipq.engine.context import RunContext
from aipq.errors import BadInputError, UnknownNameError
from aipq.pipeline import PlannedQuery, plan_statement
from aipq.planner.logical import Project
from aipq.planner.parse import node_position, parse_statements
from aipq.planner.partitions import value_fits
from aipq.planner.resolve import referenced_tables
from aipq.planner.table_output import TableShape
from aipq.setting_aliases import alias_for, apply_alias
from aipq.workflow.catalog_view import WorkflowCatalog, in_database, view_query
from aipq.workflow.journal import Journal, durable
from aipq.workflow.model import CREATED_BY, PlannedStep, Workflow, created_by, creator_id
from aipq.workflow.resume import committed_before_kill, journal_for
from aipq.workflow.source import SqlSource
from aipq.workflow.statement_parser import to_step
from aipq.workflow.statements import (
    WRITE_FORMATS,
    AnalyzeStep,
    CreateDatabaseStep,
    CreateTableStep,
    DropStep,
    PartitionStep,
    QueryStep,
    SetStep,
    ShowStep,
    Step,
    UseStep,
    ViewStep,
    WriteStep,
)


@dataclass(frozen=True)
class ResumePoint:
    """What ``--resume`` decided from the journal: the statements not run again, and those the interrupted run
    committed that run again (edited since, or after an edited one; a table such a CREATE TABLE … AS SELECT
    created then is replaced, not an error)."""

    resumed: frozenset[int] = frozenset()
    redone: frozenset[int] = frozenset()


class WorkflowPlanner:
    """Walks the steps with the workflow's view of the catalog, checking and planning each one."""

    def __init__(self, source: SqlSource, context: RunContext, allow_overwrite: bool,
                 resume: ResumePoint = ResumePoint()):
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
        self.databases: set[str] = set()  # the databases the workflow's CREATE DATABASE statements make
        self.resume = resume

    @classmethod
    def for_run(cls, workflow: Workflow) -> WorkflowPlanner:
        """A planner walking the workflow again as it runs, from the catalog as it is now."""
        return cls(workflow.source, workflow.context, workflow.allow_overwrite,
                   ResumePoint(workflow.resumed, workflow.redone))

    def plan(self, step: Step) -> PlannedStep:
        planned = PlannedStep(step, self.settings)
        if step.number in self.resume.resumed:
            planned.skip_reason = "done before the interruption (--resume)"
            return planned
        for kind in type(step).__mro__:
            if kind in _PLANNERS:
                getattr(self, _PLANNERS[kind])(step, planned)
                break
        return planned

    def plan_select(self, step: QueryStep, planned: PlannedStep) -> None:
        planned.planned = self.plan_query(step.query)

    def plan_show(self, step: ShowStep, planned: PlannedStep) -> None:
        planned.planned = self.plan_query(self.catalog_rows(step))

    def plan_view(self, step: ViewStep, planned: PlannedStep) -> None:
        if step.persistent:
            self.plan_kept_view(step, planned)
            return
        self.plan_query(step.query)  # only to check it
        self.view.define_view(step, self.source.text, self.source.name)

    def plan_set(self, step: SetStep, planned: PlannedStep) -> None:
        try:
            self.settings = apply_setting(self.settings, step)
        except BadInputError as error:
            raise self.error_at(step, error.message, step.statement, hint=error.hint) from None
        planned.settings = self.settings
        if step.ignored:
            planned.skip_reason = "a Hive/MapReduce setting with no meaning here; ignored"

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
        return step.number in self.resume.redone and self.creator is not None and created_by(entry) == self.creator

    def check_replace(self, step: Step, target: str, entry: TableEntry, verb: str) -> None:
        if not self.may_replace(target, entry):
            raise self.error_at(step, f"would {verb} table {target}, which this workflow did not create",
                                step.statement.this,
                                hint="rerun with --allow-overwrite (allow_overwrite=True from Python) if that is "
                                     "what you want")

    def plan_query(self, query: exp.Expression, table: TableShape | None = None) -> PlannedQuery:
        return plan_statement(self.view.expand_views(query), self.source.text, self.view, self.settings,
                              self.context.storage, self.source.name, table, self.context.join_costing())

    def plan_write(self, step: WriteStep, planned: PlannedStep) -> None:
        existing = self.view.lookup(step.target)
        if step.mode == "create" and existing is not None and self.redoes(step, existing):
            existing = None  # replaced when it runs (``steps.write_table``)
        if step.or_replace and existing is not None:  # dropped when it runs, then created anew
            self.check_replace(step, step.target, existing, "replace")
            existing = None
        if step.mode == "create" and existing is not None:
            if step.if_not_exists:
                planned.skip_reason = "the table exists (IF NOT EXISTS)"
                return
            raise self.error_at(step, f"table {step.target} already exists", step.statement.this,
                                hint="use CREATE TABLE IF NOT EXISTS, INSERT OVERWRITE TABLE, or DROP TABLE first")
        if step.mode != "create" and existing is None and not isinstance(step.statement, exp.Create):
            raise self.error_at(step, f"unknown table {step.target}", step.statement.this,
                                hint="create it first with CREATE TABLE", cls=UnknownNameError)
        if existing is None:  # CREATE TABLE … AS SELECT, or CREATE OR REPLACE of a new table
            self.plan_new_table(step, planned)
            return
        if existing.source == "view":
            raise self.error_at(step, f"{step.target} is a temporary view of the session; aipq writes tables",
                                step.statement.this, hint="write a table, then make the view over its files")
        if existing.format not in WRITE_FORMATS or existing.source == "spark":
            raise self.error_at(step, f"table {step.target} is {existing.format} data; aipq writes parquet and ORC "
                                "tables", step.statement.this)
        if step.mode == "overwrite":
            self.check_replace(step, step.target, existing, "overwrite")
        if existing.partitioned:
            self.plan_partitioned_write(step, planned, existing)
            return
        if step.partition is not None:
            raise self.error_at(step, f"table {step.target} is not partitioned", step.statement.this,
                                hint="leave out the PARTITION clause")
        planned.planned = self.plan_query(step.query, TableShape(step.target, existing.columns, step.columns,
                                                                 format=existing.format))

    def plan_create_database(self, step: CreateDatabaseStep, planned: PlannedStep) -> None:
        self.databases.add(step.database)

    def check_database(self, step: Step, target: str) -> None:
        """A new table or view goes into a database that exists (or that an earlier statement creates): Hive and
        Spark refuse it otherwise, and so does aipq, before anything runs."""
        database, _ = split_name(target)
        if database not in self.databases and not self.view.base.database_exists(database):
            raise self.error_at(step, f"[SCHEMA_NOT_FOUND] The schema `{database}` cannot be found",
                                step.statement.this, hint=f"create it first: CREATE DATABASE {database}")

    def plan_new_table(self, step: WriteStep, planned: PlannedStep) -> None:
        self.check_database(step, step.target)
        planned.planned = self.plan_query(step.query, TableShape(step.target, partition_by=step.partitioned_by,
                                                                 format=step.format))
        database, name = split_name(step.target)
        self.view.changes[step.target] = TableEntry(
            database, name, self.context.managed_location(database, name), step.format,
            table_columns(planned.planned), partition_columns=step.partitioned_by)
        self.created.add(step.target)
        planned.step = replace(step, mode="create")

    def plan_partitioned_write(self, step: WriteStep, planned: PlannedStep, existing: TableEntry) -> None:
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
        self.check_database(step, step.target)
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
        matched = [p for p in entry.partitions if any(matches(p, entry, spec) for spec in step.specs)]
        missing = [spec for spec in step.specs if not any(matches(p, entry, spec) for p in entry.partitions)]
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
        self.check_database(step, step.target)
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


# the planning method of each kind of statement (a subclass finds its own before its base's)
_PLANNERS: dict[type, str] = {
    ShowStep: "plan_show", QueryStep: "plan_select", ViewStep: "plan_view", WriteStep: "plan_write",
    DropStep: "plan_drop", AnalyzeStep: "plan_analyze", CreateTableStep: "plan_create_table",
    PartitionStep: "plan_partitions", SetStep: "plan_set", CreateDatabaseStep: "plan_create_database",
}


def plan_workflow(source: SqlSource, context: RunContext, allow_overwrite: bool = False, record: bool = False,
                  resume: bool = False) -> Workflow:
    """Plan every statement; with ``record`` (``aipq run`` of a file) the run records what it commits in the
    file's journal, and with ``resume`` the statements an interrupted run committed (the journal's leading done
    ones) are skipped."""
    journal = journal_for(source, context, resume) if record or resume else None
    statements = parse_statements(source.text, context.settings.dialect, source.name)
    planner = WorkflowPlanner(source, context, allow_overwrite)
    walk = _ResumeWalk(journal if resume else None, planner)
    steps = []
    database = context.current_database
    views = context.session_temporary_views() if database != DEFAULT_DATABASE else set()
    for number, statement in enumerate(statements, start=1):
        step = to_step(number, in_database(statement, database, views), source.text, source.name)
        step = in_current_database(step, database)
        if isinstance(step, UseStep):
            database = step.database
        elif isinstance(step, ViewStep):
            views.add(step.name)
        walk.visit(step)
        steps.append(planner.plan(step))
    return Workflow(source, steps, context, allow_overwrite, journal, planner.resume.resumed, resume,
                    planner.resume.redone)


class _ResumeWalk:
    """Which statements a resumed run skips (the leading ones the journal has as committed) and which it runs
    again though the interrupted run committed them; the planner learns each as the walk reaches it."""

    def __init__(self, journal: Journal | None, planner: WorkflowPlanner):
        self.journal = journal
        self.planner = planner
        self.skipping = journal is not None

    def visit(self, step: Step) -> None:
        journal, planner = self.journal, self.planner
        if journal is None:
            return
        resume = planner.resume
        if self.skipping and durable(step):
            if journal.done(step) or committed_before_kill(planner.context, planner.creator, journal, step):
                planner.resume = replace(resume, resumed=resume.resumed | {step.number})
                return
            self.skipping = False
        if not self.skipping and str(step.number) in journal.entries:
            planner.resume = replace(resume, redone=resume.redone | {step.number})


def in_current_database(step: Step, database: str) -> Step:
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


def new_table(context: RunContext, step: CreateTableStep) -> TableEntry:
    """The catalog entry of CREATE TABLE (no data yet, or an external table's data at its LOCATION)."""
    database, name = split_name(step.target)
    location = step.location or context.managed_location(database, name)
    options = step.options if step.location else ((CREATED_BY, "workflow"),)
    return TableEntry(database, name, location, step.format, step.columns, options,
                      partition_columns=step.partition_columns)


def _spec_text(spec: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(f"{c}='{v}'" for c, v in spec) + ")"


def matches(partition: Partition, entry: TableEntry, spec: tuple[tuple[str, str], ...]) -> bool:
    values = dict(zip(entry.partition_columns, partition.values))
    return all(values[c] == v for c, v in spec)


def table_columns(planned: PlannedQuery) -> tuple[tuple[str, str], ...]:
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
