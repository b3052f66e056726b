"""Parsed SQL statements into workflow steps (``to_step``), with a clear error, at the statement's position,
for every statement or form aipq does not run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp, parse_one

from aipq.catalog import split_name
from aipq.errors import BadInputError, UnsupportedSqlError
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key
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
    """The step the parsed ``statement`` (number ``number`` of ``source_name``, whose text is ``sql``) is; an
    ``UnsupportedSqlError`` at its position for a statement aipq does not run."""
    if isinstance(statement, (exp.Select, exp.SetOperation, exp.Subquery)):
        return QueryStep(number, statement)
    if isinstance(statement, exp.Alter) and any(isinstance(a, exp.DropPartition) for a in statement.actions):
        return _drop_partitions(number, statement, sql, source_name)
    if isinstance(statement, exp.Alter) and any(isinstance(a, exp.AddPartition) for a in statement.actions):
        return _add_partitions(number, statement, sql, source_name)
    if isinstance(statement, exp.Describe) and isinstance(statement.this, exp.Table):
        return ShowStep(number, statement, "describe", _target_name(statement.this))
    for kind, make in _STEP_MAKERS:
        if isinstance(statement, kind):
            return make(number, statement, sql, source_name)
    raise _unsupported(f"{statement.key.upper()} statements", statement, sql, source_name,
                       hint="aipq runs SELECT, CREATE TABLE [AS SELECT], CREATE DATABASE, INSERT OVERWRITE/INTO … "
                            "SELECT, CREATE TEMPORARY VIEW, DROP TABLE/VIEW, ALTER TABLE ADD/DROP PARTITION, "
                            "MSCK REPAIR TABLE, ANALYZE TABLE, USE and SET")


def _insert_step(number: int, statement: exp.Insert, sql: str, source_name: str | None) -> Step:
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


def _drop_step(number: int, statement: exp.Drop, sql: str, source_name: str | None) -> Step:
    kind = (statement.args.get("kind") or "").upper()
    if kind not in ("TABLE", "VIEW"):
        raise _unsupported(f"DROP {kind}", statement, sql, source_name)
    tables = statement.args.get("tables") or [statement.this]
    if len(tables) != 1:
        raise _unsupported("DROP of several tables in one statement", statement, sql, source_name)
    return DropStep(number, statement, _target_name(tables[0]), bool(statement.args.get("exists")),
                    view=kind == "VIEW")


def _set_step(number: int, statement: exp.Set, sql: str, source_name: str | None) -> Step:
    items = statement.expressions
    if len(items) != 1 or not isinstance(items[0].this, exp.EQ):
        raise _unsupported("SET without KEY=VALUE", statement, sql, source_name, hint="write SET key=value")
    assignment = items[0].this
    key = assignment.this.sql(dialect="hive").replace(" ", "")
    value = assignment.expression
    text = value.name if isinstance(value, (exp.Literal, exp.Column, exp.Identifier)) else value.sql("hive")
    return SetStep(number, statement, key, str(text))


def _use_step(number: int, statement: exp.Use, sql: str, source_name: str | None) -> Step:
    kind = statement.args.get("kind")
    if kind is not None and kind.name.upper() not in ("DATABASE", "SCHEMA"):
        raise _unsupported(f"USE {kind.name.upper()}", statement, sql, source_name, hint="write USE database")
    return UseStep(number, statement, statement.this.name.lower())


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
    if statement.args.get("replace"):  # Spark's CREATE OR REPLACE TABLE: the new table's columns and format
        return WriteStep(number, statement, _target_name(target), query, mode="create", or_replace=True,
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


# Each kind of statement (after those ``to_step`` tells apart by more than their kind) and the step it makes.
_STEP_MAKERS: tuple[tuple[type[exp.Expression], Callable[[int, Any, str, str | None], Step]], ...] = (
    (exp.Create, _create_step), (exp.Insert, _insert_step), (exp.Drop, _drop_step), (exp.Set, _set_step),
    (exp.Analyze, _analyze_step), (exp.Command, _command_step), (exp.Use, _use_step))
