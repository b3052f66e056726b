package aipq.spark;

import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;

/**
 * Rows, and nulls, min and max of top-level columns, over every row group of some parquet files, from their
 * footers (no data page is read). One call per table: walking the footers through py4j cost a tenth of a second per
 * lineitem scan, a call per row group and column.
 */
public final class FooterStatistics {
    /** Separates the fields of a column's record and the records (parquet's stringifier never writes them). */
    public static final char FIELD = '\u0001';
    public static final char RECORD = '\u0000';

    private FooterStatistics() {
    }

    /**
     * The files' row count, then for each of {@code columns} (any case, RECORD-separated) that every row group
     * has statistics for: "name FIELD nulls FIELD has-values (1 or 0) FIELD min FIELD max", min and max empty
     * when every value is null; records RECORD-separated. Null when a file cannot be read as parquet.
     */
    public static String read(Configuration conf, String files, String columns) {
        Map<String, String> wanted = new LinkedHashMap<>();
        for (String column : columns.split(String.valueOf(RECORD), -1)) {
            if (!column.isEmpty()) {
                wanted.put(column.toLowerCase(Locale.ROOT), column);
            }
        }
        Map<String, Statistics<?>> merged = new HashMap<>();
        Map<String, Long> nulls = new HashMap<>();
        Set<String> lacking = new HashSet<>();
        long rows = 0;
        try {
            for (String file : files.split(String.valueOf(RECORD), -1)) {
                if (file.isEmpty()) {
                    continue;
                }
                HadoopInputFile input = HadoopInputFile.fromPath(file.contains(":") ? new Path(file)
                        : new Path(new java.io.File(file).toURI()), conf);
                try (ParquetFileReader reader = ParquetFileReader.open(input)) {
                    for (BlockMetaData block : reader.getFooter().getBlocks()) {
                        rows += block.getRowCount();
                        merge(block.getColumns(), wanted, merged, nulls, lacking);
                    }
                }
            }
        } catch (Exception notParquet) {
            return null;
        }
        StringBuilder out = new StringBuilder().append(rows);
        for (Map.Entry<String, String> column : wanted.entrySet()) {
            Statistics<?> stats = merged.get(column.getKey());
            if (stats == null || lacking.contains(column.getKey())) {
                continue;
            }
            boolean values = stats.hasNonNullValue();
            out.append(RECORD).append(column.getValue()).append(FIELD).append(nulls.get(column.getKey())).append(FIELD)
                .append(values ? "1" : "0").append(FIELD)
                .append(values ? stats.minAsString() : "").append(FIELD)
                .append(values ? stats.maxAsString() : "");
        }
        return out.toString();
    }

    private static void merge(List<ColumnChunkMetaData> chunks, Map<String, String> wanted,
                              Map<String, Statistics<?>> merged, Map<String, Long> nulls,
                              Set<String> lacking) {
        Set<String> seen = new HashSet<>();
        for (ColumnChunkMetaData chunk : chunks) {
            String name = chunk.getPath().toDotString().toLowerCase(Locale.ROOT);
            if (!wanted.containsKey(name)) {
                continue;
            }
            seen.add(name);
            Statistics<?> stats = chunk.getStatistics();
            if (stats == null || stats.isEmpty() || !stats.isNumNullsSet()) {
                lacking.add(name);
                continue;
            }
            merged.computeIfAbsent(name, n -> Statistics.createStats(chunk.getPrimitiveType())).mergeStatistics(stats);
            nulls.merge(name, stats.getNumNulls(), Long::sum);
        }
        for (String name : wanted.keySet()) {
            if (!seen.contains(name)) {
                lacking.add(name);  // nested, or missing from this file
            }
        }
    }
}
