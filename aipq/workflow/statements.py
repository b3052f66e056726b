"""A workflow: ``;``-separated statements run in order, later ones seeing what earlier ones created.

This module turns parsed statements into steps and keeps the workflow's view of the catalog (tables it has
created or dropped so far, its temporary views), so the whole file can be planned — and its mistakes found —
before anything runs. Running the steps is ``workflow/steps.py``'s job (``workflow/run.py`` in order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp, parse_one

from aipq.catalog import DEFAULT_DATABASE, Catalog, TableEntry, split_name
from aipq.errors import BadInputError, UnsupportedSqlError
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key, referenced_tables
from aipq.setting_aliases import alias_for

# Settings a Hive workflow sets for MapReduce that have no meaning here; accepted and ignored (except those
# naming one of aipq's knobs: setting_aliases).
# the formats aipq writes tables in (Spark data source names, as Hive's STORED AS names them)
WRITE_FORMATS = ("parquet", "orc")
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
class ShowStep(QueryStep):
    """SHOW TABLES [IN db], SHOW PARTITIONS t, DESCRIBE t: the catalog's answer as rows, like a SELECT's (the
    workflow plans it as literal rows once it knows what the catalog holds at that point)."""

    what: str = "tables"  # tables | partitions | describe
    target: str = ""  # the database (tables) or the table

    @property
    def kind(self) -> str:
        return {"tables": "SHOW TABLES", "partitions": "SHOW PARTITIONS", "describe": "DESCRIBE"}[self.what]

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class WriteStep(Step):
    """CREATE TABLE … AS SELECT, INSERT OVERWRITE TABLE or INSERT INTO: a query whose rows go to a table."""

    target: str  # database.name
    query: exp.Expression = field(default=None)  # type: ignore[assignment]
    mode: str = "create"  # create | overwrite | append
    if_not_exists: bool = False
    columns: tuple[str, ...] = ()  # INSERT INTO t (a, b): the target columns the query fills, in order
    # INSERT … PARTITION (dt='2024-01-01', country): (column, static value or None for a dynamic one)
    partition: tuple[tuple[str, str | None], ...] | None = None
    partitioned_by: tuple[str, ...] = ()  # CREATE TABLE … PARTITIONED BY (dt) AS SELECT
    format: str = "parquet"  # CREATE TABLE … STORED AS ORC AS SELECT

    @property
    def kind(self) -> str:
        return {"create": "CREATE TABLE AS", "overwrite": "INSERT OVERWRITE", "append": "INSERT INTO"}[self.mode]

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class ViewStep(Step):
    """CREATE TEMPORARY VIEW (for the rest of the workflow) or CREATE VIEW (kept in the catalog, ``target``
    database.name)."""

    name: str = ""
    query: exp.Expression = field(default=None)  # type: ignore[assignment]
    columns: tuple[str, ...] = ()
    replace: bool = False
    persistent: bool = False
    target: str = ""
    if_not_exists: bool = False

    @property
    def kind(self) -> str:
        return "CREATE VIEW"

    def describe(self) -> str:
        return f"CREATE VIEW {self.target}" if self.persistent else f"CREATE TEMPORARY VIEW {self.name}"


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
class CreateTableStep(Step):
    """CREATE [EXTERNAL] TABLE t (columns) [PARTITIONED BY (columns)] [STORED AS …] [LOCATION …]: an empty
    table (or, with LOCATION, the data already there), registered in the catalog."""

    target: str = ""
    columns: tuple[tuple[str, str], ...] = ()  # data columns, then partition columns (Spark types)
    partition_columns: tuple[str, ...] = ()
    format: str = "parquet"
    location: str | None = None
    if_not_exists: bool = False
    options: tuple[tuple[str, str], ...] = ()  # how Spark reads the format (a text table's delimiter)

    @property
    def kind(self) -> str:
        return "CREATE TABLE"

    def describe(self) -> str:
        return f"CREATE TABLE {self.target}"


@dataclass(frozen=True)
class PartitionStep(Step):
    """ALTER TABLE t ADD|DROP PARTITION (…) [LOCATION …], or MSCK REPAIR TABLE t (``action`` repair): the
    table's registered partitions changed."""

    target: str = ""
    action: str = "add"  # add | drop | repair
    specs: tuple[tuple[tuple[str, str], ...], ...] = ()  # each partition's (column, value)
    locations: tuple[str | None, ...] = ()
    if_exists: bool = False  # ADD IF NOT EXISTS, DROP IF EXISTS

    @property
    def kind(self) -> str:
        return "MSCK REPAIR TABLE" if self.action == "repair" else f"ALTER TABLE {self.action.upper()} PARTITION"

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class UseStep(Step):
    """USE db: unqualified table names in the statements after it are in ``db`` (the workflow's own temporary
    views excepted)."""

    database: str = ""

    @property
    def kind(self) -> str:
        return "USE"

    def describe(self) -> str:
        return f"USE {self.database}"


