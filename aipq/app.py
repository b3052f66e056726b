"""What the commands do, without the command line: the CLI parses arguments, calls these and renders."""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from aipq.catalog import FORMATS, Catalog, Partition, TableEntry, split_name
from aipq.config import master_cores
from aipq.engine.context import RunContext
from aipq.engine.executor import RunOptions, StageListener, run_dag
from aipq.engine.handoff import Handoff, handoff_decision, run_handed_off
from aipq.engine.records import RunRecord
from aipq.engine.session import read_schema, table_rows
from aipq.engine.statistics import collector_for
from aipq.engine.storage import Storage, is_local, local_path
from aipq.engine.tables import partition_folders, rewrite_columns
from aipq.engine.work_dirs import keep_work_dir, remove_work_dir
from aipq.errors import BadInputError, ExecutionError
from aipq.estimator.edge_inputs import EdgeEstimator, SessionFacts, adaptive_estimator
from aipq.estimator.join_estimates import KnownTables, stage_estimate_figures
from aipq.ip.explain import explain_dict
from aipq.ip.planner import IpPlanner, StageDecisions, Strategy
from aipq.pipeline import PlannedQuery, worst_order_text
from aipq.planner.resolve import find_word
from aipq.planner.stages import StageDag
from aipq.replanner import Reoptimizer
from aipq.stats.fingerprint import data_files
from aipq.stats.plan_key import stage_plan_key
from aipq.stats.planner import plan_statistics
from aipq.tpcds import generate as tpcds_generate
from aipq.tpcds.queries import query_text as tpcds_query_text
from aipq.tpch import generate as tpch_generate
from aipq.tpch import skew as tpch_skew
from aipq.tpch.queries import query_text


@dataclass(frozen=True)
class SqlSource:
    text: str
    name: str
    # what a workflow given as text (``aipq.sql``) is known by, for its journal and the tables it created: a
    # digest of the text; a file is known by its path
    identity: str | None = None


def load_sql(source: str | None, inline: str | None) -> SqlSource:
    """SQL from a file, ``-`` (stdin), ``tpch:N`` (a bundled TPC-H query), ``tpcds:N`` (a TPC-DS query) or
    ``--sql`` text; a leading UTF-8 byte-order mark (as some Windows editors write) is dropped."""
    found = _read_sql(source, inline)
    return SqlSource(found.text.removeprefix("\ufeff"), found.name)


def statements_file(source: str | None) -> str | None:
    """The SQL file a run's source names (None for stdin, tpch:N, tpcds:N or --sql), which it must never write."""
    if source is None or source == "-" or source.lower().startswith(("tpch:", "tpcds:")):
        return None
    return source if Path(source).is_file() else None


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
    if source.lower().startswith("tpcds:"):
        number = source.split(":", 1)[1].lstrip("qQ")
        if not number.isdigit() or not 1 <= int(number) <= 99:
            raise BadInputError(f"{source!r} is not a TPC-DS query", hint="use tpcds:1 … tpcds:99")
        return SqlSource(tpcds_query_text(int(number)), f"tpcds:q{int(number)}")
    path = Path(source)
    if not path.is_file():
        raise BadInputError(f"no such SQL file: {source}")
    try:
        return SqlSource(path.read_text(), str(path))
    except UnicodeDecodeError as error:
        raise BadInputError(f"{source} is not a UTF-8 text file") from error


@dataclass
class QueryRun:
    spark: object
    planned: PlannedQuery
    record: RunRecord
    storage: Storage
    frame: object | None = None  # a handed-off query's result as Spark's DataFrame, when asked for instead of files

    def close(self) -> None:
        remove_work_dir(self.storage, self.record.work_dir)

    def keep(self) -> None:
        keep_work_dir(self.storage, self.record.work_dir)


def planning_estimator(dag: StageDag, context: RunContext) -> EdgeEstimator | None:
    """For explain without running: strategy ``adaptive``'s estimator over what is known before the run."""
    settings = context.settings
    return adaptive_estimator(dag, settings, context.repository, context.calibration,
                              lambda: SessionFacts(files=context.storage, parallelism=master_cores(settings.master)))


