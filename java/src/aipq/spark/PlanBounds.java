package aipq.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.ExistenceJoin;
import org.apache.spark.sql.catalyst.plans.LeftAnti$;
import org.apache.spark.sql.catalyst.plans.LeftSemi$;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Deduplicate;
import org.apache.spark.sql.catalyst.plans.logical.Distinct;
import org.apache.spark.sql.catalyst.plans.logical.Expand;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.GlobalLimit;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LocalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.catalyst.plans.logical.Sort;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.internal.SQLConf;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Upper bounds a logical plan's output is known to keep: how many rows it has at most, and the largest absolute
 * value of each decimal column that comes unchanged from a parquet file's column (its footer's statistics). Built
 * bottom up, so an attribute's bound always covers every input its values come from (a union's output takes the
 * largest over its children). A plan node this does not know gives no row bound and no column bounds.
 */
final class PlanBounds {
    /** At most {@code rows} rows (null: unknown); {@code columns}: each bounded decimal attribute's largest value. */
    record Bounds(BigInteger rows, Map<ExprId, BigDecimal> columns) {
        static final Bounds UNKNOWN = new Bounds(null, Map.of());
    }

    private static final String FIELD_IDS = "spark.sql.parquet.fieldId.read.enabled";

    private PlanBounds() {
    }

    static Bounds of(LogicalPlan plan, Configuration conf) {
        if (plan instanceof LogicalRelation relation) {
            return relation(relation, conf);
        }
        if (plan instanceof LocalRelation local) {
            return new Bounds(BigInteger.valueOf(local.data().size()), Map.of());
        }
        if (plan instanceof Project project) {
            return projected(of(project.child(), conf), CollectionConverters.asJava(project.projectList()));
        }
        if (plan instanceof Aggregate aggregate) {  // a global aggregate has a row even over none
            Bounds grouped = projected(of(aggregate.child(), conf),
                                       CollectionConverters.asJava(aggregate.aggregateExpressions()));
            return new Bounds(grouped.rows() == null ? null : grouped.rows().max(BigInteger.ONE), grouped.columns());
        }
        if (plan instanceof Join join) {
            return joined(of(join.left(), conf), of(join.right(), conf), join);
        }
        if (plan instanceof Union union) {
            return united(union, conf);
        }
        if (plan instanceof Expand expand) {
            Bounds child = of(expand.child(), conf);
            return new Bounds(child.rows() == null ? null
                : child.rows().multiply(BigInteger.valueOf(expand.projections().size())), Map.of());
        }
        if (passesRowsThrough(plan)) {
            return of(plan.children().apply(0), conf);
        }
        return Bounds.UNKNOWN;
    }

    /** One child, no more rows than it, and every column of its output it keeps unchanged, by the same id. */
    private static boolean passesRowsThrough(LogicalPlan plan) {
        return plan instanceof Filter || plan instanceof Sort || plan instanceof SubqueryAlias
            || plan instanceof GlobalLimit || plan instanceof LocalLimit || plan instanceof Repartition
            || plan instanceof RepartitionByExpression || plan instanceof Distinct || plan instanceof Deduplicate
            || plan instanceof Window;
    }

