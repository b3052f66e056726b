package aipq.spark;

import java.util.StringJoiner;

import org.apache.spark.sql.RuntimeConfig;

/**
 * Runtime SQL settings set for a block and restored after it, in one py4j call each way: through PySpark each
 * setting costs a read and a write (and a read again on restoring), a round trip each, and a stage runs under
 * eight or more. Records are NUL-separated; a record is {@code key \u0001 value}, or the key alone to unset it.
 */
public final class Confs {
    private Confs() {
    }

    /** Applies {@code settings} and returns the values they replace, in the same form (unset: the key alone). */
    public static String swap(RuntimeConfig conf, String settings) {
        if (settings.isEmpty()) {
            return "";
        }
        StringJoiner previous = new StringJoiner("\u0000");
        String[] records = settings.split("\u0000", -1);
        for (String record : records) {
            int field = record.indexOf('\u0001');
            String key = field < 0 ? record : record.substring(0, field);
            String before = conf.get(key, null);
            previous.add(before == null ? key : key + '\u0001' + before);
        }
        for (String record : records) {
            int field = record.indexOf('\u0001');
            if (field < 0) {
                conf.unset(record);
            } else {
                conf.set(record.substring(0, field), record.substring(field + 1));
            }
        }
        return previous.toString();
    }
}