@dataclass(frozen=True)
class CreateDatabaseStep(Step):
    """CREATE DATABASE [IF NOT EXISTS] db [LOCATION '…']: a database of the metastore (aipq's own catalog makes
    databases as tables name them)."""

    database: str = ""
    location: str | None = None
    if_not_exists: bool = False

    @property
    def kind(self) -> str:
        return "CREATE DATABASE"

    def describe(self) -> str:
        return f"CREATE DATABASE {self.database}"


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
        partition = None
        if isinstance(target, exp.Table) and target.args.get("partition") is not None:
            partition = _partition_spec(target.args["partition"], sql, source_name, static_only=False)
        if not isinstance(target, exp.Table):
            raise _unsupported("INSERT into something other than a table", statement, sql, source_name)
        query = statement.expression
        if isinstance(query, exp.Values):  # INSERT … VALUES: a SELECT of the literal rows, filled by position
            width = len(query.expressions[0].expressions) if isinstance(query.expressions[0], exp.Tuple) else 1
            aliased = query.copy()
            aliased.set("alias", exp.TableAlias(this=exp.to_identifier("_values"),
                                                columns=[exp.to_identifier(f"_c{i}") for i in range(width)]))
            query = exp.select("*").from_(aliased)
        if not isinstance(query, (exp.Select, exp.SetOperation, exp.Subquery)):
            raise _unsupported(f"INSERT … {query.key.upper()}", statement, sql, source_name,
                               hint="write INSERT … SELECT or INSERT … VALUES")
        return WriteStep(number, statement, _target_name(target), query,
                         mode="overwrite" if statement.args.get("overwrite") else "append", columns=columns,
                         partition=partition)
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
    if isinstance(statement, exp.Alter) and any(isinstance(a, exp.DropPartition) for a in statement.actions):
        return _drop_partitions(number, statement, sql, source_name)
    if isinstance(statement, exp.Alter) and any(isinstance(a, exp.AddPartition) for a in statement.actions):
        return _add_partitions(number, statement, sql, source_name)
    if isinstance(statement, exp.Command):
        return _command_step(number, statement, sql, source_name)
    if isinstance(statement, exp.Describe) and isinstance(statement.this, exp.Table):
        return ShowStep(number, statement, "describe", _target_name(statement.this))
    if isinstance(statement, exp.Use):
        kind = statement.args.get("kind")
        if kind is not None and kind.name.upper() not in ("DATABASE", "SCHEMA"):
            raise _unsupported(f"USE {kind.name.upper()}", statement, sql, source_name, hint="write USE database")
        return UseStep(number, statement, statement.this.name.lower())
    raise _unsupported(f"{statement.key.upper()} statements", statement, sql, source_name,
                       hint="aipq runs SELECT, CREATE TABLE [AS SELECT], CREATE DATABASE, INSERT OVERWRITE/INTO … "
                            "SELECT, CREATE TEMPORARY VIEW, DROP TABLE/VIEW, ALTER TABLE ADD/DROP PARTITION, "
                            "MSCK REPAIR TABLE, ANALYZE TABLE, USE and SET")


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


