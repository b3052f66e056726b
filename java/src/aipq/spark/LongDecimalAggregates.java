package aipq.spark;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.expressions.Cast$;
import org.apache.spark.sql.catalyst.expressions.DecimalDivideWithOverflowCheck;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.MakeDecimal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.NumericEvalContext$;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.Average;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DecimalType$;

import scala.Function1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A session extension (spark.sql.extensions) that sums and averages decimals on 64-bit integers where that gives
 * the same numbers. Spark sums a DECIMAL(p, s) into DECIMAL(p + 10, s), which past 18 digits it holds as a Java
 * BigDecimal, allocated and added row by row; its own rule for this
 * (DecimalAggregates) only applies when p + 10 fits 18 digits. Here the bound comes from the data: the largest value
 * of each column in the parquet footers, carried through the expression summed ({@link UnscaledLongs}), times the
 * most rows the aggregate's input can have ({@link PlanBounds}). Where the total provably fits a long and the
 * result's type, {@code sum(e)} becomes {@code MakeDecimal(sum(unscaled e))} and {@code avg(e)} that sum divided
 * by the count as Spark's Average divides it. Applies only while the SQL setting {@link #ENABLED} is true.
 */
public final class LongDecimalAggregates implements Function1<SparkSessionExtensions, BoxedUnit> {
    public static final String ENABLED = "spark.aipq.longDecimalAggregates";
    /** Below these, Spark's DecimalAggregates already sums on longs, and averages on doubles: its results stay. */
    private static final int SPARKS_LONG_DIGITS = 18;
    private static final int SPARKS_DOUBLE_AVERAGE_DIGITS = 15;

