"""The one package through which aipq reaches into Spark's JVM with py4j, a module per JVM concern, mirroring
aipq's own JVM classes (``java/src``, shipped as ``jars/aipq-spark.jar``):

- ``gateway``: class lookups, DataFrames and Columns from JVM objects, the jar and its session extensions;
- ``plans``: DataFrames and lazily analysed plans from SQL text (``Plans``), observations;
- ``bloom``: Bloom filter aggregates and probes (``BroadcastMightContain``), hash sets, the probe gate;
- ``sketches``: column sketches gathered in generated code (``ColumnSketches``);
- ``figures``: a job group's I/O, rows through counted filters, join operators;
- ``files``: Hadoop files (``Storage``) and parquet footers (``FooterStatistics``);
- ``metastore``: the external catalog; ``settings``: runtime SQL settings (``Confs``);
- ``driver``: the driver JVM itself (py4j socket, versions, cluster shape, stopping).

Spark 4.3 has no SQL or Python API for its Bloom filter expressions (``bloom_filter_agg`` and ``might_contain``
are internal), and PySpark's status tracker has no shuffle byte counts. Everything here is a small function over
Spark internals that ``tests/test_jvm.py`` exercises directly, so a Spark upgrade that moves them fails loudly
there rather than silently elsewhere. Callers write ``jvm.might_contain(...)``: the names below are the package's
face; tests/test_layers.py keeps every py4j use inside it.
"""

from aipq.engine.jvm.bloom import (
    BloomFilterShape,
    bloom_broadcast,
    bloom_filter_agg,
    bloom_filter_shape,
    destroy_broadcast,
    gate_unprobed_rows,
    in_hash_set,
    might_contain,
    might_contain_column,
    probe_gate,
)
from aipq.engine.jvm.driver import (
    ClusterShape,
    aipq_classes_loaded,
    clone_session,
    cluster_shape,
    disable_nagle,
    java_spark_context,
    java_version,
    session_stopped,
    stop_and_wait,
)
from aipq.engine.jvm.figures import (
    ShuffleFigures,
    codegen_compilations,
    counted_filter,
    filter_row_counts,
    job_group_figures,
    job_groups_figures,
    join_strategies,
)
from aipq.engine.jvm.files import (
    FooterColumn,
    HadoopFiles,
    ParquetFooters,
    hadoop_setting,
    parquet_footer_statistics,
    parquet_footers,
)
from aipq.engine.jvm.gateway import (
    AIPQ_EXTENSIONS,
    COLLECTOR_JAR,
    LONG_DECIMALS_EXTENSION,
    SKETCH_BATCHES_EXTENSION,
    jar_spark_version,
)
from aipq.engine.jvm.metastore import (
    MetastoreTable,
    TemporaryView,
    class_loadable,
    metastore_database_location,
    metastore_databases,
    metastore_partitions,
    metastore_table,
    metastore_table_names,
    temporary_view,
    temporary_view_names,
)
from aipq.engine.jvm.plans import (
    LazyPlan,
    aggregate_sets_sql,
    observe,
    observed_metrics,
    observed_value,
    select_sql,
    seq_size,
)
from aipq.engine.jvm.settings import swap_sql_conf
from aipq.engine.jvm.sketches import SKETCH_MEMORY_CLASS, ColumnSketcher, SketchedColumn, load_sketch_memory_quietly

__all__ = [
    "AIPQ_EXTENSIONS", "BloomFilterShape", "COLLECTOR_JAR", "ClusterShape", "ColumnSketcher", "FooterColumn",
    "HadoopFiles", "LONG_DECIMALS_EXTENSION", "LazyPlan", "MetastoreTable", "ParquetFooters",
    "SKETCH_BATCHES_EXTENSION", "SKETCH_MEMORY_CLASS", "ShuffleFigures", "SketchedColumn", "aggregate_sets_sql",
    "aipq_classes_loaded", "bloom_broadcast", "bloom_filter_agg", "bloom_filter_shape", "class_loadable",
    "clone_session", "cluster_shape", "codegen_compilations", "counted_filter", "destroy_broadcast",
    "disable_nagle", "filter_row_counts", "gate_unprobed_rows", "hadoop_setting", "in_hash_set",
    "jar_spark_version", "java_spark_context", "java_version",
    "job_group_figures",
    "job_groups_figures", "join_strategies", "load_sketch_memory_quietly", "metastore_database_location",
    "metastore_databases", "metastore_partitions", "metastore_table", "metastore_table_names", "might_contain",
    "might_contain_column", "observe", "observed_metrics", "observed_value", "parquet_footer_statistics",
    "parquet_footers", "probe_gate", "select_sql", "seq_size", "session_stopped", "stop_and_wait",
    "swap_sql_conf", "temporary_view", "temporary_view_names", "TemporaryView",
]
