package aipq.spark;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.datasketches.hll.HllSketch;
import org.apache.datasketches.hll.TgtHllType;
import org.apache.datasketches.hll.Union;
import org.apache.datasketches.memory.Memory;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.AccumulatorV2;

import scala.collection.immutable.Seq;
import scala.runtime.AbstractPartialFunction;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Statistics of a few columns gathered row by row inside Spark's generated code (see SketchUpdate): per column
 * an HLL sketch identical to the one hll_sketch_agg builds from the same values, the rows seen, the non-null
 * values and the sum of the values' widths.
 *
 * <p>Why not DataFrame.observe: its CollectMetricsExec is a row-based operator outside whole-stage codegen, so
 * every row of the scan is materialized and handed over one at a time; that alone cost a fifth of a lineitem
 * scan. An accumulator updated from a nondeterministic predicate keeps the scan fused.
 *
 * <p>{@link #observe} puts an always-true, nondeterministic predicate on a raw table read: per column a Catalyst
 * {@code Invoke} of {@link #updateLong} or {@link #updateText} with primitive arguments (no boxing, no conversion,
 * unlike a UDF). Being nondeterministic it is neither reordered after the query's own predicates (which would hide
 * rows from it) nor has predicates pushed below it. The whole predicate is built here, in one call from Python:
 * built through py4j, expression by expression, it cost 40 ms per table.
 *
 * <p>Each task updates its own deserialized copy; Spark merges the copies into the driver's instance when each
 * task ends. A partition's scan can run more than once (a global sort's range sampling job reads it before the
 * job that shuffles it; a cluster retries a failed task): the sketches are unions and do not change, and the
 * counts are taken from the first copy merged for each partition of the scan.
 *
 * <p>Over a columnar scan the filter never runs: {@link SketchBatches} replaces it with {@link SketchBatchesExec},
 * which hands each batch to {@link #observeBatch}. Both paths give the same figures and sketches.
 *
 * <p>Per text column it also keeps a sample of its distinct values: those of the {@link #SAMPLE} least hashes
 * (a bottom-k sample, uniform over the distinct values and mergeable across tasks), from which the estimator
 * reads the share of values a LIKE pattern matches.
 */
public final class ColumnSketches extends AccumulatorV2<Object, Long> {
    private static final long serialVersionUID = 1L;
    static final int RECENT = 16384;  // direct-mapped cache of values just sketched, per column
    static final long XXHASH64_SEED = 42L;  // Spark's xxhash64 seed
    static final int SMALL_VALUES = 1 << 23;  // integral values below this are deduplicated by a bitmap
    public static final int SAMPLE = 256;  // distinct values sampled per text column

    private final int columns;
    private final int lgK;
    private String[] sources = new String[0];  // per column the table column it reads ("" for none), for batches
    private transient HllSketch[] sketches;  // merged and deserialized sketches
    private transient Hll8Updates[] updates;  // this task's updates, folded into sketches before leaving it
    private long[] seen;
    private int partition = -1;  // the scan partition this task's copy counted (-1: none yet)
    private BitSet counted = new BitSet();  // merged copies: the partitions whose counts are in
    private long[] present;
    private long[] widths;
    private ArrayList<TreeMap<Integer, String>> samples;  // per column: value hash → value, the SAMPLE least
    // Per column, the values already in its sketch (a repeat changes nothing: unions are idempotent), so that a
    // repeat skips the hash: keyed by the value sketched (the batch path keeps its own). Made on first use.
    private transient SeenValues[] rowSeen;
    private transient UTF8String[][] recentTexts;
    private transient BatchDecoding decoding;  // the batch path's per-task state

    public ColumnSketches(int columns, int lgK) {
        this.columns = columns;
        this.lgK = lgK;
        reset();
    }

    /** A new accumulator, registered with the session's SparkContext (unnamed: the UI never renders it). */
    public static ColumnSketches register(SparkSession spark, int columns, int lgK) {
        ColumnSketches sketches = new ColumnSketches(columns, lgK);
        spark.sparkContext().register(sketches);
        return sketches;
    }

    /**
     * {@code df} filtered by the predicate feeding every column. {@code spec}: per column four fields, all
     * separated by NUL: "long" or "text", the SQL of the value (BIGINT or STRING), the SQL of an INT width for a
     * long value or an empty field (width 0), and the table column the value is computed from (empty: none, or
     * an expression the batch path cannot compute).
     *
     * <p>Spark's analysis of the predicate (parsing, then the analyzer's rules over some ten expressions per
     * column) cost 4 ms per column on this machine, 15 ms for a table of three columns, on every run of a query.
     * So the analyzed predicate is kept per spec and input schema, and a later call over the same schema reuses
     * it: its accumulator and input columns replaced by this call's, over {@code df}'s analyzed plan, marked
     * analyzed, so that Spark does not analyze it again (see {@link Reuse}).
     */
    public Dataset<Row> observe(Dataset<Row> df, String spec) {
        String[] fields = spec.split("\u0000", -1);
        if (fields.length != 4 * columns) {
            throw new IllegalArgumentException("expected " + columns + " columns of 4 fields, got " + fields.length);
        }
        sources = new String[columns];
        for (int i = 0; i < columns; i++) {
            sources[i] = fields[4 * i + 3];
        }
        LogicalPlan input = df.queryExecution().analyzed();
        // the session's time zone: a cast to STRING (a width) is analyzed with it
        String key = spec + "\u0001" + df.sparkSession().conf().get("spark.sql.session.timeZone") + "\u0001"
            + Reuse.signature(input);
        Reuse reuse = Reuse.ANALYZED.get(key);
        if (reuse != null) {
            return reuse.over((org.apache.spark.sql.classic.Dataset<Row>) df, input, this);
        }
        Dataset<Row> filtered = df.filter(condition(fields));
        Reuse analyzed = Reuse.of(filtered.queryExecution().analyzed(), input, this);
        if (analyzed != null) {
            Reuse.ANALYZED.put(key, analyzed);
        }
        return filtered;
    }

    private Column condition(String[] fields) {
        Expression target = new Literal(this, new ObjectType(ColumnSketches.class));
        Column condition = functions.lit(true);
        for (int i = 0; i < columns; i++) {
            String value = "(" + fields[4 * i + 1] + ")";
            List<Expression> arguments = new ArrayList<>();
            arguments.add(expression(functions.lit(i)));
            String method;
            if (fields[4 * i].equals("text")) {
                method = "updateText";
                arguments.add(expression(functions.expr(value)));
            } else {
                method = "updateLong";
                String width = fields[4 * i + 2].isEmpty()
                    ? "0" : "coalesce(CAST((" + fields[4 * i + 2] + ") AS INT), 0)";
                arguments.add(expression(functions.expr("isnull" + value)));
                arguments.add(expression(functions.expr("coalesce(CAST(" + value + " AS BIGINT), 0L)")));
                arguments.add(expression(functions.expr(width)));
            }
            Expression update = new Invoke(target, method, DataTypes.BooleanType,
                CollectionConverters.asScala(arguments).toSeq(),
                CollectionConverters.asScala(new ArrayList<AbstractDataType>()).toSeq(),
                false, false, false);  // propagateNull, returnNullable, isDeterministic
            condition = condition.and(ExpressionUtils.column(update));
        }
        return condition;
    }

    /**
     * An analyzed sketching predicate, kept to be reused over another input of the same schema. The predicate
     * refers to nothing but its input's columns and its accumulator (a literal), so replacing those gives what
     * analyzing the same predicate over the other input would: a Filter built from it over an analyzed plan
     * and marked analyzed is not analyzed again. Kept per JVM, the most recent 64, each with an empty stand-in
     * for the accumulator (a kept accumulator would keep its sketches: up to megabytes a column).
     */
    private record Reuse(Expression condition, List<Attribute> input) {
        private static final ColumnSketches STAND_IN = new ColumnSketches(0, 4);
        static final Map<String, Reuse> ANALYZED = Collections.synchronizedMap(
            new LinkedHashMap<>(16, 0.75f, true) {
                @Override protected boolean removeEldestEntry(Map.Entry<String, Reuse> eldest) {
                    return size() > 64;
                }
            });

        /** Names, types and nullability of the input's columns, in order: what the predicate was analyzed over. */
        static String signature(LogicalPlan input) {
            StringBuilder text = new StringBuilder();
            for (Attribute attribute : CollectionConverters.asJava(input.output())) {
                text.append(attribute.name()).append('\u0002').append(attribute.dataType().catalogString())
                    .append('\u0002').append(attribute.nullable()).append('\u0003');
            }
            return text.toString();
        }

        /** The predicate of an analyzed plan that is exactly a Filter over {@code input}; null otherwise. */
        static Reuse of(LogicalPlan analyzed, LogicalPlan input, ColumnSketches target) {
            if (!(analyzed instanceof Filter filter) || !filter.child().output().equals(input.output())) {
                return null;
            }
            return new Reuse(rebound(filter.condition(), target, STAND_IN, Map.of()),
                             CollectionConverters.asJava(input.output()));
        }

        /** The kept predicate over {@code plan} (the same schema), feeding {@code mine}; not analyzed again. */
        Dataset<Row> over(org.apache.spark.sql.classic.Dataset<Row> df, LogicalPlan plan, ColumnSketches mine) {
            List<Attribute> theirs = CollectionConverters.asJava(plan.output());
            Map<ExprId, Attribute> columns = new HashMap<>();
            for (int i = 0; i < input.size(); i++) {
                columns.put(input.get(i).exprId(), theirs.get(i));
            }
            Filter filter = new Filter(rebound(condition, STAND_IN, mine, columns), plan);
            filter.setAnalyzed();
            return org.apache.spark.sql.classic.Dataset.ofRows(df.sparkSession(), filter);
        }

        /** {@code condition} calling {@code to} instead of {@code from}, its columns replaced by {@code columns}. */
        private static Expression rebound(Expression condition, ColumnSketches from, ColumnSketches to,
                                          Map<ExprId, Attribute> columns) {
            Expression target = new Literal(to, new ObjectType(ColumnSketches.class));
            return condition.transform(new AbstractPartialFunction<Expression, Expression>() {
                @Override public boolean isDefinedAt(Expression node) {
                    return node instanceof Literal value ? value.value() == from
                        : node instanceof AttributeReference column && columns.containsKey(column.exprId());
                }

                @Override public Expression apply(Expression node) {
                    return node instanceof Literal ? target : columns.get(((AttributeReference) node).exprId());
                }
            });
        }
    }

    private static Expression expression(Column column) {
        return ExpressionUtils.expression(column);
    }

    /**
     * One row's value of an integral or hashed column (BIGINT), called from generated code (a Catalyst
     * {@code Invoke} with primitive arguments: no boxing, no conversion). Always true, to sit in a filter.
     */
    public boolean updateLong(int column, boolean isNull, long value, int width) {
        if (partition < 0) {
            markPartition();
        }
        seen[column]++;
        if (!isNull) {
            sketchLong(column, value, width);
        }
        return true;
    }

    private void sketchLong(int column, long value, int width) {
        present[column]++;
        widths[column] += width;
        if (seenValues(rowSeen, column).add(value)) {
            sketch(column).update(value);
        }
    }

    /** Which scan partition this task's updates count (on the driver, outside a task, none). */
    private void markPartition() {
        TaskContext task = TaskContext.get();
        partition = task == null ? Integer.MAX_VALUE : task.partitionId();
    }

    static SeenValues seenValues(SeenValues[] perColumn, int column) {
        SeenValues values = perColumn[column];
        return values != null ? values : (perColumn[column] = new SeenValues());
    }

    /**
     * One row's value of a STRING column, as Spark holds it (no decoding): its UTF-8 bytes hash as
     * {@code HllSketch.update(String)} (hll_sketch_agg) hashes the decoded string. Width: the byte count.
     */
    public boolean updateText(int column, UTF8String value) {
        if (partition < 0) {
            markPartition();
        }
        seen[column]++;
        if (value != null) {
            present[column]++;
            widths[column] += value.numBytes();
            sketchText(column, value);
        }
        return true;
    }

    void sketchText(int column, UTF8String value) {
        int slot = value.hashCode() & (RECENT - 1);
        UTF8String recent = recentTexts[column][slot];
        if (recent != null && recent.equals(value)) {
            return;
        }
        recentTexts[column][slot] = value.copy();  // the row's bytes may be reused for the next row
        sketch(column).update(value.getBytes());
        sample(column, value);
    }

    /** The value into the column's bottom-k sample if its hash is among the least seen. */
    private void sample(int column, UTF8String value) {
        TreeMap<Integer, String> sample = samples.get(column);
        int hash = value.hashCode();
        if (sample.size() >= SAMPLE && hash >= sample.lastKey()) {
            return;
        }
        sample.put(hash, value.toString());
        if (sample.size() > SAMPLE) {
            sample.pollLastEntry();
        }
    }

    /**
     * Per column, the ordinal in {@code output} of the table column it reads and how to read its vector; null
     * when some column cannot be read from batches (then the row-by-row filter stays).
     */
    public int[][] batchLayout(Seq<Attribute> output) {
        if (sources.length != columns) {
            return null;  // not made by observe: no source columns
        }
        List<Attribute> attributes = CollectionConverters.asJava(output);
        int[] ordinals = new int[columns];
        int[] kinds = new int[columns];
        for (int i = 0; i < columns; i++) {
            if (sources[i].isEmpty()) {
                ordinals[i] = -1;
                kinds[i] = BatchDecoding.ROWS_ONLY;
                continue;
            }
            ordinals[i] = -1;
            for (int a = 0; a < attributes.size(); a++) {
                if (attributes.get(a).name().equalsIgnoreCase(sources[i])) {
                    if (ordinals[i] >= 0) {
                        return null;  // ambiguous
                    }
                    ordinals[i] = a;
                }
            }
            if (ordinals[i] < 0) {
                return null;
            }
            kinds[i] = BatchDecoding.batchKind(attributes.get(ordinals[i]).dataType());
            if (kinds[i] < 0) {
                return null;
            }
        }
        return new int[][] {ordinals, kinds};
    }

    /**
     * One batch of a columnar scan: the same figures as {@link #updateLong} and {@link #updateText} on each of its
     * rows, read by {@link BatchDecoding}.
     */
    public void observeBatch(ColumnarBatch batch, int[] ordinals, int[] kinds) {
        if (partition < 0) {
            markPartition();
        }
        decoding.observeBatch(batch, ordinals, kinds);
    }

    /** Whether dictionary-encoded parquet columns are sketched from their dictionaries (tests/test_jvm.py). */
    public static boolean sketchesParquetDictionaries() {
        return BatchDecoding.sketchesParquetDictionaries();
    }

    /** Rows of a batch counted for a column (all of them), its non-null ones and the widths of its values. */
    void countBatch(int column, int rows, int absent, long widthSum) {
        seen[column] += rows;
        present[column] += rows - absent;
        widths[column] += widthSum;
    }

    Hll8Updates sketch(int column) {
        if (updates[column] == null) {
            updates[column] = new Hll8Updates(lgK);
        }
        return updates[column];
    }

    /** This task's updates into the sketches (before they are merged, serialized or read). */
    private void foldUpdates() {
        for (int i = 0; i < columns; i++) {
            if (updates[i] != null) {
                sketches[i] = sketches[i] == null ? updates[i].result() : union(sketches[i], updates[i].result());
                updates[i] = null;
            }
        }
    }

    private HllSketch union(HllSketch mine, HllSketch theirs) {
        Union union = new Union(lgK);
        union.update(mine);
        union.update(theirs);
        return union.getResult(TgtHllType.HLL_8);
    }

    @Override public boolean isZero() {
        for (int i = 0; i < columns; i++) {
            if (seen[i] != 0 || sketches[i] != null || updates[i] != null) {
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
        updates = new Hll8Updates[columns];
        seen = new long[columns];
        partition = -1;
        counted = new BitSet();
        present = new long[columns];
        widths = new long[columns];
        samples = new ArrayList<>(columns);
        for (int i = 0; i < columns; i++) {
            samples.add(new TreeMap<>());
        }
        clearRecent();
    }

    private void clearRecent() {
        rowSeen = new SeenValues[columns];
        recentTexts = new UTF8String[columns][RECENT];
        decoding = new BatchDecoding(this, columns);
    }

    @Override public void add(Object ignored) {
        throw new UnsupportedOperationException("use updateLong or updateText");
    }

    @Override public void merge(AccumulatorV2<Object, Long> other) {
        ColumnSketches theirs = (ColumnSketches) other;
        foldUpdates();
        theirs.foldUpdates();
        boolean repeat = theirs.partition >= 0 && theirs.partition != Integer.MAX_VALUE
            && counted.get(theirs.partition);
        if (theirs.partition >= 0 && theirs.partition != Integer.MAX_VALUE) {
            counted.set(theirs.partition);
        }
        counted.or(theirs.counted);
        for (int i = 0; i < columns; i++) {
            if (!repeat) {
                seen[i] += theirs.seen[i];
                present[i] += theirs.present[i];
                widths[i] += theirs.widths[i];
            }
            TreeMap<Integer, String> sample = samples.get(i);
            sample.putAll(theirs.samples.get(i));
            while (sample.size() > SAMPLE) {
                sample.pollLastEntry();
            }
            if (theirs.sketches[i] == null) {
                continue;
            }
            sketches[i] = sketches[i] == null ? HllSketch.heapify(theirs.sketches[i].toCompactByteArray())
                : union(sketches[i], theirs.sketches[i]);
        }
    }

    /** Rows seen (the first column's updates); the per-column figures have their own getters. */
    @Override public Long value() {
        return columns == 0 ? 0L : seen[0];
    }

    /**
     * Every column's figures in one byte array (one py4j call; py4j passes a 16 KB string in 40 ms, bytes in 1):
     * per column, big-endian, seen, present and widthSum as longs, the sketch's length as an int (-1: the column
     * had no value) and the sketch as hll_sketch_agg serializes it, then the sample's values as an int count
     * and each value's UTF-8 length (int) and bytes.
     */
    public byte[] results() {
        foldUpdates();
        byte[][] serialized = new byte[columns][];
        List<List<byte[]>> sampled = new ArrayList<>(columns);
        int size = 0;
        for (int i = 0; i < columns; i++) {
            serialized[i] = sketches[i] == null ? null : sketches[i].toCompactByteArray();
            size += 32 + (serialized[i] == null ? 0 : serialized[i].length);
            List<byte[]> values = new ArrayList<>();
            for (String value : samples.get(i).values()) {
                byte[] bytes = value.getBytes(java.nio.charset.StandardCharsets.UTF_8);
                values.add(bytes);
                size += 4 + bytes.length;
            }
            sampled.add(values);
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        for (int i = 0; i < columns; i++) {
            out.putLong(seen[i]).putLong(present[i]).putLong(widths[i]);
            out.putInt(serialized[i] == null ? -1 : serialized[i].length);
            if (serialized[i] != null) {
                out.put(serialized[i]);
            }
            out.putInt(sampled.get(i).size());
            for (byte[] value : sampled.get(i)) {
                out.putInt(value.length).put(value);
            }
        }
        return out.array();
    }

    private void writeObject(ObjectOutputStream out) throws IOException {
        foldUpdates();
        out.defaultWriteObject();
        for (HllSketch sketch : sketches) {
            out.writeObject(sketch == null ? null : sketch.toCompactByteArray());
        }
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        sketches = new HllSketch[columns];
        updates = new Hll8Updates[columns];
        for (int i = 0; i < columns; i++) {
            byte[] bytes = (byte[]) in.readObject();
            sketches[i] = bytes == null ? null : HllSketch.heapify(Memory.wrap(bytes));
        }
        clearRecent();
    }

    /**
     * Values known to be in a sketch: a bitmap of [0, SMALL_VALUES) (surrogate keys are small integers, and in
     * random order a cache misses on most of them: the bitmap hashes each distinct key once per task) and, for
     * other values, a direct-mapped cache of recent ones (sorted or low-cardinality columns hit it on most rows).
     */
    static final class SeenValues {
        private long[] small;  // 1 MB, made when the first small value comes
        private long[] recent;
        private boolean[] filled;

        /** Whether the value is new (it may have been seen before); remembers it. */
        boolean add(long value) {
            if (value >= 0 && value < SMALL_VALUES) {
                if (small == null) {
                    small = new long[SMALL_VALUES / 64];
                }
                int word = (int) (value >>> 6);
                long mask = 1L << value;
                if ((small[word] & mask) != 0) {
                    return false;
                }
                small[word] |= mask;
                return true;
            }
            if (recent == null) {
                recent = new long[RECENT];
                filled = new boolean[RECENT];
            }
            int slot = (int) (value ^ (value >>> 29) ^ (value >>> 47)) & (RECENT - 1);
            if (filled[slot] && recent[slot] == value) {
                return false;
            }
            filled[slot] = true;
            recent[slot] = value;
            return true;
        }
    }
}
