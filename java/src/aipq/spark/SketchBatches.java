package aipq.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.SparkPlan;

import scala.Function1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * A session extension (spark.sql.extensions) that sketches columnar scans batch by batch. {@link ColumnSketches}
 * puts an always-true filter on a table read whose predicate calls it for every row; over a columnar scan
 * (parquet, ORC) this rule replaces {@code Filter(sketches) ← ColumnarToRow ← scan} with
 * {@code ColumnarToRow ← SketchBatchesExec ← scan}, which reads each column vector in a tight loop and sketches a
 * dictionary-encoded string once per batch instead of decoding it on every row (the row-by-row filter cost a
 * TPC-H lineitem scan up to half its time: docs/spark-notes.md). The sketches are the same; anything the batch path cannot read
 * (another plan shape, a column type it does not know) keeps the filter.
 */
public final class SketchBatches implements Function1<SparkSessionExtensions, BoxedUnit> {
    @Override public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectColumnar(session -> new ColumnarRule() {
            @Override public Rule<SparkPlan> postColumnarTransitions() {
                return new ReplaceSketchFilter();
            }
        });
        return BoxedUnit.UNIT;
    }

    /** The rule: every sketching filter directly over a columnar-to-row transition becomes a batch observer. */
    static final class ReplaceSketchFilter extends Rule<SparkPlan> {
        @Override public SparkPlan apply(SparkPlan plan) {
            return plan.transformUp(new AbstractPartialFunction<SparkPlan, SparkPlan>() {
                @Override public boolean isDefinedAt(SparkPlan node) {
                    return replacement(node) != null;
                }

                @Override public SparkPlan apply(SparkPlan node) {
                    SparkPlan replaced = replacement(node);
                    return replaced == null ? node : replaced;
                }
            });
        }

        private static SparkPlan replacement(SparkPlan node) {
            if (!(node instanceof FilterExec filter) || !(filter.child() instanceof ColumnarToRowExec transition)) {
                return null;
            }
            List<ColumnSketches> found = new ArrayList<>();
            if (!onlySketchCalls(filter.condition(), found) || found.isEmpty()
                    || found.stream().anyMatch(s -> s != found.get(0))) {
                return null;
            }
            SparkPlan scan = transition.child();
            int[][] layout = found.get(0).batchLayout(scan.output());
            if (layout == null) {
                return null;
            }
            return new ColumnarToRowExec(new SketchBatchesExec(scan, found.get(0), layout[0], layout[1]));
        }

        /** Whether the condition is a conjunction of calls into one accumulator (and TRUE), collecting it. */
        private static boolean onlySketchCalls(Expression condition, List<ColumnSketches> found) {
            if (condition instanceof And and) {
                return onlySketchCalls(and.left(), found) && onlySketchCalls(and.right(), found);
            }
            if (condition instanceof Literal literal) {
                return Boolean.TRUE.equals(literal.value());
            }
            if (condition instanceof Invoke invoke && invoke.targetObject() instanceof Literal target
                    && target.value() instanceof ColumnSketches sketches) {
                found.add(sketches);
                return true;
            }
            return false;
        }
    }
}
