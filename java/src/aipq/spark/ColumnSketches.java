package aipq.spark;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;

import org.apache.datasketches.hll.HllSketch;
import org.apache.datasketches.hll.TgtHllType;
import org.apache.datasketches.hll.Union;
import org.apache.datasketches.memory.Memory;
import org.apache.spark.util.AccumulatorV2;

/**
 * Statistics of a few columns gathered row by row inside Spark's generated code (see SketchUpdate): per column
 * an HLL sketch identical to the one hll_sketch_agg builds from the same values, the rows seen, the non-null
 * values and the sum of the values' widths.
 *
 * <p>Why not DataFrame.observe: its CollectMetricsExec is a row-based operator outside whole-stage codegen, so
 * every row of the scan is materialized and handed over one at a time; that alone cost a fifth of a lineitem
 * scan. An accumulator updated from a nondeterministic predicate keeps the scan fused.
 *
 * <p>Each task updates its own deserialized copy; Spark merges the copies into the driver's instance when each
 * task ends. A re-executed task is merged twice: the sketches are unions and do not change, the counts do (the
 * caller checks the row count against the table's).
 */
public final class ColumnSketches extends AccumulatorV2<Object, Long> {
    private static final long serialVersionUID = 1L;
    private static final int RECENT = 1024;  // direct-mapped cache of values just sketched, per column

    private final int columns;
    private final int lgK;
    private transient HllSketch[] sketches;
    private long[] seen;
    private long[] present;
    private long[] widths;
    // A value already in its sketch changes nothing (unions are idempotent): the cache skips its hash. Sorted
    // or low-cardinality columns (an order's line items, a date, a flag) hit it on most rows.
    private transient long[][] recentLongs;
    private transient boolean[][] recentFilled;
    private transient String[][] recentTexts;

    public ColumnSketches(int columns, int lgK) {
        this.columns = columns;
        this.lgK = lgK;
        reset();
    }

    /** One row's value of one column: a Long (integral keys, hashes) or a String; null counts as missing. */
    public void update(int column, Object value, Integer width) {
        seen[column]++;
        if (value == null) {
            return;
        }
        present[column]++;
        if (width != null) {
            widths[column] += width;
        }
        if (value instanceof Long) {
            long number = (Long) value;
            int slot = (int) (number ^ (number >>> 29)) & (RECENT - 1);
            if (recentFilled[column][slot] && recentLongs[column][slot] == number) {
                return;
            }
            recentFilled[column][slot] = true;
            recentLongs[column][slot] = number;
            sketch(column).update(number);
        } else if (value instanceof String) {
            String text = (String) value;
            int slot = text.hashCode() & (RECENT - 1);
            if (text.equals(recentTexts[column][slot])) {
                return;
            }
            recentTexts[column][slot] = text;
            sketch(column).update(text);
        } else {
            throw new IllegalArgumentException("sketch a BIGINT or a STRING, not " + value.getClass().getName());
        }
    }

    private HllSketch sketch(int column) {
        if (sketches[column] == null) {
            sketches[column] = new HllSketch(lgK, TgtHllType.HLL_8);
        }
        return sketches[column];
    }

    @Override public boolean isZero() {
        for (int i = 0; i < columns; i++) {
            if (seen[i] != 0 || sketches[i] != null) {
                return false;
            }
        }
        return true;
    }

    @Override public ColumnSketches copy() {
        ColumnSketches copy = new ColumnSketches(columns, lgK);
        copy.merge(this);
        return copy;
    }

    @Override public void reset() {
        sketches = new HllSketch[columns];
        seen = new long[columns];
        present = new long[columns];
        widths = new long[columns];
        clearRecent();
    }

    private void clearRecent() {
        recentLongs = new long[columns][RECENT];
        recentFilled = new boolean[columns][RECENT];
        recentTexts = new String[columns][RECENT];
    }

    @Override public void add(Object ignored) {
        throw new UnsupportedOperationException("use update(column, value, width)");
    }

    @Override public void merge(AccumulatorV2<Object, Long> other) {
        ColumnSketches theirs = (ColumnSketches) other;
        for (int i = 0; i < columns; i++) {
            seen[i] += theirs.seen[i];
            present[i] += theirs.present[i];
            widths[i] += theirs.widths[i];
            if (theirs.sketches[i] == null) {
                continue;
            }
            if (sketches[i] == null) {
                sketches[i] = HllSketch.heapify(theirs.sketches[i].toCompactByteArray());
            } else {
                Union union = new Union(lgK);
                union.update(sketches[i]);
                union.update(theirs.sketches[i]);
                sketches[i] = union.getResult(TgtHllType.HLL_8);
            }
        }
    }

    /** Rows seen (the first column's updates); the per-column figures have their own getters. */
    @Override public Long value() {
        return columns == 0 ? 0L : seen[0];
    }

    /** The column's sketch serialized as hll_sketch_agg returns it; null when the column had no value. */
    public byte[] sketchBytes(int column) {
        return sketches[column] == null ? null : sketches[column].toCompactByteArray();
    }

    public long seen(int column) {
        return seen[column];
    }

    public long present(int column) {
        return present[column];
    }

    public long widthSum(int column) {
        return widths[column];
    }

    private void writeObject(ObjectOutputStream out) throws IOException {
        out.defaultWriteObject();
        for (HllSketch sketch : sketches) {
            out.writeObject(sketch == null ? null : sketch.toCompactByteArray());
        }
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        sketches = new HllSketch[columns];
        for (int i = 0; i < columns; i++) {
            byte[] bytes = (byte[]) in.readObject();
            sketches[i] = bytes == null ? null : HllSketch.heapify(Memory.wrap(bytes));
        }
        clearRecent();
    }
}
