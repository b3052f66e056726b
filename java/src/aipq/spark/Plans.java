package aipq.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Observation;
import org.apache.spark.sql.RelationalGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.analysis.UnresolvedAlias;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Descending$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.NullsLast$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.plans.JoinType$;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Distinct;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.GlobalLimit;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint$;
import org.apache.spark.sql.catalyst.plans.logical.LocalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.Sort;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedHint;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.Dataset$;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.functions;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A stage's logical plan built step by step from SQL text and analysed once, when its DataFrame is asked for.
 * Each step of the Dataset API analyses the whole plan it makes, so a stage of many reads and joins built with it
 * is analysed once per step; {@code spark.sql} analyses a query once. The steps make the plans the Dataset API makes
 * ({@code selectExpr}, {@code filter}, {@code join} with a broadcast hint, {@code groupBy().agg},
 * {@code orderBy}, {@code limit}); expressions are NUL-separated, each parsed as {@code selectExpr} parses it.
 * The {@code frame…} steps take and give a DataFrame (a projection, grouping sets, an observation) in one py4j
 * call each, for the plans built through PySpark's API.
 */
public final class Plans {
    private Plans() {
    }

    /**
     * SQL text as {@code functions.expr} parses it, with the session active: an expression takes settings such as
     * ANSI mode from the active session's configuration as it is made, as {@code Dataset.select} has it.
     */
    private static Expression expression(SparkSession spark, String text) throws ParseException {
        Option<SparkSession> before = SparkSession.getActiveSession();
        SparkSession.setActiveSession(spark);
        try {
            return spark.sessionState().sqlParser().parseExpression(text);
        } finally {
            if (before.isDefined()) {
                SparkSession.setActiveSession(before.get());
            } else {
                SparkSession.clearActiveSession();
            }
        }
    }

