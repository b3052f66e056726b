package aipq.spark;

import java.io.Serializable;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.LongAccumulator;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;

/**
 * A summary probe that stops probing where it removes almost nothing (Impala's runtime filter disable), and
 * starts again where it would remove more. Each task judges the probe window by window: over a window of
 * {@code window} rows it probes every row while the probe is on, or every 16th row while it is off, and at the
 * window's end keeps it on only if the probed rows it rejected are at least {@code minRejection} of them. A row
 * not probed is kept, which a summary may always do (it only ever admits extra rows); a probed row is kept exactly
 * when the child condition holds (NULL counts as not holding, as in a filter).
 *
 * <p>The state lives in the generated code's fields, one set per task. The accumulator sums the rows let through
 * unprobed, added every 4096 rows (a task's last few are not counted), for {@code --analyze}. Interpreted
 * evaluation (codegen off) probes every row.
 */
public final class ProbeGate extends Expression implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final int SAMPLE_MASK = 15;  // while off, every 16th row is probed
    private static final int FLUSH_MASK = 4095;  // rows let through unprobed are added to the tally every 4096 rows

    private final Expression child;
    private final long window;
    private final double minRejection;
    private final LongAccumulator unprobed;

    public ProbeGate(Expression child, long window, double minRejection, LongAccumulator unprobed) {
        this.child = child;
        this.window = window;
        this.minRejection = minRejection;
        this.unprobed = unprobed;
    }

    public Expression child() {
        return child;
    }

    @Override public Seq<Expression> children() {
        return OneChild.children(child);
    }

    @Override public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
        return new ProbeGate(children.apply(0), window, minRejection, unprobed);
    }

    @Override public DataType dataType() {
        return DataTypes.BooleanType;
    }

    @Override public boolean nullable() {
        return false;
    }

    @Override public boolean deterministic() {
        return false;  // what it keeps depends on the rows a task saw before
    }

    @Override public Object eval(InternalRow row) {
        Object value = child.eval(row);
        return value != null && (Boolean) value;
    }

    @Override public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
        String seen = ctx.addMutableState("long", "gateSeen", v -> v + " = 0L;", false, true);
        String probed = ctx.addMutableState("long", "gateProbed", v -> v + " = 0L;", false, true);
        String kept = ctx.addMutableState("long", "gateKept", v -> v + " = 0L;", false, true);
        String off = ctx.addMutableState("boolean", "gateOff", v -> v + " = false;", false, true);
        String skipped = ctx.addMutableState("long", "gateSkipped", v -> v + " = 0L;", false, true);
        String tally = ctx.addReferenceObj("gateTally", unprobed, LongAccumulator.class.getName());
        ExprCode probe = child.genCode(ctx);
        String value = ev.value().toString();
        String code = "boolean " + value + " = true;\n"
            + "if (!" + off + " || (" + seen + " & " + SAMPLE_MASK + ") == 0) {\n"
            + probe.code() + "\n"
            + "  " + value + " = !" + probe.isNull() + " && " + probe.value() + ";\n"
            + "  " + probed + "++;\n"
            + "  if (" + value + ") " + kept + "++;\n"
            + "} else {\n"
            + "  " + skipped + "++;\n"
            + "}\n"
            + "if ((++" + seen + " & " + FLUSH_MASK + ") == 0 && " + skipped + " > 0) {\n"
            + "  " + tally + ".add(" + skipped + "); " + skipped + " = 0L;\n"
            + "}\n"
            + "if (" + seen + " == " + window + "L) {\n"
            + "  " + off + " = " + probed + " - " + kept + " < " + minRejection + " * " + probed + ";\n"
            + "  " + seen + " = 0L; " + probed + " = 0L; " + kept + " = 0L;\n"
            + "}\n";
        return ev.copy(OneChild.code(code), FalseLiteral$.MODULE$, ev.value());
    }

    /** The constructor's arguments after the child, so that Spark's {@code makeCopy} finds the constructor. */
    @Override public Seq<Object> otherCopyArgs() {
        return OneChild.copyArgs(window, minRejection, unprobed);
    }

    @Override public String prettyName() {
        return "aipq_probe_gate";
    }

    @Override public int productArity() {
        return 1;
    }

    @Override public Object productElement(int n) {
        return OneChild.element(n, child);
    }

    @Override public boolean canEqual(Object other) {
        return other instanceof ProbeGate;
    }

    @Override public boolean equals(Object other) {
        return other instanceof ProbeGate that && that.unprobed == unprobed && that.child.equals(child);
    }

    @Override public int hashCode() {
        return child.hashCode() * 31 + System.identityHashCode(unprobed);
    }
}
