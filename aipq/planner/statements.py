"""A workflow: ``;``-separated statements run in order, later ones seeing what earlier ones created.

This module turns parsed statements into steps and keeps the workflow's view of the catalog (tables it has
created or dropped so far, its temporary views), so the whole file can be planned — and its mistakes found —
before anything runs. Running the steps is ``aipq.app``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from aipq.catalog import Catalog, TableEntry, split_name
from aipq.errors import BadInputError, UnsupportedSqlError
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key, referenced_tables
from aipq.setting_aliases import alias_for

# Settings a Hive workflow sets for MapReduce that have no meaning here; accepted and ignored (except those
# naming one of aipq's knobs: setting_aliases).
IGNORED_SETTING_PREFIXES = ("hive.", "mapred.", "mapreduce.", "tez.", "yarn.", "dfs.", "io.")


@dataclass(frozen=True)
class Step:
    number: int
    statement: exp.Expression

    @property
    def kind(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True)
class QueryStep(Step):
    """A SELECT (or set operation): its rows are the workflow's result if it is the last one."""

    @property
    def kind(self) -> str:
        return "SELECT"

    @property
    def query(self) -> exp.Expression:
        return self.statement


@dataclass(frozen=True)
class WriteStep(Step):
    """CREATE TABLE … AS SELECT, INSERT OVERWRITE TABLE or INSERT INTO: a query whose rows go to a table."""

    target: str  # database.name
    query: exp.Expression = field(default=None)  # type: ignore[assignment]
    mode: str = "create"  # create | overwrite | append
    if_not_exists: bool = False
    columns: tuple[str, ...] = ()  # INSERT INTO t (a, b): the target columns the query fills, in order

    @property
    def kind(self) -> str:
        return {"create": "CREATE TABLE AS", "overwrite": "INSERT OVERWRITE", "append": "INSERT INTO"}[self.mode]

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class ViewStep(Step):
    name: str = ""
    query: exp.Expression = field(default=None)  # type: ignore[assignment]
    columns: tuple[str, ...] = ()
    replace: bool = False

    @property
    def kind(self) -> str:
        return "CREATE VIEW"

    def describe(self) -> str:
        return f"CREATE TEMPORARY VIEW {self.name}"


@dataclass(frozen=True)
class DropStep(Step):
    target: str = ""
    if_exists: bool = False
    view: bool = False

    @property
    def kind(self) -> str:
        return "DROP VIEW" if self.view else "DROP TABLE"

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class AnalyzeStep(Step):
    """ANALYZE TABLE t COMPUTE STATISTICS [FOR COLUMNS a, b]: statistics collected now, in one pass (as
    ``aipq stats collect``); NOSCAN reads no rows (file sizes are read at planning anyway)."""

    target: str = ""
    columns: tuple[str, ...] = ()  # none: every column
    scan: bool = True

    @property
    def kind(self) -> str:
        return "ANALYZE TABLE"

    def describe(self) -> str:
        return f"ANALYZE TABLE {self.target}"


@dataclass(frozen=True)
class SetStep(Step):
    key: str = ""
    value: str = ""

    @property
    def kind(self) -> str:
        return "SET"

    def describe(self) -> str:
        return f"SET {self.key}={self.value}"

    @property
    def ignored(self) -> bool:
        key = self.key.lower()
        return key.startswith(IGNORED_SETTING_PREFIXES) and alias_for(key) is None


def _unsupported(what: str, node: exp.Expression, sql: str, source_name: str | None,
                 hint: str | None = None) -> UnsupportedSqlError:
    position = node_position(node, sql)
    if position is None:
        inner = next(iter(node.find_all(exp.Identifier)), None)
        position = node_position(inner, sql) if inner is not None else None
    return UnsupportedSqlError(f"unsupported SQL: {what}", position=position, source_name=source_name, hint=hint)


def _target_name(table: exp.Expression) -> str:
    return qualified_key(table) if isinstance(table, exp.Table) else ".".join(split_name(table.sql()))


