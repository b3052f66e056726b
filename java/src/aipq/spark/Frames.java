package aipq.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;

/**
 * DataFrame steps from SQL text, one py4j call each. Through PySpark a projection of n columns costs about
 * 3n + 4 py4j round trips (a Column per name, an alias per column, a list element per column, the projection)
 * at 0.3 to 0.4 ms each on this machine: compiling a TPC-H stage's plan took 0.1 s of driver time.
 * Expressions are NUL-separated; each is parsed as {@code selectExpr} parses it, so {@code expr AS name} works.
 */
public final class Frames {
    private Frames() {
    }

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
    public static Dataset<Row> select(Dataset<Row> df, String expressions) {
        return df.select(columns(expressions));
    }

    /**
     * {@code df} grouped by {@code groups} with {@code aggregates} (both NUL-separated; either may be empty): the
     * distinct groups without aggregates, one row of aggregates without groups.
     */
    public static Dataset<Row> aggregate(Dataset<Row> df, String groups, String aggregates) {
        Column[] keys = columns(groups);
        Column[] values = columns(aggregates);
        if (values.length == 0) {
            return df.select(keys).distinct();
        }
        Column first = values[0];
        Column[] rest = java.util.Arrays.copyOfRange(values, 1, values.length);
        return keys.length == 0 ? df.agg(first, rest) : df.groupBy(keys).agg(first, rest);
    }

    /** {@code left} joined with {@code right} on a SQL condition, {@code how} as {@code Dataset.join} takes it. */
    public static Dataset<Row> join(Dataset<Row> left, Dataset<Row> right, String condition, String how) {
        return left.join(right, functions.expr(condition), how);
    }
}
