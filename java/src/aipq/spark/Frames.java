package aipq.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Observation;
import org.apache.spark.sql.RelationalGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

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
     * {@code df} grouped by each of several grouping sets (GROUPING SETS, ROLLUP, CUBE) with {@code aggregates}
     * (NUL-separated): {@code groups} are the NUL-separated group columns, {@code sets} the sets as indexes into
     * them (sets separated by ';', indexes by ','; an empty set is the grand total). A group column outside a
     * row's set is NULL in that row, and {@code grouping()} tells which, as in Hive and Spark SQL.
     */
    public static Dataset<Row> aggregateSets(Dataset<Row> df, String groups, String sets, String aggregates) {
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
    public static Dataset<Row> observe(Dataset<Row> df, Observation observation, String aggregates,
                                       List<Column> more) {
        List<Column> all = new ArrayList<>(List.of(columns(aggregates)));
        if (more != null) {
            all.addAll(more);
        }
        return df.observe(observation, all.get(0), CollectionConverters.asScala(all.subList(1, all.size())).toSeq());
    }
}