def to_step(number: int, statement: exp.Expression, sql: str, source_name: str | None) -> Step:
    if isinstance(statement, (exp.Select, exp.SetOperation, exp.Subquery)):
        return QueryStep(number, statement)
    if isinstance(statement, exp.Create):
        return _create_step(number, statement, sql, source_name)
    if isinstance(statement, exp.Insert):
        target = statement.this
        columns: tuple[str, ...] = ()
        if isinstance(target, exp.Schema):
            columns = tuple(c.name.lower() for c in target.expressions)
            target = target.this
        if statement.args.get("partition") or target.find(exp.Partition):
            raise _unsupported("INSERT into a PARTITION", statement, sql, source_name,
                               hint="write the whole table (partitioned tables come later)")
        if not isinstance(target, exp.Table):
            raise _unsupported("INSERT into something other than a table", statement, sql, source_name)
        query = statement.expression
        if not isinstance(query, (exp.Select, exp.SetOperation, exp.Subquery)):
            raise _unsupported("INSERT … VALUES", statement, sql, source_name,
                               hint="INSERT … SELECT works; load literal rows from a file with aipq table add")
        return WriteStep(number, statement, _target_name(target), query,
                         mode="overwrite" if statement.args.get("overwrite") else "append", columns=columns)
    if isinstance(statement, exp.Drop):
        kind = (statement.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            raise _unsupported(f"DROP {kind}", statement, sql, source_name)
        tables = statement.args.get("tables") or [statement.this]
        if len(tables) != 1:
            raise _unsupported("DROP of several tables in one statement", statement, sql, source_name)
        return DropStep(number, statement, _target_name(tables[0]), bool(statement.args.get("exists")),
                        view=kind == "VIEW")
    if isinstance(statement, exp.Set):
        items = statement.expressions
        if len(items) != 1 or not isinstance(items[0].this, exp.EQ):
            raise _unsupported("SET without KEY=VALUE", statement, sql, source_name, hint="write SET key=value")
        assignment = items[0].this
        key = assignment.this.sql(dialect="hive").replace(" ", "")
        value = assignment.expression
        text = value.name if isinstance(value, (exp.Literal, exp.Column, exp.Identifier)) else value.sql("hive")
        return SetStep(number, statement, key, str(text))
    if isinstance(statement, exp.Analyze):
        return _analyze_step(number, statement, sql, source_name)
    if isinstance(statement, exp.Use):
        raise _unsupported("USE", statement, sql, source_name, hint="qualify table names as database.table")
    raise _unsupported(f"{statement.key.upper()} statements", statement, sql, source_name,
                       hint="aipq runs SELECT, CREATE TABLE … AS SELECT, INSERT OVERWRITE/INTO … SELECT, "
                            "CREATE TEMPORARY VIEW, DROP TABLE/VIEW, ANALYZE TABLE and SET")


def _analyze_step(number: int, statement: exp.Analyze, sql: str, source_name: str | None) -> Step:
    tables = statement.args.get("tables") or []
    statistics = statement.expression
    if (statement.args.get("kind") or "").upper() != "TABLE" or len(tables) != 1 or not isinstance(
            statistics, exp.AnalyzeStatistics) or (statistics.args.get("kind") or "").upper() != "COMPUTE":
        raise _unsupported("this form of ANALYZE", statement, sql, source_name,
                           hint="write ANALYZE TABLE name COMPUTE STATISTICS [FOR COLUMNS a, b]")
    how = statistics.this.sql().upper() if isinstance(statistics.this, exp.Expression) else str(
        statistics.this or "").upper()
    columns = tuple(c.name.lower() for c in statistics.expressions)
    if how and how not in ("NOSCAN", "FOR COLUMNS", "FOR ALL COLUMNS"):
        raise _unsupported(f"ANALYZE … {how}", statement, sql, source_name,
                           hint="write ANALYZE TABLE name COMPUTE STATISTICS [FOR COLUMNS a, b]")
    return AnalyzeStep(number, statement, _target_name(tables[0]), columns, scan=how != "NOSCAN")


def _create_step(number: int, statement: exp.Create, sql: str, source_name: str | None) -> Step:
    kind = (statement.args.get("kind") or "").upper()
    target = statement.this
    columns: tuple[str, ...] = ()
    if isinstance(target, exp.Schema):
        columns = tuple(c.name.lower() for c in target.expressions if isinstance(c, (exp.Identifier, exp.Column)))
        if kind == "TABLE" or len(columns) != len(target.expressions):
            raise _unsupported("CREATE TABLE with a column list", statement, sql, source_name,
                               hint="create tables with CREATE TABLE name AS SELECT …")
        target = target.this
    query = statement.expression
    if not isinstance(query, (exp.Select, exp.SetOperation, exp.Subquery)):
        raise _unsupported(f"CREATE {kind} without AS SELECT", statement, sql, source_name,
                           hint="use CREATE TABLE name AS SELECT …, or register existing data with aipq table add")
    if kind == "VIEW":
        properties = statement.args.get("properties")
        temporary = properties is not None and any(
            isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
        if not temporary:
            raise _unsupported("CREATE VIEW (a view kept in the catalog)", statement, sql, source_name,
                               hint="use CREATE TEMPORARY VIEW: it lives for the rest of the workflow")
        return ViewStep(number, statement, target.name.lower(), query, columns,
                        replace=bool(statement.args.get("replace")))
    if kind != "TABLE":
        raise _unsupported(f"CREATE {kind}", statement, sql, source_name)
    properties = statement.args.get("properties")
    for prop in properties.expressions if properties is not None else []:
        if isinstance(prop, exp.FileFormatProperty) and prop.name.lower() != "parquet":
            raise _unsupported(f"STORED AS {prop.name.upper()}", prop, sql, source_name,
                               hint="aipq writes parquet; drop the STORED AS clause")
        if isinstance(prop, exp.PartitionedByProperty):
            raise _unsupported("PARTITIONED BY", prop, sql, source_name)
    if statement.args.get("replace"):
        return WriteStep(number, statement, _target_name(target), query, mode="overwrite")
    return WriteStep(number, statement, _target_name(target), query, mode="create",
                     if_not_exists=bool(statement.args.get("exists")))


class WorkflowCatalog:
    """The catalog as the workflow sees it at one point: the base catalog plus the tables earlier statements
    created (or dropped) and the temporary views they defined."""

    def __init__(self, base: Catalog):
        self.base = base
        self.changes: dict[str, TableEntry | None] = {}  # database.name → entry (None: dropped)
        self.views: dict[str, exp.Expression] = {}  # name → the view's query, views inside it expanded

    def lookup(self, name: str) -> TableEntry | None:
        key = ".".join(split_name(name))
        if key in self.changes:
            return self.changes[key]
        return self.base.lookup(key)

    def known_names(self) -> list[str]:
        names = set(self.base.known_names()) | set(self.views)
        for key, entry in self.changes.items():
            short = key.removeprefix("default.")
            if entry is None:
                names.discard(short)
            else:
                names.add(short)
        return sorted(names)

    def expand_views(self, statement: exp.Expression) -> exp.Expression:
        """The statement with every reference to a temporary view replaced by the view's query."""
        if not self.views:
            return statement
        statement = statement.copy()
        for table in referenced_tables(statement):
            if table.db or table.name.lower() not in self.views:
                continue
            alias = table.alias or table.name
            view = self.views[table.name.lower()]
            table.replace(exp.Subquery(this=view.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias))))
        return statement

    def define_view(self, step: ViewStep, sql: str, source_name: str | None) -> None:
        if step.name in self.views and not step.replace:
            raise BadInputError(f"view {step.name!r} already exists", position=node_position(step.statement.this,
                                                                                               sql),
                                source_name=source_name, hint="use CREATE OR REPLACE TEMPORARY VIEW")
        query = self.expand_views(step.query)
        if step.columns:
            query = exp.select(*[exp.column(f"_c{i}").as_(c) for i, c in enumerate(step.columns)]).from_(
                exp.Subquery(this=query, alias=exp.TableAlias(
                    this=exp.to_identifier("_view"),
                    columns=[exp.to_identifier(f"_c{i}") for i in range(len(step.columns))])))
        self.views[step.name] = query