    private static Bounds relation(LogicalRelation relation, Configuration conf) {
        if (!(relation.relation() instanceof HadoopFsRelation files) || !(files.fileFormat() instanceof ParquetFileFormat)
                || !(files.location() instanceof PartitioningAwareFileIndex index)
                || "true".equalsIgnoreCase(SQLConf.get().getConfString(FIELD_IDS, "false"))) {
            return Bounds.UNKNOWN;  // columns matched to the files' by field id, not name: not followed here
        }
        BigInteger rows = BigInteger.ZERO;
        Map<String, BigDecimal> largest = null;
        for (FileStatus file : CollectionConverters.asJava(index.allFiles())) {
            FooterBounds.Bounds footer = FooterBounds.of(file, conf);
            if (footer == null) {
                return Bounds.UNKNOWN;
            }
            rows = rows.add(footer.rows());
            largest = largest == null ? new HashMap<>(footer.largest()) : bothFiles(largest, footer.largest());
        }
        Map<ExprId, BigDecimal> columns = new HashMap<>();
        Set<String> partitionColumns = new HashSet<>();  // their values come from the folders, not the files
        for (String name : files.partitionSchema().fieldNames()) {
            partitionColumns.add(name.toLowerCase(Locale.ROOT));
        }
        for (AttributeReference column : CollectionConverters.asJava(relation.output())) {
            String name = column.name().toLowerCase(Locale.ROOT);
            if (partitionColumns.contains(name)) {
                continue;
            }
            BigDecimal bound = largest == null ? BigDecimal.ZERO : largest.get(name);
            if (bound != null) {
                columns.put(column.exprId(), bound);
            }
        }
        return new Bounds(rows, columns);
    }

    /** Columns bounded in both files, with the larger bound. */
    private static Map<String, BigDecimal> bothFiles(Map<String, BigDecimal> seen, Map<String, BigDecimal> next) {
        Map<String, BigDecimal> both = new HashMap<>();
        for (Map.Entry<String, BigDecimal> column : seen.entrySet()) {
            BigDecimal other = next.get(column.getKey());
            if (other != null) {
                both.put(column.getKey(), column.getValue().max(other));
            }
        }
        return both;
    }

    /** A projection keeps its child's rows; a column passed on as it is, or renamed, keeps its bound. */
    private static Bounds projected(Bounds child, List<NamedExpression> outputs) {
        Map<ExprId, BigDecimal> columns = new HashMap<>();
        for (NamedExpression output : outputs) {
            Object source = output instanceof Alias alias ? alias.child() : output;
            if (source instanceof AttributeReference column && child.columns().containsKey(column.exprId())) {
                columns.put(output.exprId(), child.columns().get(column.exprId()));
            }
        }
        return new Bounds(child.rows(), columns);
    }

    private static Bounds joined(Bounds left, Bounds right, Join join) {
        Map<ExprId, BigDecimal> columns = new HashMap<>(left.columns());
        boolean leftOnly = join.joinType() == LeftSemi$.MODULE$ || join.joinType() == LeftAnti$.MODULE$
            || join.joinType() instanceof ExistenceJoin;
        if (leftOnly) {
            return new Bounds(left.rows(), columns);
        }
        columns.putAll(right.columns());
        if (left.rows() == null || right.rows() == null) {
            return new Bounds(null, columns);
        }
        // an outer join keeps every unmatched row besides the matches
        return new Bounds(left.rows().multiply(right.rows()).add(left.rows()).add(right.rows()), columns);
    }

    /** A union's rows add up; its output (the first child's attributes) is bounded where every child's is. */
    private static Bounds united(Union union, Configuration conf) {
        List<LogicalPlan> children = CollectionConverters.asJava(union.children());
        List<Attribute> outputs = CollectionConverters.asJava(union.output());
        BigInteger rows = BigInteger.ZERO;
        Map<ExprId, BigDecimal> columns = new HashMap<>();
        for (int position = 0; position < outputs.size(); position++) {
            columns.put(outputs.get(position).exprId(), BigDecimal.ZERO);
        }
        for (LogicalPlan child : children) {
            Bounds bounds = of(child, conf);
            rows = rows == null || bounds.rows() == null ? null : rows.add(bounds.rows());
            List<Attribute> childOutputs = CollectionConverters.asJava(child.output());
            for (int position = 0; position < outputs.size(); position++) {
                ExprId id = outputs.get(position).exprId();
                BigDecimal bound = bounds.columns().get(childOutputs.get(position).exprId());
                BigDecimal sofar = columns.get(id);
                if (bound == null || sofar == null) {
                    columns.remove(id);
                } else {
                    columns.put(id, sofar.max(bound));
                }
            }
        }
        return new Bounds(rows, columns);
    }
}