def planned_explain(query: PlannedQuery, context: RunContext) -> dict:
    """What explain shows of a query without running it: the stage DAG with the decisions strategy ``adaptive``'s
    estimator makes from what is known now, each stage's estimated rows, the statistics a run would collect and
    the output sizes earlier runs of the same subplans recorded (the CLI and the Python API alike)."""
    dag = query.dag
    decisions = IpPlanner(dag, context.settings, estimator=planning_estimator(dag, context)).plan_all()
    info = explain_dict(dag, context.settings, decisions)
    figures = stage_estimates(dag, context, decisions=decisions)
    known = known_stage_sizes(dag, context)
    for stage in info["stages"]:
        stage.update(figures.get(stage["id"], {}))
        stage["known_output"] = known.get(stage["id"])
    info["statistics"] = statistics_plan(dag, context)
    handoff = query_handoff(query, context)
    info["handoff"] = {"chosen": handoff.chosen, "why": handoff.why}
    return info


def known_stage_sizes(dag: StageDag, context: RunContext) -> dict[int, dict]:
    """Per stage, the output size an earlier query with the same subplan recorded (explain shows it)."""
    repository = context.repository
    if repository is None:
        return {}
    known = {}
    for stage in dag.stages:
        found = repository.stage(stage_plan_key(dag, stage.id),
                                 lambda path: data_files(context.storage, path).fingerprint)
        if found is not None:
            known[stage.id] = {"rows": found.rows, "bytes": found.bytes, "collected_by": found.collected_by}
    return known


def stage_estimates(dag: StageDag, context: RunContext, measured: dict[int, dict] | None = None,
                    history_before: float | None = math.inf,
                    decisions: Iterable[StageDecisions] = ()) -> dict[int, dict]:
    """Per stage, its output rows as estimated before it ran (from the same subplan's rows in a run recorded before
    ``history_before``, else from the tables' statistics; None: statistics alone), times the share the
    summaries its ``decisions`` chose were expected to keep, and, for a stage ``measured`` as written (a run's
    figures by stage id), how far off they were (``estimator.join_estimates.stage_estimate_figures``)."""
    tables = KnownTables(context.repository, context.storage, history_before)
    written = {stage_id: (bool(ran["materialized"]), ran["rows_written"]) for stage_id, ran in (measured or {}).items()}
    return stage_estimate_figures(dag, tables, written, {d.stage: d.rows_kept for d in decisions})


def statistics_plan(dag: StageDag, context: RunContext) -> list[dict]:
    """For explain: per input table, the statistics a run would collect and those already known."""
    if context.repository is None:
        return []
    needs = plan_statistics(dag, context.repository, context.storage, context.settings.stats_columns)
    if context.settings.statistics == "recollect":
        for need in needs:
            need.missing, need.known = need.columns, None
    return [need.as_dict() for need in needs]


def check_table_data(dag: StageDag, storage: Storage) -> None:
    """Every table the query reads still has its data, on any store (a data fault, exit 1, before any stage
    runs)."""
    for stage in dag.stages:
        for node in stage.plan.walk():
            table = getattr(node, "table", None)
            if table is not None and table.source == "aipq" and not storage.exists(table.path):
                raise ExecutionError(f"the data of table {table.qualified_name} is gone: no file or folder "
                                     f"{table.path}",
                                     hint="restore it, or register the table again with `aipq table add`")


def execute(planned: PlannedQuery, context: RunContext, listener: StageListener | None = None,
            analyze: bool = False, result_format: str | None = None, shared: frozenset[str] = frozenset(),
            shared_scans: dict | None = None, ip_strategy: Strategy | None = None,
            keep_frame: bool = False) -> QueryRun:
    """Run a planned query; Spark starts here, so bad SQL fails in planning without paying for a JVM. With
    ``result_format`` csv or json the result is written in that form straight away; ``shared``: the cache keys of
    stages other queries of a batch compute too, ``shared_scans`` its tables read once for all of them;
    ``ip_strategy``: a strategy object instead of the settings' (a benchmark measuring one decision). A query in
    which aipq chooses nothing is handed to Spark whole (``query_handoff``); with ``keep_frame`` its result is then
    the run's DataFrame, not files."""
    check_table_data(planned.dag, context.storage)
    handoff = query_handoff(planned, context, ip_strategy, bool(shared or shared_scans))
    if handoff.chosen:
        record, frame = run_handed_off(context, planned.statement, planned.dag, handoff.why,
                                       result_format or "parquet", keep_frame)
        return QueryRun(context.spark, planned, record, context.storage, frame)
    collector = collector_for(context, planned.dag, planned.source_name or "query")
    try:
        replanner = Reoptimizer(planned, context) if Reoptimizer.applies(planned, context) else None
        options = RunOptions(listener=listener or StageListener(), analyze=analyze, statistics=collector,
                             result_format=result_format, replanner=replanner, cache=context.stage_cache,
                             reuse=context.reuses_outputs, shared=shared, shared_scans=shared_scans,
                             ip_strategy=ip_strategy)
        record = run_dag(context, planned.dag, options)
    except BadInputError as error:
        name = getattr(error, "missing_name", None)
        if error.position is None and name:
            error.position = find_word(planned.sql, name.split(".")[-1])
            error.source_name = planned.source_name
        raise
    if record.dag is not None:  # re-planned while it ran: the stages as they ran
        planned = replace(planned, dag=record.dag)
    return QueryRun(context.spark, planned, record, context.storage)