    @Override public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectPreCBORule(Rewrite::new);
        return BoxedUnit.UNIT;
    }

    /** The rule: each aggregate's decimal sums and averages, where the bounds allow. */
    static final class Rewrite extends Rule<LogicalPlan> {
        private final SparkSession session;

        Rewrite(SparkSession session) {
            this.session = session;
        }

        @Override public LogicalPlan apply(LogicalPlan plan) {
            if (!"true".equalsIgnoreCase(SQLConf.get().getConfString(ENABLED, "false"))) {
                return plan;
            }
            Configuration[] conf = {null};  // copied from the session's only where an aggregate sums decimals
            return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                @Override public boolean isDefinedAt(LogicalPlan node) {
                    return node instanceof Aggregate aggregate && CollectionConverters.asJava(
                        aggregate.aggregateExpressions()).stream().anyMatch(o -> hasDecimalAggregate((Expression) o));
                }

                @Override public LogicalPlan apply(LogicalPlan node) {
                    if (conf[0] == null) {
                        conf[0] = ((org.apache.spark.sql.classic.SparkSession) session).sessionState().newHadoopConf();
                    }
                    return rewritten((Aggregate) node, conf[0]);
                }
            });
        }
    }

    private static LogicalPlan rewritten(Aggregate aggregate, Configuration conf) {
        List<NamedExpression> outputs = CollectionConverters.asJava(aggregate.aggregateExpressions());
        PlanBounds.Bounds input = PlanBounds.of(aggregate.child(), conf);
        if (input.rows() == null) {
            return aggregate;
        }
        List<NamedExpression> rewritten = new ArrayList<>();
        boolean changed = false;
        for (NamedExpression output : outputs) {
            NamedExpression replaced = (NamedExpression) ((Expression) output).transformDown(
                new AbstractPartialFunction<Expression, Expression>() {
                    @Override public boolean isDefinedAt(Expression e) {
                        return e instanceof AggregateExpression;
                    }

                    @Override public Expression apply(Expression e) {
                        Expression replacement = replacement((AggregateExpression) e, input);
                        return replacement == null ? e : replacement;
                    }
                });
            changed |= replaced != output;
            rewritten.add(replaced);
        }
        return changed ? new Aggregate(aggregate.groupingExpressions(), CollectionConverters.asScala(rewritten).toList(),
                                       aggregate.child(), aggregate.hint()) : aggregate;
    }

    private static boolean hasDecimalAggregate(Expression e) {
        return e.exists(node -> (node instanceof Sum || node instanceof Average)
            && node.dataType() instanceof DecimalType);
    }

    /** Spark's DecimalAggregates sums a DECIMAL(p, s) of p + 10 <= 18 digits on longs itself. */
    private static boolean sparksOwnSum(Expression child) {
        return child.dataType() instanceof DecimalType type && type.precision() + 10 <= SPARKS_LONG_DIGITS;
    }

    /** The sum or average on unscaled longs; null where it is neither, is DISTINCT, or the bounds do not allow. */
    private static Expression replacement(AggregateExpression aggregate, PlanBounds.Bounds input) {
        if (aggregate.isDistinct()) {
            return null;
        }
        if (aggregate.aggregateFunction() instanceof Sum sum && sum.dataType() instanceof DecimalType type
                && !sparksOwnSum(sum.child())) {
            boolean nullOnOverflow = sum.evalContext().evalMode() != EvalMode$.MODULE$.ANSI();
            AggregateExpression total = longSum(aggregate, sum.child(), type, input);
            return total == null ? null : new MakeDecimal(total, type.precision(), type.scale(), nullOnOverflow);
        }
        if (aggregate.aggregateFunction() instanceof Average average && average.dataType() instanceof DecimalType type
                && average.child().dataType() instanceof DecimalType child
                && child.precision() + 4 > SPARKS_DOUBLE_AVERAGE_DIGITS) {
            DecimalType sumType = DecimalType$.MODULE$.bounded(child.precision() + 10, child.scale());
            AggregateExpression total = longSum(aggregate, average.child(), sumType, input);
            return total == null ? null : averaged(aggregate, average, type, sumType, total);
        }
        return null;
    }

    /** The aggregate summing {@code e} unscaled, when every partial sum fits a long and {@code type}. */
    private static AggregateExpression longSum(AggregateExpression aggregate, Expression e, DecimalType type,
                                               PlanBounds.Bounds input) {
        UnscaledLongs.Unscaled unscaled = UnscaledLongs.of(e, input.columns());
        if (unscaled == null || unscaled.scale() != type.scale()) {
            return null;
        }
        BigInteger most = unscaled.unscaledBound().multiply(input.rows());
        if (most.compareTo(UnscaledLongs.LARGEST) > 0 || most.compareTo(BigInteger.TEN.pow(type.precision())) >= 0) {
            return null;
        }
        Sum exact = new Sum(unscaled.expression(), NumericEvalContext$.MODULE$.apply(EvalMode$.MODULE$.ANSI(), true));
        return new AggregateExpression(exact, aggregate.mode(), false, aggregate.filter(), aggregate.resultId());
    }

    /** Spark's Average over the exact sum: null without values, else the sum over the count, rounded half up. */
    private static Expression averaged(AggregateExpression aggregate, Average average, DecimalType type,
                                       DecimalType sumType, AggregateExpression total) {
        boolean nullOnOverflow = average.evalMode() != EvalMode$.MODULE$.ANSI();
        Sum summed = (Sum) total.aggregateFunction();
        AggregateExpression count = new AggregateExpression(Count$.MODULE$.apply(summed.child()), aggregate.mode(),
                                                            false, aggregate.filter(), NamedExpression$.MODULE$.newExprId());
        Expression countDecimal = Cast$.MODULE$.apply(count, DecimalType$.MODULE$.LongDecimal(),
                                                       Cast$.MODULE$.apply$default$3(), Cast$.MODULE$.apply$default$4());
        Expression quotient = new DecimalDivideWithOverflowCheck(
            new MakeDecimal(total, sumType.precision(), sumType.scale(), nullOnOverflow), countDecimal, type,
            average.getContextOrNull(), nullOnOverflow);
        return new If(new EqualTo(count, Literal$.MODULE$.apply(0L)), new Literal(null, type), quotient);
    }
}
