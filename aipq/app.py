"""What the commands do, without the command line: the CLI parses arguments, calls these and renders."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from aipq.catalog import FORMATS, Catalog, TableEntry, split_name
from aipq.config import Settings, home_writable, master_cores
from aipq.engine.executor import RunRecord, StageListener, keep_work_dir, remove_work_dir, run_dag
from aipq.engine.session import SparkCatalogLookup, get_session, read_schema
from aipq.engine.statistics import collector_for
from aipq.errors import BadInputError, ExecutionError
from aipq.estimator.edge_inputs import EdgeEstimator, SessionFacts
from aipq.estimator.parameters import load_calibration
from aipq.files import local_path
from aipq.pipeline import PlannedQuery
from aipq.planner.resolve import find_word
from aipq.planner.stages import StageDag
from aipq.stats.fingerprint import data_files
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.planner import plan_statistics
from aipq.stats.repository import StatsRepository
from aipq.tpch import generate as tpch_generate
from aipq.tpch.queries import query_text


@dataclass(frozen=True)
class SqlSource:
    text: str
    name: str


def load_sql(source: str | None, inline: str | None) -> SqlSource:
    """SQL from a file, ``-`` (stdin), ``tpch:N`` (a bundled TPC-H query) or ``--sql`` text; a leading UTF-8
    byte-order mark (as some Windows editors write) is dropped."""
    found = _read_sql(source, inline)
    return SqlSource(found.text.removeprefix("\ufeff"), found.name)


def _read_sql(source: str | None, inline: str | None) -> SqlSource:
    if inline is not None:
        if source is not None:
            raise BadInputError("give either a FILE or --sql, not both")
        return SqlSource(inline, "<--sql>")
    if source is None:
        raise BadInputError("no query given", hint="aipq run FILE, aipq run tpch:5, or aipq run --sql 'SELECT …'")
    if source == "-":
        return SqlSource(sys.stdin.read(), "<stdin>")
    if source.lower().startswith("tpch:"):
        number = source.split(":", 1)[1].lstrip("qQ")
        if not number.isdigit() or not 1 <= int(number) <= 22:
            raise BadInputError(f"{source!r} is not a TPC-H query", hint="use tpch:1 … tpch:22")
        return SqlSource(query_text(int(number)), f"tpch:q{int(number)}")
    path = Path(source)
    if not path.is_file():
        raise BadInputError(f"no such SQL file: {source}")
    try:
        return SqlSource(path.read_text(), str(path))
    except UnicodeDecodeError as error:
        raise BadInputError(f"{source} is not a UTF-8 text file") from error


def needs_spark_catalog(settings: Settings) -> bool:
    return settings.spark_conf.get("spark.sql.catalogImplementation") == "hive"


def open_catalog(home: Path, settings: Settings) -> Catalog:
    catalog = Catalog(home)
    if needs_spark_catalog(settings):
        catalog = catalog.with_fallbacks(SparkCatalogLookup(get_session(settings, home)))
    return catalog



@dataclass
class QueryRun:
    spark: object
    planned: PlannedQuery
    record: RunRecord

    def close(self) -> None:
        remove_work_dir(self.record)

    def keep(self) -> None:
        keep_work_dir(self.record)


def uses_statistics(home: Path, settings: Settings) -> bool:
    """Statistics are read and stored unless turned off or the home is read-only."""
    return settings.statistics != "off" and home_writable(home)


def planning_estimator(dag: StageDag, home: Path, settings: Settings) -> EdgeEstimator | None:
    """For explain without running: strategy ``adaptive``'s estimator over what is known before the run."""
    if settings.ip != "adaptive":
        return None
    repository = StatsRepository(home) if uses_statistics(home, settings) else None
    return EdgeEstimator(dag, settings, repository, load_calibration(home),
                         session=SessionFacts(parallelism=master_cores(settings.master)))


def known_stage_sizes(dag: StageDag, home: Path, settings: Settings) -> dict[int, dict]:
    """Per stage, the output size an earlier query with the same subplan recorded (explain shows it)."""
    if not uses_statistics(home, settings):
        return {}
    repository = StatsRepository(home)
    known = {}
    for stage in dag.stages:
        found = repository.stage(stage_plan_key(dag, stage.id), lambda path: data_files(path).fingerprint)
        if found is not None:
            known[stage.id] = {"rows": found.rows, "bytes": found.bytes, "collected_by": found.collected_by}
    return known


def statistics_plan(dag: StageDag, home: Path, settings: Settings) -> list[dict]:
    """For explain: per input table, the statistics a run would collect and those already known."""
    if not uses_statistics(home, settings):
        return []
    needs = plan_statistics(dag, StatsRepository(home), settings.stats_columns)
    if settings.statistics == "recollect":
        for need in needs:
            need.missing, need.has_table_stats = need.columns, False
    return [need.as_dict() for need in needs]


def check_table_data(dag: StageDag) -> None:
    """Every local table the query reads still has its data (a data fault, exit 1, before Spark starts)."""
    for stage in dag.stages:
        for node in stage.plan.walk():
            table = getattr(node, "table", None)
            local = local_path(table.path) if table is not None and table.source == "aipq" else None
            if local is not None and not local.exists():
                raise ExecutionError(f"the data of table {table.qualified_name} is gone: no file or folder {local}",
                                     hint="restore it, or register the table again with `aipq table add`")


def execute(planned: PlannedQuery, home: Path, settings: Settings,
            listener: StageListener | None = None, analyze: bool = False) -> QueryRun:
    """Run a planned query; Spark starts here, so bad SQL fails in planning without paying for a JVM."""
    check_table_data(planned.dag)
    spark = get_session(settings, home)
    collector = collector_for(spark, planned.dag, home, settings, planned.source_name or "query")
    try:
        record = run_dag(spark, planned.dag, settings, home, listener, analyze, collector)
    except BadInputError as error:
        name = getattr(error, "missing_name", None)
        if error.position is None and name:
            error.position = find_word(planned.sql, name.split(".")[-1])
            error.source_name = planned.source_name
        raise
    return QueryRun(spark, planned, record)


def add_table(home: Path, settings: Settings, name: str, path: str, fmt: str) -> tuple[TableEntry, bool]:
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    database, table = split_name(name)
    if not table.isidentifier():
        raise BadInputError(f"{name!r} is not a valid table name", hint="use letters, digits and underscores")
    if not path.strip():
        raise BadInputError("no data path given", hint="aipq table add NAME PATH")
    location = path if "://" in path else str(Path(path).expanduser().resolve())
    if "://" not in path and not Path(location).exists():
        raise BadInputError(f"no data at {path}")
    catalog = Catalog(home)
    catalog.check_writable()  # before Spark starts
    spark = get_session(settings, home)
    columns = read_schema(spark, location, fmt)
    entry = TableEntry(database, table, location, fmt, columns)
    replaced = catalog.register(entry)
    return entry, replaced


def generate_tpch(home: Path, scale_factor: float, database: str,
                  parts: int = 1) -> list[TableEntry]:
    """TPC-H through tpchgen-cli, registered with its known schema (no Spark session needed)."""
    folder = tpch_generate.generate(home, scale_factor, parts)
    catalog = Catalog(home)
    entries = []
    for table in tpch_generate.TABLES:
        location = str(tpch_generate.table_path(folder, table))
        entry = TableEntry(database, table, location, "parquet", tpch_generate.COLUMNS[table])
        catalog.register(entry)
        entries.append(entry)
    return entries
