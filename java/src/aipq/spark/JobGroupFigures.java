package aipq.spark;

import java.util.HashSet;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.StringJoiner;
import java.util.concurrent.TimeoutException;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkJobInfo;
import org.apache.spark.status.AppStatusStore;
import org.apache.spark.status.api.v1.StageData;

import scala.Option;

/**
 * Spark's I/O metrics summed over the completed stages of job groups, in one call: read through py4j, a
 * getter call per metric and Spark stage cost 0.01 to 0.04 s of driver time after every aipq stage.
 */
public final class JobGroupFigures {
    private JobGroupFigures() {
    }

    /**
     * Shuffle read bytes, shuffle read records, shuffle write bytes, shuffle write records, input bytes, input
     * records, output bytes and output records of each NUL-separated job group's stages, comma-separated, one
     * NUL-separated record per group. Waits (up to {@code waitMillis}) for the listener bus to feed the status
     * store first, once for them all.
     */
    public static String sums(SparkContext context, String jobGroups, long waitMillis) throws TimeoutException {
        context.listenerBus().waitUntilEmpty(waitMillis);
        StringJoiner records = new StringJoiner("\u0000");
        for (String jobGroup : jobGroups.split("\u0000", -1)) {
            records.add(sum(context, jobGroup));
        }
        return records.toString();
    }

    private static String sum(SparkContext context, String jobGroup) {
        Set<Integer> stageIds = new HashSet<>();
        for (int jobId : context.statusTracker().getJobIdsForGroup(jobGroup)) {
            Option<SparkJobInfo> info = context.statusTracker().getJobInfo(jobId);
            if (info.isDefined()) {
                for (int stageId : info.get().stageIds()) {
                    stageIds.add(stageId);
                }
            }
        }
        AppStatusStore store = context.statusStore();
        long[] totals = new long[8];
        for (int stageId : stageIds) {
            StageData stage;
            try {
                stage = store.lastStageAttempt(stageId);
            } catch (NoSuchElementException skipped) {
                continue; // a skipped stage (its shuffle output reused) never reaches the status store
            }
            totals[0] += stage.shuffleReadBytes();
            totals[1] += stage.shuffleReadRecords();
            totals[2] += stage.shuffleWriteBytes();
            totals[3] += stage.shuffleWriteRecords();
            totals[4] += stage.inputBytes();
            totals[5] += stage.inputRecords();
            totals[6] += stage.outputBytes();
            totals[7] += stage.outputRecords();
        }
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < totals.length; i++) {
            text.append(i == 0 ? "" : ",").append(totals[i]);
        }
        return text.toString();
    }
}