def query_handoff(planned: PlannedQuery, context: RunContext, ip_strategy: Strategy | None = None,
                  batch_shared: bool = False) -> Handoff:
    """Whether ``planned`` is handed to Spark whole (``engine/handoff.py``), from what aipq knows before running
    it: the decisions strategy ``adaptive``'s estimator makes now (those explain shows), the plan's own rewrites,
    and whether the run would collect statistics. A query whose work a batch shares with others runs aipq's plan."""
    settings, dag = context.settings, planned.dag
    if batch_shared:
        return Handoff(False, "a batch shares part of its work with other queries")

    def decide(decisions=(), statistics_missing=False) -> Handoff:
        return handoff_decision(settings, dag, planned.statement, decisions, ip_strategy is not None,
                                planned.table is not None, statistics_missing)

    first = decide()
    if not first.chosen:
        return first
    # statistics this run would collect (tables with files: a view of rows in memory has none to collect)
    missing = settings.statistics == "recollect" or (settings.statistics == "collect" and any(
        need.missing and need.files.fingerprint for need in statistics_needs(dag, context)))
    decisions = IpPlanner(dag, settings, estimator=planning_estimator(dag, context)).plan_all()
    return decide(decisions, missing)


def statistics_needs(dag: StageDag, context: RunContext) -> list:
    if context.repository is None:
        return []
    return plan_statistics(dag, context.repository, context.storage, context.settings.stats_columns)


def keep_stage_outputs(context: RunContext) -> str | None:
    """``--keep-work``: the stage outputs this command moves into the stage-output cache stay there when it
    completes, beside its work directory. Where they go (None: no cache)."""
    cache = context.stage_cache
    if cache is None:
        return None
    cache.keeping = True
    return cache.root


def finish_stage_cache(context: RunContext) -> None:
    """The command is done: the stage outputs it kept go, unless it keeps them for later ones (``--reuse``)."""
    cache = context.stage_cache
    if cache is not None:
        cache.finish(context.reuses_outputs)


def add_table(context: RunContext, name: str, path: str, fmt: str,
              partitioned_by: tuple[str, ...] = ()) -> tuple[TableEntry, bool]:
    """Register data at ``path``; with ``partitioned_by``, data in Hive's layout (``col=value/`` folders), its
    partition folders registered as partitions and the columns' types as Spark infers them from the names."""
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    database, table = split_name(name)
    if not table.isidentifier():
        raise BadInputError(f"{name!r} is not a valid table name", hint="use letters, digits and underscores")
    if not path.strip():
        raise BadInputError("no data path given", hint="aipq table add NAME PATH")
    location = str(Path(local_path(path)).expanduser().resolve()) if is_local(path) else path
    catalog = context.catalog
    catalog.check_writable()  # before Spark starts
    if not context.storage.exists(location):
        raise BadInputError(f"no data at {path}")
    columns = read_schema(context.spark, context.storage, location, fmt)
    partitions: tuple[Partition, ...] = ()
    if partitioned_by:
        missing = f"no {'/'.join(f'{c}=…' for c in partitioned_by)} folders below {path}"
        if [c for c, _ in columns[-len(partitioned_by):]] != list(partitioned_by):
            raise BadInputError(missing, hint=f"Spark found the columns {', '.join(c for c, _ in columns)}; name "
                                              "the partition folders' columns, outermost first")
        partitions = tuple(Partition(values, folder) for values, folder in
                           partition_folders(context.storage, location, partitioned_by))
        if not partitions and context.storage.data_files(location):
            raise BadInputError(missing, hint="name every level of the partition folders, outermost first")
    entry = TableEntry(database, table, location, fmt, columns, partition_columns=partitioned_by,
                       partitions=partitions)
    replaced = catalog.register(entry)
    return entry, replaced