def _create_database_step(number: int, statement: exp.Create) -> CreateDatabaseStep:
    properties = statement.args.get("properties")
    location = next((p.this.name for p in (properties.expressions if properties else [])
                     if isinstance(p, exp.LocationProperty)), None)
    return CreateDatabaseStep(number, statement, statement.this.name.lower(), location,
                              bool(statement.args.get("exists")))


def _create_step(number: int, statement: exp.Create, sql: str, source_name: str | None) -> Step:
    kind = (statement.args.get("kind") or "").upper()
    target = statement.this
    columns: tuple[str, ...] = ()
    if kind in ("DATABASE", "SCHEMA"):
        return _create_database_step(number, statement)
    if isinstance(target, exp.Schema) and kind == "TABLE":
        return _create_table_step(number, statement, sql, source_name)
    if isinstance(target, exp.Schema):
        columns = tuple(c.name.lower() for c in target.expressions if isinstance(c, (exp.Identifier, exp.Column)))
        if len(columns) != len(target.expressions):
            raise _unsupported("CREATE VIEW with column types", statement, sql, source_name)
        target = target.this
    query = statement.expression
    if not isinstance(query, (exp.Select, exp.SetOperation, exp.Subquery)):
        raise _unsupported(f"CREATE {kind} without AS SELECT", statement, sql, source_name,
                           hint="use CREATE TABLE name AS SELECT …, or register existing data with aipq table add")
    if kind == "VIEW":
        properties = statement.args.get("properties")
        temporary = properties is not None and any(
            isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
        return ViewStep(number, statement, target.name.lower(), query, columns,
                        replace=bool(statement.args.get("replace")), persistent=not temporary,
                        target=_target_name(target), if_not_exists=bool(statement.args.get("exists")))
    if kind != "TABLE":
        raise _unsupported(f"CREATE {kind}", statement, sql, source_name)
    partitioned_by: tuple[str, ...] = ()
    fmt = "parquet"
    properties = statement.args.get("properties")
    for prop in properties.expressions if properties is not None else []:
        if isinstance(prop, exp.FileFormatProperty):
            fmt = prop.name.lower()
            if fmt not in WRITE_FORMATS:
                raise _unsupported(f"STORED AS {prop.name.upper()}", prop, sql, source_name,
                                   hint="aipq writes parquet and ORC tables")
        if isinstance(prop, exp.PartitionedByProperty):
            members = prop.this.expressions if isinstance(prop.this, exp.Schema) else [prop.this]
            if not all(isinstance(m, (exp.Identifier, exp.Column)) for m in members):
                raise _unsupported("PARTITIONED BY with column types in CREATE TABLE … AS SELECT", prop, sql,
                                   source_name, hint="name the query's columns to partition by: PARTITIONED BY (dt)")
            partitioned_by = tuple(m.name.lower() for m in members)
        if isinstance(prop, (exp.LocationProperty, exp.ExternalProperty)):
            raise _unsupported("CREATE EXTERNAL TABLE or LOCATION with AS SELECT", prop, sql, source_name,
                               hint="create the table with its columns, then INSERT into it")
    if statement.args.get("replace"):
        return WriteStep(number, statement, _target_name(target), query, mode="overwrite",
                         partitioned_by=partitioned_by, format=fmt)
    return WriteStep(number, statement, _target_name(target), query, mode="create",
                     if_not_exists=bool(statement.args.get("exists")), partitioned_by=partitioned_by, format=fmt)


def _spark_type(kind: exp.DataType) -> str:
    return kind.sql(dialect="spark").lower()


def _create_table_step(number: int, statement: exp.Create, sql: str, source_name: str | None) -> Step:
    schema = statement.this
    if statement.expression is not None:
        raise _unsupported("CREATE TABLE with both a column list and AS SELECT", statement, sql, source_name,
                           hint="CREATE TABLE name AS SELECT … takes its columns from the query")
    columns = []
    for definition in schema.expressions:
        if not isinstance(definition, exp.ColumnDef) or definition.args.get("kind") is None:
            raise _unsupported("a column without a type", definition, sql, source_name, hint="write name TYPE")
        columns.append((definition.name.lower(), _spark_type(definition.args["kind"])))
    partition_columns: list[tuple[str, str]] = []
    fmt, location, delimiter = "parquet", None, "\x01"  # Hive's default field delimiter: Ctrl-A
    properties = statement.args.get("properties")
    for prop in properties.expressions if properties is not None else []:
        if isinstance(prop, exp.PartitionedByProperty):
            for definition in prop.this.expressions if isinstance(prop.this, exp.Schema) else [prop.this]:
                if not isinstance(definition, exp.ColumnDef) or definition.args.get("kind") is None:
                    raise _unsupported("a partition column without a type", definition, sql, source_name,
                                       hint="write PARTITIONED BY (name TYPE, …)")
                partition_columns.append((definition.name.lower(), _spark_type(definition.args["kind"])))
        elif isinstance(prop, exp.FileFormatProperty):
            fmt = prop.name.lower()
        elif isinstance(prop, exp.LocationProperty):
            location = prop.this.name if isinstance(prop.this, exp.Literal) else prop.this.sql()
        elif isinstance(prop, exp.RowFormatDelimitedProperty) and prop.args.get("fields") is not None:
            delimiter = prop.args["fields"].name
    options: tuple[tuple[str, str], ...] = ()
    if fmt == "textfile" and location is not None:  # Hive's delimited text, read as Spark's CSV without header
        fmt, options = "csv", (("header", "false"), ("sep", delimiter), ("inferSchema", "false"),
                               ("nullValue", "\\N"), ("quote", ""))  # Hive writes NULL as \N and quotes nothing
    elif fmt not in WRITE_FORMATS:
        raise _unsupported(f"STORED AS {fmt.upper()}", statement, sql, source_name,
                           hint="aipq writes parquet and ORC tables; a TEXTFILE table is read from its LOCATION")
    names = [name for name, _ in columns + partition_columns]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise BadInputError(f"column {duplicate!r} is named twice", position=node_position(schema, sql),
                            source_name=source_name, hint="a partition column is not also a data column in Hive")
    return CreateTableStep(number, statement, _target_name(schema.this), tuple(columns + partition_columns),
                           tuple(name for name, _ in partition_columns), fmt, location,
                           bool(statement.args.get("exists")), options)


def _partition_spec(partition: exp.Expression, sql: str, source_name: str | None,
                    static_only: bool) -> tuple[tuple[str, str | None], ...]:
    """PARTITION (dt='2024-01-01', country): (column, value text), None for a dynamic column (Hive: after the
    static ones)."""
    spec: list[tuple[str, str | None]] = []
    for item in partition.expressions:
        if isinstance(item, exp.EQ) and isinstance(item.this, exp.Column) and isinstance(
                item.expression, (exp.Literal, exp.Neg)):
            value = item.expression
            spec.append((item.this.name.lower(), f"-{value.this.name}" if isinstance(value, exp.Neg) else value.name))
        elif isinstance(item, exp.Column) and not static_only:
            spec.append((item.name.lower(), None))
        else:
            raise _unsupported("this partition spec", item, sql, source_name,
                               hint="write PARTITION (col = 'value', …)" + ("" if static_only else " or (col)"))
    dynamic = [i for i, (_, value) in enumerate(spec) if value is None]
    if dynamic and any(spec[i][1] is not None for i in range(dynamic[0], len(spec))):
        raise _unsupported("a static partition value after a dynamic one", partition, sql, source_name,
                           hint="list the static partition columns first, as Hive requires")
    return tuple(spec)


def _drop_partitions(number: int, statement: exp.Alter, sql: str, source_name: str | None) -> Step:
    specs, if_exists = [], False
    for action in statement.actions:
        if not isinstance(action, exp.DropPartition):
            raise _unsupported("this ALTER TABLE", action, sql, source_name)
        if_exists = if_exists or bool(action.args.get("exists"))
        for partition in action.expressions:
            specs.append(_partition_spec(partition, sql, source_name, static_only=True))
    return PartitionStep(number, statement, _target_name(statement.this), "drop", tuple(specs),
                         tuple(None for _ in specs), if_exists)


def _add_partitions(number: int, statement: exp.Alter, sql: str, source_name: str | None) -> Step:
    specs, locations, if_not_exists = [], [], False
    for action in statement.actions:
        if not isinstance(action, exp.AddPartition):
            raise _unsupported("this ALTER TABLE", action, sql, source_name)
        if_not_exists = if_not_exists or bool(action.args.get("exists"))
        specs.append(_partition_spec(action.this, sql, source_name, static_only=True))
        location = action.args.get("location")
        locations.append(location.this.name if isinstance(location, exp.LocationProperty) else None)
    return PartitionStep(number, statement, _target_name(statement.this), "add", tuple(specs), tuple(locations),
                         if_not_exists)


_ADD_PARTITION = re.compile(
    r"^\s*table\s+(?P<table>[\w.`]+)\s+add\s+(?P<exists>if\s+not\s+exists\s+)?(?P<rest>partition\b.*)$",
    re.IGNORECASE | re.DOTALL)
_ONE_PARTITION = re.compile(r"\s*partition\s*(?P<spec>\([^)]*\))(?:\s*location\s+(?P<location>'[^']*'|\"[^\"]*\"))?",
                            re.IGNORECASE)


def _command_step(number: int, statement: exp.Command, sql: str, source_name: str | None) -> Step:
    """The statements sqlglot leaves as text: ALTER TABLE … ADD PARTITION and MSCK REPAIR TABLE (their table
    name as written: the workflow puts an unqualified one in the current database)."""
    command = statement.name.upper()
    text = statement.expression.name if isinstance(statement.expression, exp.Literal) else str(
        statement.expression or "")
    if command == "MSCK REPAIR" or command == "MSCK":
        match = re.match(r"^\s*(?:repair\s+)?table\s+([\w.`]+)\s*(?:add\s+partitions\s*)?$", text, re.IGNORECASE)
        if match is None:
            raise _unsupported("this form of MSCK", statement, sql, source_name, hint="write MSCK REPAIR TABLE name")
        return PartitionStep(number, statement, match.group(1).replace("`", "").lower(), "repair")
    if command == "SHOW":
        match = re.match(r"^\s*(?:(tables)(?:\s+(?:in|from)\s+([\w`]+))?|(partitions)\s+([\w.`]+))\s*$", text,
                         re.IGNORECASE)
        if match is None:
            raise _unsupported(f"SHOW {text.split()[0].upper() if text.split() else ''}".strip(), statement, sql,
                               source_name, hint="aipq answers SHOW TABLES [IN db], SHOW PARTITIONS t and DESCRIBE t")
        if match.group(1):  # the current database unless named (the workflow fills it in)
            return ShowStep(number, statement, "tables", (match.group(2) or "").replace("`", "").lower())
        return ShowStep(number, statement, "partitions", match.group(4).replace("`", "").lower())
    if command == "ALTER":
        match = _ADD_PARTITION.match(text)
        if match is not None:
            specs, locations, rest = [], [], match.group("rest")
            while rest.strip():
                one = _ONE_PARTITION.match(rest)
                if one is None:
                    raise _unsupported("this ALTER TABLE … ADD PARTITION", statement, sql, source_name,
                                       hint="write ALTER TABLE t ADD PARTITION (col = 'value') [LOCATION 'path']")
                parsed = parse_one(f"INSERT INTO t PARTITION {one.group('spec')} SELECT 1", read="hive")
                specs.append(_partition_spec(parsed.this.args["partition"], sql, source_name, static_only=True))
                locations.append(one.group("location")[1:-1] if one.group("location") else None)
                rest = rest[one.end():]
            return PartitionStep(number, statement, match.group("table").replace("`", "").lower(), "add",
                                 tuple(specs), tuple(locations), bool(match.group("exists")))
    raise _unsupported(f"{command} {text.split()[0].upper() if text.split() else ''}".strip(), statement, sql,
                       source_name, hint="aipq runs ALTER TABLE … ADD/DROP PARTITION and MSCK REPAIR TABLE")


def in_database(statement: exp.Expression, database: str, views: set[str]) -> exp.Expression:
    """The statement with every unqualified table name (not a CTE, not one of the workflow's temporary
    ``views``) put in ``database``, as ``USE database`` asks."""
    kind = str(statement.args.get("kind") or "").upper() if isinstance(statement, (exp.Create, exp.Drop)) else ""
    if database == DEFAULT_DATABASE:
        return statement
    statement = statement.copy()
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    properties = statement.args.get("properties") if kind == "VIEW" else None
    temporary = properties is not None and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
    view_name = statement.find(exp.Table) if kind == "VIEW" and temporary else None
    for table in statement.find_all(exp.Table):
        if table.name and not table.db and table is not view_name and table.name.lower() not in ctes | views:
            table.set("db", exp.to_identifier(database))
    return statement


class WorkflowCatalog:
    """The catalog as the workflow sees it at one point: the base catalog plus the tables and views earlier
    statements created (or dropped) and the temporary views they defined."""

    def __init__(self, base: Catalog):
        self.base = base
        self.changes: dict[str, TableEntry | None] = {}  # database.name → entry (None: dropped)
        self.views: dict[str, exp.Expression] = {}  # name → the view's query, views inside it expanded
        self.kept_views: dict[str, str | None] = {}  # database.name → a catalog view's query text (None: dropped)

    def lookup(self, name: str) -> TableEntry | None:
        key = ".".join(split_name(name))
        if key in self.changes:
            return self.changes[key]
        return self.base.lookup(key)

    def view_query(self, name: str) -> str | None:
        """The query text of a view kept in the catalog (as this workflow left it), None if there is none."""
        key = ".".join(split_name(name))
        return self.kept_views[key] if key in self.kept_views else self.base.view_query(key)

    def known_names(self) -> list[str]:
        names = set(self.base.known_names()) | set(self.views) | set(self.base.view_names())
        for key, entry in [*self.changes.items(), *self.kept_views.items()]:
            short = key.removeprefix("default.")
            if entry is None:
                names.discard(short)
            else:
                names.add(short)
        return sorted(names)

    def expand_views(self, statement: exp.Expression, depth: int = 0) -> exp.Expression:
        """The statement with every reference to a view replaced by the view's query: a temporary view's, or
        one kept in the catalog (whose own views are expanded in turn)."""
        statement = statement.copy()
        for table in referenced_tables(statement):
            view = None
            if not table.db and table.name.lower() in self.views:
                view = self.views[table.name.lower()].copy()
            else:
                text = self.view_query(qualified_key(table))
                if text is not None:
                    if depth > 32:
                        raise BadInputError(f"view {qualified_key(table)} reads itself, through other views",
                                            hint="drop and recreate one of the views")
                    view = self.expand_views(parse_one(text, read="hive"), depth + 1)
            if view is not None:
                alias = table.alias or table.name
                table.replace(exp.Subquery(this=view, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        return statement

    def define_view(self, step: ViewStep, sql: str, source_name: str | None) -> None:
        if step.name in self.views and not step.replace:
            raise BadInputError(f"view {step.name!r} already exists", position=node_position(step.statement.this,
                                                                                               sql),
                                source_name=source_name, hint="use CREATE OR REPLACE TEMPORARY VIEW")
        self.views[step.name] = self.expand_views(view_query(step))


def view_query(step: ViewStep) -> exp.Expression:
    """The view's query, its columns renamed as the view's column list says."""
    if not step.columns:
        return step.query
    return exp.select(*[exp.column(f"_c{i}").as_(c) for i, c in enumerate(step.columns)]).from_(
        exp.Subquery(this=step.query, alias=exp.TableAlias(
            this=exp.to_identifier("_view"), columns=[exp.to_identifier(f"_c{i}") for i in range(len(step.columns))])))
