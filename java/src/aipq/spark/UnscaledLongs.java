package aipq.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Add;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.Multiply;
import org.apache.spark.sql.catalyst.expressions.NumericEvalContext;
import org.apache.spark.sql.catalyst.expressions.NumericEvalContext$;
import org.apache.spark.sql.catalyst.expressions.Subtract;
import org.apache.spark.sql.catalyst.expressions.UnaryMinus;
import org.apache.spark.sql.catalyst.expressions.UnscaledValue;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;

import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A decimal expression computed on unscaled 64-bit integers, where bounds on its columns' values prove that no
 * value it or any part of it takes needs more: column reads, decimal literals, +, -, *, unary minus, widening
 * casts and CASE / IF over them. Spark computes such an expression exactly and rounds only where the result's
 * scale is below the exact one, which this never rewrites; so the unscaled result is the same number. The integer
 * arithmetic is Spark's ANSI one: were a bound ever wrong, it fails instead of wrapping around.
 */
final class UnscaledLongs {
    /** The expression giving the unscaled value at {@code scale}; every value it takes is at most {@code bound}. */
    record Unscaled(Expression expression, int scale, BigDecimal bound) {
        BigInteger unscaledBound() {
            return bound.movePointRight(scale).setScale(0, RoundingMode.CEILING).toBigIntegerExact();
        }
    }

    static final BigInteger LARGEST = BigInteger.valueOf(Long.MAX_VALUE);
    private static final NumericEvalContext EXACT = NumericEvalContext$.MODULE$.apply(EvalMode$.MODULE$.ANSI(), true);

    private UnscaledLongs() {
    }

    /** {@code e} on unscaled longs at its own scale, or null where that is not provably the same. */
    static Unscaled of(Expression e, Map<ExprId, BigDecimal> columns) {
        if (!(e.dataType() instanceof DecimalType type)) {
            return null;
        }
        Unscaled unscaled = translated(e, type, columns);
        return unscaled != null && unscaled.scale() == type.scale() && fits(unscaled, type.precision()) ? unscaled
            : null;
    }

    /** Whether every value is a long and has at most {@code precision} digits (Spark would not overflow). */
    static boolean fits(Unscaled unscaled, int precision) {
        BigInteger most = unscaled.unscaledBound();
        return most.compareTo(LARGEST) <= 0 && most.compareTo(BigInteger.TEN.pow(precision)) < 0;
    }

    private static Unscaled translated(Expression e, DecimalType type, Map<ExprId, BigDecimal> columns) {
        int scale = type.scale();
        if (e instanceof AttributeReference column) {
            BigDecimal bound = columns.get(column.exprId());
            return bound == null ? null : new Unscaled(new UnscaledValue(column), scale, bound);
        }
        if (e instanceof Literal literal) {
            return literal(literal, scale);
        }
        if (e instanceof Add || e instanceof Subtract) {
            return sum(e, scale, columns);
        }
        if (e instanceof Multiply multiply) {
            return product(multiply, scale, columns);
        }
        if (e instanceof UnaryMinus minus) {
            Unscaled child = of(minus.child(), columns);
            return child == null ? null : new Unscaled(new UnaryMinus(child.expression(), true), child.scale(),
                                                       child.bound());
        }
        if (e instanceof Cast cast) {
            return rescaled(of(cast.child(), columns), scale);
        }
        if (e instanceof CaseWhen || e instanceof If) {
            return branches(e, scale, columns);
        }
        return null;
    }

    private static Unscaled literal(Literal literal, int scale) {
        if (!(literal.value() instanceof Decimal value)) {
            return null;
        }
        BigDecimal exact = value.toJavaBigDecimal();
        try {
            long unscaled = exact.setScale(scale, RoundingMode.UNNECESSARY).unscaledValue().longValueExact();
            return new Unscaled(Literal$.MODULE$.apply(unscaled), scale, exact.abs());
        } catch (ArithmeticException notALong) {
            return null;
        }
    }

    private static Unscaled sum(Expression e, int scale, Map<ExprId, BigDecimal> columns) {
        Unscaled left = rescaled(of(e.children().apply(0), columns), scale);
        Unscaled right = rescaled(of(e.children().apply(1), columns), scale);
        if (left == null || right == null) {
            return null;
        }
        Expression both = e instanceof Add ? new Add(left.expression(), right.expression(), EXACT)
            : new Subtract(left.expression(), right.expression(), EXACT);
        return new Unscaled(both, scale, left.bound().add(right.bound()));
    }

    private static Unscaled product(Multiply multiply, int scale, Map<ExprId, BigDecimal> columns) {
        Unscaled left = of(multiply.left(), columns);
        Unscaled right = of(multiply.right(), columns);
        if (left == null || right == null) {
            return null;
        }
        Unscaled exact = new Unscaled(new Multiply(left.expression(), right.expression(), EXACT),
                                      left.scale() + right.scale(), left.bound().multiply(right.bound()));
        return exact.unscaledBound().compareTo(LARGEST) <= 0 ? rescaled(exact, scale) : null;
    }

    /** The same values at a scale at least as large (multiplied by a power of ten); null for a smaller one. */
    private static Unscaled rescaled(Unscaled unscaled, int scale) {
        if (unscaled == null || scale < unscaled.scale()) {
            return null;
        }
        if (scale == unscaled.scale()) {
            return unscaled;
        }
        Unscaled wider = new Unscaled(new Multiply(unscaled.expression(),
                                                   Literal$.MODULE$.apply(BigInteger.TEN.pow(scale - unscaled.scale())
                                                                          .longValueExact()), EXACT),
                                      scale, unscaled.bound());
        return wider.unscaledBound().compareTo(LARGEST) <= 0 ? wider : null;
    }

    /** CASE WHEN and IF: Spark has cast every branch to the result's type already. */
    private static Unscaled branches(Expression e, int scale, Map<ExprId, BigDecimal> columns) {
        BigDecimal bound = BigDecimal.ZERO;
        if (e instanceof If conditional) {
            Unscaled yes = rescaled(of(conditional.trueValue(), columns), scale);
            Unscaled no = rescaled(of(conditional.falseValue(), columns), scale);
            return yes == null || no == null ? null : new Unscaled(
                new If(conditional.predicate(), yes.expression(), no.expression()), scale, yes.bound().max(no.bound()));
        }
        CaseWhen cases = (CaseWhen) e;
        List<Tuple2<Expression, Expression>> branches = new ArrayList<>();
        for (Tuple2<Expression, Expression> branch : CollectionConverters.asJava(cases.branches())) {
            Unscaled value = rescaled(of(branch._2(), columns), scale);
            if (value == null) {
                return null;
            }
            branches.add(new Tuple2<>(branch._1(), value.expression()));
            bound = bound.max(value.bound());
        }
        Option<Expression> otherwise = Option.empty();
        if (cases.elseValue().isDefined()) {
            Unscaled value = rescaled(of(cases.elseValue().get(), columns), scale);
            if (value == null) {
                return null;
            }
            otherwise = Option.apply(value.expression());
            bound = bound.max(value.bound());
        }
        return new Unscaled(new CaseWhen(CollectionConverters.asScala(branches).toList(), otherwise), scale, bound);
    }
}