def collect_missing_statistics(context: RunContext, collected_by: str, database: str = "default") -> None:
    """Statistics of every TPC-H table in ``database`` that the repository lacks for its files as they are now
    (one pass each, as ``aipq stats collect``)."""
    from aipq.engine.statistics import collect_table
    from aipq.estimator.join_estimates import KnownTables

    known = KnownTables(context.repository, context.storage)
    for name in tpch_generate.TABLES:
        entry = context.catalog.lookup(f"{database}.{name}")
        if entry is not None and known.stats(entry.path) is None:
            collect_table(context, entry, None, collected_by)


def worst_order_tpch_query(context: RunContext, number: int) -> str:
    """TPC-H query ``number`` with its FROM list in the worst order that still joins each table to an earlier one
    (issue 42's bad-order variant), from the statistics of the tables as they are now."""
    text = worst_order_text(query_text(number), context.catalog, context.settings, context.join_costing())
    if text is None:
        raise BadInputError(f"TPC-H Q{number} has no bad-order variant here: its FROM list is not comma joins, or "
                            "a table has no statistics", hint="collect them with: aipq stats collect")
    return text


def generate_skewed_tpch(context: RunContext, scale_factor: float, exponent: float, database: str,
                         parts: int = 1) -> list[TableEntry]:
    """TPC-H with orders' customers and lineitem's parts drawn from a Zipf distribution of ``exponent``
    (``tpch/skew.py``): the two tables rewritten by Spark beside the uniform generation's files, renamed into
    place once complete, the other six registered from the uniform files."""
    if not math.isfinite(exponent) or exponent <= 0:
        raise BadInputError(f"--skew must be positive, not {exponent:g}",
                            hint="1 is strong skew; leave it out for uniform data")
    uniform = tpch_generate.generate(context.home, scale_factor, parts)
    target = uniform.with_name(f"{uniform.name}-{tpch_skew.skew_label(exponent)}")
    entries = [TableEntry(database, table, str(tpch_generate.table_path(uniform, table)), "parquet",
                          tpch_generate.COLUMNS[table]) for table in tpch_generate.TABLES]
    if not all((target / f"{table}.parquet").exists() for table in tpch_skew.SKEWED):
        spark = context.spark
        rows = {entry.name: table_rows(spark, context.storage, entry) for entry in entries
                if entry.name in ("customer", "part", "supplier")}
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        for table in tpch_skew.SKEWED:
            rewrite_columns(spark, str(tpch_generate.table_path(uniform, table)), str(staging / f"{table}.parquet"),
                            tpch_skew.skewed_columns(table, exponent, rows["customer"], rows["part"],
                                                     rows["supplier"]))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    entries = [replace(entry, path=str(target / f"{entry.name}.parquet")) if entry.name in tpch_skew.SKEWED else entry
               for entry in entries]
    catalog = registering_catalog(context)
    for entry in entries:
        catalog.register(entry)
    return entries


def registering_catalog(context: RunContext) -> Catalog:
    """Where generated tables are registered: the Hive metastore when the settings configure one, else aipq's
    own catalog (opened without starting Spark)."""
    return context.catalog if context.uses_metastore else Catalog(context.home)


def generate_tpcds(context: RunContext, scale_factor: float, database: str) -> list[TableEntry]:
    """TPC-DS through tpcgen-cli, registered with the schema Spark reads from its files."""
    catalog = context.catalog
    catalog.check_writable()  # before generating
    folder = tpcds_generate.generate(context.home, scale_factor)
    entries = []
    for table in tpcds_generate.TABLES:
        location = str(tpcds_generate.table_path(folder, table))
        entry = TableEntry(database, table, location, "parquet",
                           read_schema(context.spark, context.storage, location, "parquet"))
        catalog.register(entry)
        entries.append(entry)
    return entries


def generate_tpch(context: RunContext, scale_factor: float, database: str,
                  parts: int = 1) -> list[TableEntry]:
    """TPC-H through tpchgen-cli, registered with its known schema (no Spark session needed unless the tables
    go to a Hive metastore)."""
    folder = tpch_generate.generate(context.home, scale_factor, parts)
    catalog = registering_catalog(context)
    entries = []
    for table in tpch_generate.TABLES:
        location = str(tpch_generate.table_path(folder, table))
        entry = TableEntry(database, table, location, "parquet", tpch_generate.COLUMNS[table])
        catalog.register(entry)
        entries.append(entry)
    return entries
