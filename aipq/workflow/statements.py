"""A workflow: ``;``-separated statements run in order, later ones seeing what earlier ones created. Each
statement is a step of one kind (this module: a query, a table write, a view, …); ``workflow/statement_parser.py``
turns parsed SQL into them, ``workflow/catalog_view.py`` keeps the catalog as the workflow sees it, and
``workflow/steps.py`` runs them (``workflow/run.py`` in order)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from aipq.setting_aliases import alias_for

# the formats aipq writes tables in (Spark data source names, as Hive's STORED AS names them)
WRITE_FORMATS = ("parquet", "orc")
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
    or_replace: bool = False  # CREATE OR REPLACE TABLE … AS SELECT: an existing table is dropped, then created anew

    @property
    def kind(self) -> str:
        if self.or_replace:
            return "CREATE OR REPLACE TABLE AS"
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

