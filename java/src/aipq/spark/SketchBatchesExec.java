package aipq.spark;

import java.util.Iterator;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;

/**
 * Passes a columnar scan's batches through unchanged, feeding each batch to a {@link ColumnSketches} accumulator
 * column by column (see {@link ColumnSketches#observeBatch}). {@link SketchBatches} puts it in place of the
 * row-by-row sketching filter wherever the scan below produces batches.
 */
public final class SketchBatchesExec extends SparkPlan {
    private static final long serialVersionUID = 1L;

    private final SparkPlan child;
    private final ColumnSketches sketches;
    private final int[] ordinals;
    private final int[] kinds;

    public SketchBatchesExec(SparkPlan child, ColumnSketches sketches, int[] ordinals, int[] kinds) {
        this.child = child;
        this.sketches = sketches;
        this.ordinals = ordinals;
        this.kinds = kinds;
    }

    public SparkPlan child() {
        return child;
    }

    @Override public Seq<Attribute> output() {
        return child.output();
    }

    @Override public Seq<SparkPlan> children() {
        return OneChild.children(child);
    }

    @Override public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> children) {
        return new SketchBatchesExec(children.apply(0), sketches, ordinals, kinds);
    }

    @Override public boolean supportsColumnar() {
        return true;
    }

    @Override public RDD<InternalRow> doExecute() {
        throw new IllegalStateException("SketchBatchesExec produces batches only");
    }

    @Override public RDD<ColumnarBatch> doExecuteColumnar() {
        ColumnSketches target = sketches;  // the task's copy, merged back when the task ends
        int[] columns = ordinals;
        int[] types = kinds;
        return child.executeColumnar().toJavaRDD().mapPartitions(batches -> new Iterator<ColumnarBatch>() {
            @Override public boolean hasNext() {
                return batches.hasNext();
            }

            @Override public ColumnarBatch next() {
                ColumnarBatch batch = batches.next();
                target.observeBatch(batch, columns, types);
                return batch;
            }
        }).rdd();
    }

    /** The constructor's arguments after the child, so that Spark's {@code makeCopy} finds the constructor. */
    @Override public Seq<Object> otherCopyArgs() {
        return OneChild.copyArgs(sketches, ordinals, kinds);
    }

    @Override public int productArity() {
        return 1;
    }

    @Override public Object productElement(int n) {
        return OneChild.element(n, child);
    }

    @Override public boolean canEqual(Object other) {
        return other instanceof SketchBatchesExec;
    }

    @Override public boolean equals(Object other) {
        return other instanceof SketchBatchesExec that && that.sketches == sketches && that.child.equals(child);
    }

    @Override public int hashCode() {
        return child.hashCode() * 31 + System.identityHashCode(sketches);
    }
}
