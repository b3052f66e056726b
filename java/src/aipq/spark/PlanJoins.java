package aipq.spark;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ui.SQLExecutionUIData;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The joins Spark actually ran in a job group's SQL executions, counted by physical operator from the plan the
 * SQL status store keeps: with adaptive execution on, its final plan (AQE may turn a sort-merge join into a
 * broadcast join at run time), so that {@code --analyze} shows the plan that ran.
 */
public final class PlanJoins {
    private static final Pattern JOIN = Pattern.compile(
            "\\b(SortMergeJoin|BroadcastHashJoin|ShuffledHashJoin|BroadcastNestedLoopJoin|CartesianProduct)\\b");

    private PlanJoins() {
    }

    /** "operator=count" pairs, comma-separated, over the group's executions; empty when none joined. */
    public static String count(SparkSession spark, String jobGroup, long waitMillis) throws Exception {
        SparkContext context = spark.sparkContext();
        context.listenerBus().waitUntilEmpty(waitMillis);
        Set<Integer> jobs = new HashSet<>();
        for (int jobId : context.statusTracker().getJobIdsForGroup(jobGroup)) {
            jobs.add(jobId);
        }
        Map<String, Integer> counts = new TreeMap<>();
        for (SQLExecutionUIData execution
                : CollectionConverters.asJava(spark.sharedState().statusStore().executionsList())) {
            boolean mine = false;
            for (Object jobId : CollectionConverters.asJava(execution.jobs()).keySet()) {
                mine |= jobs.contains(((Number) jobId).intValue());
            }
            if (!mine) {
                continue;
            }
            Matcher found = JOIN.matcher(finalPlan(execution.physicalPlanDescription()));
            while (found.find()) {
                counts.merge(found.group(1), 1, Integer::sum);
            }
        }
        StringBuilder text = new StringBuilder();
        for (Map.Entry<String, Integer> entry : counts.entrySet()) {
            text.append(text.length() == 0 ? "" : ",").append(entry.getKey()).append('=').append(entry.getValue());
        }
        return text.toString();
    }

    /**
     * The tree of the plan that ran: an adaptive plan's final part (its current part where the status store has
     * not yet had the final one: never the initial plan's joins besides), else the physical plan's tree.
     */
    public static String finalPlan(String description) {
        int start = description.indexOf("== Final Plan ==");
        if (start < 0) {
            start = description.indexOf("== Current Plan ==");
        }
        if (start >= 0) {
            int end = description.indexOf("== Initial Plan ==", start);
            return description.substring(start, end > start ? end : description.length());
        }
        int physical = description.indexOf("== Physical Plan ==");
        String plan = physical >= 0 ? description.substring(physical) : description;
        int details = plan.indexOf("\n\n");
        return details > 0 ? plan.substring(0, details) : plan;
    }
}
