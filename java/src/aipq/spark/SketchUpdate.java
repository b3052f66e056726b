package aipq.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/** A predicate that is TRUE for every row and feeds one column's value (and width) to a ColumnSketches. */
public final class SketchUpdate implements UDF2<Object, Integer, Boolean> {
    private static final long serialVersionUID = 1L;

    private final ColumnSketches sketches;
    private final int column;

    public SketchUpdate(ColumnSketches sketches, int column) {
        this.sketches = sketches;
        this.column = column;
    }

    /**
     * The predicate over {@code value} (BIGINT or STRING) and {@code width} (INT or a null literal). It is
     * nondeterministic so that the optimizer neither reorders it after other predicates (which would skip rows)
     * nor pushes predicates below it; placed on a raw table read it sees every row.
     */
    public static Column predicate(ColumnSketches sketches, int column, Column value, Column width) {
        UDF2<Object, Integer, Boolean> update = new SketchUpdate(sketches, column);
        return functions.udf(update, DataTypes.BooleanType).asNondeterministic().apply(value, width);
    }

    @Override public Boolean call(Object value, Integer width) {
        sketches.update(column, value, width);
        return Boolean.TRUE;
    }
}
