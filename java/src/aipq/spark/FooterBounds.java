package aipq.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.schema.LogicalTypeAnnotation.DecimalLogicalTypeAnnotation;
import org.apache.parquet.schema.PrimitiveType;
import org.apache.parquet.schema.Type;

/**
 * A parquet file's rows and, for each top-level decimal column stored as a 32- or 64-bit integer, the largest
 * absolute value any row holds, from the footer's row-group statistics (no data page is read). Integer-stored
 * decimals compare as signed integers, so their statistics are exact; a column some row group has no statistics
 * for has no bound. Files are read once per path, length and modification time.
 */
final class FooterBounds {
    /** The rows, and each bounded column's largest absolute value by lower-cased name (an all-null column: 0). */
    record Bounds(BigInteger rows, Map<String, BigDecimal> largest) {
    }

    private static final int CACHED_FILES = 4096;
    private static final Map<String, Bounds> CACHE = new LinkedHashMap<>(16, 0.75f, true) {
        @Override protected boolean removeEldestEntry(Map.Entry<String, Bounds> eldest) {
            return size() > CACHED_FILES;
        }
    };

    private FooterBounds() {
    }

    /** The file's bounds; null when it cannot be read as parquet. */
    static Bounds of(FileStatus file, Configuration conf) {
        String key = file.getPath() + "\u0000" + file.getLen() + "\u0000" + file.getModificationTime();
        synchronized (CACHE) {
            Bounds cached = CACHE.get(key);
            if (cached != null) {
                return cached;
            }
        }
        Bounds read = read(file, conf);
        if (read != null) {
            synchronized (CACHE) {
                CACHE.put(key, read);
            }
        }
        return read;
    }

    private static Bounds read(FileStatus file, Configuration conf) {
        try (ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromStatus(file, conf))) {
            Map<String, Integer> scales = integerDecimals(reader.getFooter().getFileMetaData().getSchema().getFields());
            Map<String, BigDecimal> largest = new HashMap<>();  // a column leaves it for good at a chunk without a bound
            scales.keySet().forEach(name -> largest.put(name, BigDecimal.ZERO));
            long rows = 0;
            for (BlockMetaData block : reader.getFooter().getBlocks()) {
                rows += block.getRowCount();
                for (ColumnChunkMetaData chunk : block.getColumns()) {
                    String name = chunk.getPath().toDotString().toLowerCase(Locale.ROOT);
                    if (largest.containsKey(name)) {
                        BigDecimal chunkLargest = largest(chunk, scales.get(name));
                        if (chunkLargest == null) {
                            largest.remove(name);
                        } else {
                            largest.merge(name, chunkLargest, BigDecimal::max);
                        }
                    }
                }
            }
            return new Bounds(BigInteger.valueOf(rows), largest);
        } catch (Exception notParquet) {
            return null;
        }
    }

    /**
     * Top-level columns annotated DECIMAL and stored as INT32 or INT64, by lower-cased name, with their scale; none
     * of a name two columns share but for case (which of them a read means depends on the session).
     */
    private static Map<String, Integer> integerDecimals(List<Type> fields) {
        Map<String, Integer> scales = new HashMap<>();
        Map<String, Integer> named = new HashMap<>();
        for (Type field : fields) {
            named.merge(field.getName().toLowerCase(Locale.ROOT), 1, Integer::sum);
        }
        for (Type field : fields) {
            if (named.get(field.getName().toLowerCase(Locale.ROOT)) > 1) {
                continue;
            }
            if (field.isPrimitive() && field.getLogicalTypeAnnotation() instanceof DecimalLogicalTypeAnnotation decimal) {
                PrimitiveType.PrimitiveTypeName stored = field.asPrimitiveType().getPrimitiveTypeName();
                if (stored == PrimitiveType.PrimitiveTypeName.INT32 || stored == PrimitiveType.PrimitiveTypeName.INT64) {
                    scales.put(field.getName().toLowerCase(Locale.ROOT), decimal.getScale());
                }
            }
        }
        return scales;
    }

    /** The chunk's largest absolute value; 0 when every value is null; null when its statistics do not say. */
    private static BigDecimal largest(ColumnChunkMetaData chunk, int scale) {
        Statistics<?> stats = chunk.getStatistics();
        if (stats == null || stats.isEmpty() || !stats.isNumNullsSet()) {
            return chunk.getValueCount() == 0 ? BigDecimal.ZERO : null;
        }
        if (!stats.hasNonNullValue()) {
            return stats.getNumNulls() == chunk.getValueCount() ? BigDecimal.ZERO : null;
        }
        if (!(stats.genericGetMin() instanceof Number min) || !(stats.genericGetMax() instanceof Number max)) {
            return null;
        }
        BigInteger most = BigInteger.valueOf(min.longValue()).abs().max(BigInteger.valueOf(max.longValue()).abs());
        return new BigDecimal(most, scale);
    }
}
