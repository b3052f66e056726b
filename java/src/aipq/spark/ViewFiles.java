package aipq.spark;

import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A session's temporary view as aipq resolves it: its columns and, when it is a plain parquet read of one path as
 * {@code spark.read.parquet(path)} makes it, the files Spark listed for it. One call, since walking the view's plan
 * over py4j costs a round trip per step and analysing it again (what {@code spark.table} does) milliseconds.
 */
public final class ViewFiles {
    private static final Set<String> PLAIN_READ_OPTIONS = Set.of("path", "paths");

    private ViewFiles() {
    }

    /**
     * The temporary view {@code name} (a global one with {@code global}), or null when there is none: its schema
     * as JSON, then, a line each, the path it reads and every file Spark listed for it as {@code
     * path<TAB>length<TAB>modification ms} (the URI's path part) when it is a plain parquet read.
     */
    public static String describe(SparkSession spark, String name, boolean global, int mostFiles) {
        SessionCatalog catalog = spark.sessionState().catalog();
        Option<View> view = global ? catalog.getGlobalTempView(name) : catalog.getTempView(name);
        if (view.isEmpty()) {
            return null;
        }
        String files = plainParquetRead(view.get(), mostFiles);
        return view.get().desc().schema().json() + (files == null ? "" : "\n" + files);
    }

    /**
     * The path {@code plan} reads and its files, one line each; null unless the plan is one parquet relation over
     * one path with no reader option, partition column or bucket, listing at most {@code mostFiles} files.
     */
    private static String plainParquetRead(LogicalPlan plan, int mostFiles) {
        while (plan instanceof SubqueryAlias || plan instanceof View) {
            plan = plan.children().head();
        }
        if (!(plan instanceof LogicalRelation logical) || !(logical.relation() instanceof HadoopFsRelation relation)
                || !(relation.fileFormat() instanceof ParquetFileFormat) || !plainOptions(relation)
                || relation.partitionSchema().nonEmpty() || relation.bucketSpec().isDefined()) {
            return null;
        }
        if (!(relation.location() instanceof PartitioningAwareFileIndex location)
                || location.rootPaths().size() != 1) {
            return null;
        }
        scala.collection.immutable.Seq<FileStatus> files = location.allFiles();
        if (files.size() > mostFiles) {
            return null;
        }
        StringBuilder found = new StringBuilder(location.rootPaths().head().toString());
        for (FileStatus file : CollectionConverters.asJava(files)) {
            found.append('\n').append(file.getPath().toUri().getPath()).append('\t').append(file.getLen())
                    .append('\t').append(file.getModificationTime());
        }
        return found.toString();
    }

    private static boolean plainOptions(HadoopFsRelation relation) {
        for (String key : CollectionConverters.asJava(relation.options().keySet())) {
            if (!PLAIN_READ_OPTIONS.contains(key.toLowerCase(java.util.Locale.ROOT))) {
                return false;
            }
        }
        return true;
    }
}