    private static <T> Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toList();
    }

    private static List<Expression> parsed(SparkSession spark, String expressions) throws ParseException {
        List<Expression> parsed = new ArrayList<>();
        if (!expressions.isEmpty()) {
            for (String text : expressions.split("\u0000", -1)) {
                parsed.add(expression(spark, text));
            }
        }
        return parsed;
    }

    /** An output column as {@code Dataset.select} names it: named as written, else by Spark's pretty SQL. */
    private static NamedExpression named(Expression expression) {
        if (expression instanceof NamedExpression namedExpression) {
            return namedExpression;
        }
        return new UnresolvedAlias(expression, Option.empty());
    }

    private static List<NamedExpression> namedAll(List<Expression> expressions) {
        List<NamedExpression> named = new ArrayList<>();
        for (Expression expression : expressions) {
            named.add(named(expression));
        }
        return named;
    }

    /** The (analysed) plan of a DataFrame, to build on. */
    public static LogicalPlan of(Dataset<Row> df) {
        return df.logicalPlan();
    }

    /** The plan as a DataFrame: analysed here, once for all its steps. */
    public static Dataset<Row> frame(SparkSession spark, LogicalPlan plan) {
        return Dataset$.MODULE$.ofRows(spark, plan);
    }

    /** {@code child} projected onto the NUL-separated SQL expressions. */
    public static LogicalPlan select(SparkSession spark, LogicalPlan child, String expressions)
            throws ParseException {
        return new Project(seq(namedAll(parsed(spark, expressions))), child);
    }

    /** The rows of {@code child} for which the SQL condition holds. */
    public static LogicalPlan filter(SparkSession spark, LogicalPlan child, String condition)
            throws ParseException {
        return new Filter(expression(spark, condition), child);
    }

    /**
     * {@code left} joined with {@code right} on a SQL condition (empty: none, a cross join), {@code how} as
     * {@code Dataset.join} takes it; {@code broadcast} is the side hinted to be broadcast ("left", "right", "").
     */
    public static LogicalPlan join(SparkSession spark, LogicalPlan left, LogicalPlan right, String condition,
                                   String how, String broadcast) throws ParseException {
        LogicalPlan hintedLeft = "left".equals(broadcast) ? broadcastHint(left) : left;
        LogicalPlan hintedRight = "right".equals(broadcast) ? broadcastHint(right) : right;
        Option<Expression> on = condition.isEmpty() ? Option.empty() : Option.apply(expression(spark, condition));
        return new Join(hintedLeft, hintedRight, JoinType$.MODULE$.apply(how), on, JoinHint$.MODULE$.NONE());
    }

    private static LogicalPlan broadcastHint(LogicalPlan plan) {
        return new UnresolvedHint("BROADCAST", seq(new ArrayList<>()), plan);
    }

    /**
     * {@code child} grouped by {@code groups} with {@code aggregates} (both NUL-separated; either may be empty):
     * the distinct groups without aggregates, one row of aggregates without groups.
     */
    public static LogicalPlan aggregate(SparkSession spark, LogicalPlan child, String groups, String aggregates)
            throws ParseException {
        List<Expression> keys = parsed(spark, groups);
        List<Expression> values = parsed(spark, aggregates);
        if (values.isEmpty()) {
            return new Distinct(new Project(seq(namedAll(keys)), child));
        }
        List<Expression> output = new ArrayList<>(keys);
        output.addAll(values);
        return new Aggregate(seq(keys), seq(namedAll(output)), child, Option.empty());
    }

    /**
     * {@code child} ordered by NUL-separated keys, each {@code expression\u0001direction\u0001nulls} with
     * direction "asc" or "desc" and nulls "first" or "last". {@code inOneTask}: the rows gathered into one
     * partition first and sorted there, where Spark would range-partition them (a sampling job over the child,
     * then a shuffle) for a result written as one file anyway.
     */
    public static LogicalPlan sort(SparkSession spark, LogicalPlan child, String keys, boolean inOneTask)
            throws ParseException {
        List<SortOrder> orders = new ArrayList<>();
        for (String key : keys.split("\u0000", -1)) {
            String[] parts = key.split("\u0001", -1);
            Expression expression = expression(spark, parts[0]);
            orders.add(new SortOrder(expression,
                    "desc".equals(parts[1]) ? Descending$.MODULE$ : Ascending$.MODULE$,
                    "first".equals(parts[2]) ? NullsFirst$.MODULE$ : NullsLast$.MODULE$,
                    seq(new ArrayList<>())));
        }
        LogicalPlan input = inOneTask ? new Repartition(1, true, child) : child;
        return new Sort(seq(orders), true, input, Option.empty());
    }

    /** The first {@code count} rows of {@code child}. */
    public static LogicalPlan limit(LogicalPlan child, int count) {
        Expression rows = Literal$.MODULE$.apply(count);
        return new GlobalLimit(rows, new LocalLimit(rows, child));
    }

    // DataFrame steps, one py4j call each. Through PySpark a projection of n columns costs about 3n + 4 py4j round
    // trips (a Column per name, an alias per column, a list element per column, the projection) at 0.3 to 0.4 ms
    // each on this machine: compiling a TPC-H stage's plan took 0.1 s of driver time.

    /** NUL-separated SQL expressions as Columns, each parsed as {@code selectExpr} parses it. */
    private static Column[] columns(String expressions) {
        if (expressions.isEmpty()) {
            return new Column[0];
        }
        String[] texts = expressions.split("\u0000", -1);
        Column[] columns = new Column[texts.length];
        for (int i = 0; i < texts.length; i++) {
            columns[i] = functions.expr(texts[i]);
        }
        return columns;
    }

    /** {@code df} projected onto the NUL-separated SQL expressions. */
    public static org.apache.spark.sql.Dataset<Row> frameSelect(org.apache.spark.sql.Dataset<Row> df,
                                                              String expressions) {
        return df.select(columns(expressions));
    }

    /**
     * {@code df} grouped by each of several grouping sets (GROUPING SETS, ROLLUP, CUBE) with {@code aggregates}
     * (NUL-separated): {@code groups} are the NUL-separated group columns, {@code sets} the sets as indexes into
     * them (sets separated by ';', indexes by ','; an empty set is the grand total). A group column outside a
     * row's set is NULL in that row, and {@code grouping()} tells which, as in Hive and Spark SQL.
     */
    public static org.apache.spark.sql.Dataset<Row> frameAggregateSets(org.apache.spark.sql.Dataset<Row> df,
            String groups, String sets, String aggregates) {
        Column[] keys = columns(groups);
        List<Seq<Column>> chosen = new ArrayList<>();
        for (String set : sets.split(";", -1)) {
            List<Column> members = new ArrayList<>();
            for (String index : set.isEmpty() ? new String[0] : set.split(",")) {
                members.add(keys[Integer.parseInt(index)]);
            }
            chosen.add(CollectionConverters.asScala(members).toList());
        }
        RelationalGroupedDataset grouped = df.groupingSets(CollectionConverters.asScala(chosen).toList(), keys);
        Column[] values = columns(aggregates);
        if (values.length == 0) {
            return grouped.count().select(keys);
        }
        return grouped.agg(values[0], java.util.Arrays.copyOfRange(values, 1, values.length));
    }

    /**
     * {@code df} observed by {@code observation}: the NUL-separated SQL aggregates, then {@code more} (null:
     * none). One py4j call where PySpark's {@code observe} takes one per Column and per list element.
     */
    public static org.apache.spark.sql.Dataset<Row> frameObserve(org.apache.spark.sql.Dataset<Row> df,
            Observation observation, String aggregates, List<Column> more) {
        List<Column> all = new ArrayList<>(List.of(columns(aggregates)));
        if (more != null) {
            all.addAll(more);
        }
        return df.observe(observation, all.get(0), CollectionConverters.asScala(all.subList(1, all.size())).toSeq());
    }
}
