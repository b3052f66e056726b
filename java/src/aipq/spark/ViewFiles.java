package aipq.spark;

import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Whether a view is a plain parquet read of one path, as {@code spark.read.parquet(path)} makes it, and if so the
 * files Spark listed for it: in one call, since walking the plan over py4j costs a round trip per step.
 */
public final class ViewFiles {
    private static final Set<String> PLAIN_READ_OPTIONS = Set.of("path", "paths");

    private ViewFiles() {
    }

    /**
     * The path the analyzed plan of {@code frame} reads and, a line each, every file Spark listed for it as
     * {@code path<TAB>length<TAB>modification ms} (the URI's path part); null when the plan is anything but one
     * parquet relation over one path with no reader option, partition column or bucket, or lists more than
     * {@code mostFiles} files.
     */
    public static String plainParquetRead(Dataset<Row> frame, int mostFiles) {
        LogicalPlan plan = frame.queryExecution().analyzed();
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
