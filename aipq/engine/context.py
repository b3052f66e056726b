"""What one command runs with, built once: the home, the settings, and (made on first use) the Spark session,
storage, catalog, statistics repository and calibration. A workflow's SET gives a statement other settings over
the same session, storage and catalog (``with_settings``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from aipq.catalog import DEFAULT_DATABASE, Catalog, TableEntry
from aipq.config import Settings, home_writable, master_cores
from aipq.engine.footers import FooterStatistics, footer_statistics
from aipq.engine.jvm import temporary_view_names
from aipq.engine.metastore import URIS_SETTINGS, MetastoreCatalog, check_reachable
from aipq.engine.session import get_session, hive_catalog, launched_by_spark_submit
from aipq.engine.session_tables import SessionCatalogTables, SessionTemporaryViews
from aipq.engine.stage_cache import FOLDER, StageCache, session_result_settings, session_user_functions
from aipq.engine.storage import Storage, is_local, join, local_path, parent
from aipq.estimator.join_estimates import JoinEstimates, KnownTables, join_costing
from aipq.estimator.parameters import Calibration, load_calibration
from aipq.planner.join_order import JoinCosting
from aipq.planner.logical import Scan
from aipq.stats.repository import StatsRepository


@dataclass
class _Shared:
    """What every statement of a command shares, whatever its settings."""

    spark: object | None = None
    checked: Settings | None = None  # the settings last checked against the running session
    storage: Storage | None = None
    catalog: Catalog | None = None
    repository: StatsRepository | None = None
    calibration: Calibration | None = None
    stage_cache: StageCache | None = None
    given: bool = False  # the session is the caller's (``aipq.sql(..., spark=…)``): used as it is


@dataclass(frozen=True)
class RunContext:
    home: Path
    settings: Settings = field(default_factory=Settings)
    _shared: _Shared = field(default_factory=_Shared, repr=False, compare=False)

    def with_settings(self, settings: Settings) -> RunContext:
        return replace(self, settings=settings)

    def with_repository(self, repository: StatsRepository) -> RunContext:
        """This context reading and storing statistics in ``repository`` instead of the home's (a benchmark's
        run that starts with none known), sharing the process's session, the catalog and the calibration."""
        return replace(self, _shared=replace(self._shared, repository=repository))

    def on_session(self, spark) -> RunContext:
        """This context on a session the caller made: its settings, temporary views and UDFs as they are."""
        return replace(self, _shared=replace(self._shared, spark=spark, checked=self.settings, given=True,
                                             catalog=None))

    def as_new_command(self) -> RunContext:
        """This context as a command of its own: the same session, storage, catalog and repository, its own
        stage-output cache."""
        return replace(self, _shared=replace(self._shared, stage_cache=None))

    @property
    def spark(self):
        """The Spark session, started on first use (planning alone needs none); a setting fixed at start that
        these settings give differently is an error (``get_session``)."""
        if self._shared.given:
            return self._shared.spark
        if self._shared.spark is None or self._shared.checked != self.settings:
            self._shared.spark = get_session(self.settings, self.home)  # checks these settings' fixed ones
            self._shared.checked = self.settings
        return self._shared.spark

    @property
    def started_spark(self):
        """The session if this command started (or was given) one, else None (without starting it)."""
        return self._shared.spark

    @property
    def storage(self) -> Storage:
        if self._shared.storage is None:
            self._shared.storage = Storage(lambda: self.spark)
        return self._shared.storage

    @property
    def catalog(self) -> Catalog:
        """The Hive metastore when the session is configured for one (``engine/metastore.py``), else aipq's own
        catalog; a session handed to aipq adds its temporary views before it and its catalog's tables after it,
        as ``spark.sql`` resolves names on it (``engine/session_tables.py``)."""
        if self._shared.catalog is None:
            tables = (SessionCatalogTables(self.spark),) if self._shared.given else ()
            if self.uses_metastore:
                if not self._shared.given:  # before Spark starts: a metastore that is down fails in seconds
                    check_reachable(self.settings.spark_conf.get(URIS_SETTINGS[0], ""))
                catalog: Catalog = MetastoreCatalog(self.home, self.spark, tables)
            else:
                catalog = Catalog(self.home, tables)
            if self._shared.given:
                catalog.shadowing = (SessionTemporaryViews(self.spark, self.storage),)
            self._shared.catalog = catalog
        return self._shared.catalog

    @property
    def current_database(self) -> str:
        """Where unqualified table names are before a workflow's USE: a given session's current database
        (``USE`` or ``spark.catalog.setCurrentDatabase`` on it), else ``default``."""
        if not self._shared.given:
            return DEFAULT_DATABASE
        return self.spark.catalog.currentDatabase().lower()

    def session_temporary_views(self) -> set[str]:
        """The names of a given session's temporary views (never put in a database), none for aipq's own."""
        return {name.lower() for name in temporary_view_names(self.spark)} if self._shared.given else set()

    @property
    def uses_metastore(self) -> bool:
        """Whether tables live in a Hive metastore: Spark's catalog is Hive's, by this command's settings or the
        given session's."""
        if self._shared.given or launched_by_spark_submit():  # the session's settings decide
            return self.spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "hive"
        return hive_catalog(self.settings)

    @property
    def uses_statistics(self) -> bool:
        """Statistics are read and stored unless turned off or the home is read-only."""
        return self.settings.statistics != "off" and home_writable(self.home)

    @property
    def repository(self) -> StatsRepository | None:
        if not self.uses_statistics:
            return None
        if self._shared.repository is None:
            self._shared.repository = StatsRepository(self.home)
        return self._shared.repository

    @property
    def calibration(self) -> Calibration:
        if self._shared.calibration is None:
            self._shared.calibration = load_calibration(self.home, self.settings.master)
        return self._shared.calibration

    def join_costing(self, estimates: JoinEstimates | None = None) -> JoinCosting:
        """What join orders (``--plan cost``) and pre-aggregation are priced with: the repository's statistics of
        the tables as they are now, their files' footers for tables it does not know (or ``estimates``, a
        re-plan's), and the calibrated unit costs."""
        if estimates is None:
            estimates = JoinEstimates(KnownTables(self.repository, self.storage), footers=self.table_footers())
        return join_costing(self.settings, estimates.tables, self.calibration, master_cores(self.settings.master),
                            estimates)

    def table_footers(self) -> Callable[[Scan], FooterStatistics | None]:
        """What a table's files' footers tell (parquet's rows, min and max), for plans over tables without
        statistics; read only when asked, since they need the Spark session."""
        return lambda scan: footer_statistics(self.spark, self.storage, scan.table)

    @property
    def stage_cache(self) -> StageCache | None:
        """This command's view of the stage-output cache beside the runs' work directories (None with
        ``--cache-size 0``)."""
        if self.settings.cache_size <= 0:
            return None
        if self._shared.stage_cache is None:
            self._shared.stage_cache = StageCache(self.storage, join(self.runs_dir, FOLDER), self.settings.cache_size,
                                                  session_settings=lambda: session_result_settings(self.spark),
                                                  user_functions=lambda: session_user_functions(self.spark))
        self._shared.stage_cache.limit = self.settings.cache_size  # a workflow's SET may change it
        return self._shared.stage_cache

    @property
    def reuses_outputs(self) -> bool:
        return self.settings.reuse == "on"

    @property
    def warehouse(self) -> str:
        """Where CREATE TABLE … AS SELECT puts tables' data: ``--warehouse`` or ``<home>/warehouse``."""
        return self.settings.warehouse or str(Path(self.home) / "warehouse")

    def managed_location(self, database: str, name: str) -> str:
        """A managed table's data folder (Hive's warehouse layout): in a metastore's database folder unless
        ``--warehouse`` says where."""
        catalog = self.catalog
        if isinstance(catalog, MetastoreCatalog) and not self.settings.warehouse:
            return join(catalog.database_location(database) or join(self.warehouse, f"{database}.db"), name)
        return join(self.warehouse, f"{database}.db", name)

    def in_managed_folder(self, entry: TableEntry) -> bool:
        """Whether a table's data lies where managed tables of its database are kept (so dropping it may delete
        it): below ``--warehouse``, or the metastore's database folder."""
        folder = parent(self.managed_location(entry.database, entry.name))
        if self.settings.warehouse or not isinstance(self.catalog, MetastoreCatalog):
            folder = self.warehouse
        below = local_path(folder).rstrip("/") + "/" if is_local(folder) else folder.rstrip("/") + "/"
        return (local_path(entry.path) if is_local(entry.path) else entry.path).startswith(below)

    @property
    def runs_dir(self) -> str:
        """Where runs keep their stage outputs: ``--work-dir``, ``<home>/runs``, or a folder under the system's
        temporary one when the home is read-only."""
        if self.settings.work_dir:
            return self.settings.work_dir
        if home_writable(Path(self.home)):
            return str(Path(self.home) / "runs")
        return str(Path(tempfile.gettempdir()) / f"aipq-runs-{os.getuid()}")
