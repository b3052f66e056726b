package aipq.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.sketch.BloomFilter;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;

/**
 * Spark's {@code might_contain} over a Bloom filter held in a broadcast variable rather than in the plan: NULL for
 * a NULL hashed key, else whether the filter may hold it. Spark's own expression takes the filter as a binary
 * literal, which every optimizer and adaptive re-planning pass hashes, compares and copies with the plan; here
 * the plan holds the broadcast's handle, and each task reads the filter from the broadcast once.
 */
public final class BroadcastMightContain extends Expression implements Serializable {
    private static final long serialVersionUID = 1L;

    private final Expression child;
    private final Broadcast<BloomFilter> filter;

    public BroadcastMightContain(Expression child, Broadcast<BloomFilter> filter) {
        this.child = child;
        this.filter = filter;
    }

    /** A serialized Bloom filter (Spark's {@code BloomFilter.writeTo} format) as a broadcast variable. */
    public static Broadcast<BloomFilter> broadcast(SparkSession session, byte[] serialized) {
        BloomFilter bloom;
        try {
            bloom = BloomFilter.readFrom(new ByteArrayInputStream(serialized));
        } catch (IOException error) {
            throw new UncheckedIOException(error);
        }
        return JavaSparkContext.fromSparkContext(session.sparkContext()).broadcast(bloom);
    }

    public Expression child() {
        return child;
    }

    @Override public Seq<Expression> children() {
        return OneChild.children(child);
    }

    @Override public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
        return new BroadcastMightContain(children.apply(0), filter);
    }

    @Override public DataType dataType() {
        return DataTypes.BooleanType;
    }

    @Override public boolean nullable() {
        return child.nullable();
    }

    @Override public Object eval(InternalRow row) {
        Object value = child.eval(row);
        return value == null ? null : filter.value().mightContainLong((Long) value);
    }

    @Override public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
        String handle = ctx.addReferenceObj("bloomBroadcast", filter, Broadcast.class.getName());
        String bloomClass = BloomFilter.class.getName();
        String bloom = ctx.addMutableState(bloomClass, "bloom",
            v -> v + " = (" + bloomClass + ") " + handle + ".value();", false, true);
        ExprCode key = child.genCode(ctx);
        String isNull = ev.isNull().toString();
        String value = ev.value().toString();
        String code = key.code() + "\n"
            + "boolean " + isNull + " = " + key.isNull() + ";\n"
            + "boolean " + value + " = false;\n"
            + "if (!" + isNull + ") {\n"
            + "  " + value + " = " + bloom + ".mightContainLong(" + key.value() + ");\n"
            + "}\n";
        return ev.copy(OneChild.code(code), ev.isNull(), ev.value());
    }

    /** The constructor's arguments after the child, so that Spark's {@code makeCopy} finds the constructor. */
    @Override public Seq<Object> otherCopyArgs() {
        return OneChild.copyArgs(filter);
    }

    @Override public String prettyName() {
        return "might_contain";
    }

    @Override public String toString() {
        return "might_contain(broadcast " + filter.id() + ", " + child + ")";
    }

    @Override public String sql() {
        return "might_contain(broadcast " + filter.id() + ", " + child.sql() + ")";
    }

    @Override public int productArity() {
        return 1;
    }

    @Override public Object productElement(int n) {
        return OneChild.element(n, child);
    }

    @Override public boolean canEqual(Object other) {
        return other instanceof BroadcastMightContain;
    }

    @Override public boolean equals(Object other) {
        return other instanceof BroadcastMightContain that && that.filter.id() == filter.id()
            && that.child.equals(child);
    }

    @Override public int hashCode() {
        return child.hashCode() * 31 + Long.hashCode(filter.id());
    }
}
