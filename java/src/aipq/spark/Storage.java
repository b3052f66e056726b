package aipq.spark;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * File operations on any store Hadoop's FileSystem reaches (hdfs, s3a, abfs, gs, file), one py4j call each:
 * aipq's Python side never touches a data path on such a store itself. Listings come back as one string of
 * RECORD-separated records with FIELD-separated fields.
 */
public final class Storage {
    public static final char FIELD = '\u0001';
    public static final char RECORD = '\u0000';

    private Storage() {
    }

    private static FileSystem fs(Configuration conf, Path path) throws IOException {
        return path.getFileSystem(conf);
    }

    /** The fully qualified form of {@code uri} (scheme and authority filled in from the configuration). */
    public static String qualify(Configuration conf, String uri) throws IOException {
        Path path = new Path(uri);
        return fs(conf, path).makeQualified(path).toString();
    }

    /** "d" or "f", length and modification time (ms), FIELD-separated; empty when nothing is there. */
    public static String status(Configuration conf, String uri) throws IOException {
        Path path = new Path(uri);
        try {
            FileStatus found = fs(conf, path).getFileStatus(path);
            return (found.isDirectory() ? "d" : "f") + FIELD + found.getLen() + FIELD + found.getModificationTime();
        } catch (java.io.FileNotFoundException missing) {
            return "";
        }
    }

    private static boolean hidden(String relative) {
        for (String part : relative.split("/")) {
            if (part.startsWith(".") || part.startsWith("_")) {
                return true;
            }
        }
        return false;
    }

    /**
     * The data files of a file or folder as records "path FIELD relative path FIELD length FIELD modified":
     * hidden and _-prefixed files and anything under such a folder (_temporary, _SUCCESS, .crc) are not data.
     * Null when nothing is there.
     */
    public static String dataFiles(Configuration conf, String uri) throws IOException {
        Path root = new Path(uri);
        FileSystem fs = fs(conf, root);
        FileStatus top;
        try {
            top = fs.getFileStatus(root);
        } catch (java.io.FileNotFoundException missing) {
            return null;
        }
        List<String> records = new ArrayList<>();
        if (!top.isDirectory()) {
            records.add(record(top.getPath().toString(), top.getPath().getName(), top));
        } else {
            String prefix = fs.makeQualified(top.getPath()).toUri().getPath();
            prefix = prefix.endsWith("/") ? prefix : prefix + "/";
            RemoteIterator<LocatedFileStatus> files = fs.listFiles(top.getPath(), true);
            while (files.hasNext()) {
                LocatedFileStatus file = files.next();
                String full = fs.makeQualified(file.getPath()).toUri().getPath();
                String relative = full.startsWith(prefix) ? full.substring(prefix.length()) : file.getPath().getName();
                if (!hidden(relative)) {
                    records.add(record(file.getPath().toString(), relative, file));
                }
            }
        }
        records.sort(null);
        return String.join(String.valueOf(RECORD), records);
    }

    private static String record(String path, String relative, FileStatus status) {
        return path + FIELD + relative + FIELD + status.getLen() + FIELD + status.getModificationTime();
    }

    /** The direct children of a folder as records "path FIELD d-or-f FIELD modified"; empty when none. */
    public static String children(Configuration conf, String uri) throws IOException {
        Path folder = new Path(uri);
        List<String> records = new ArrayList<>();
        try {
            for (FileStatus child : fs(conf, folder).listStatus(folder)) {
                records.add(child.getPath().toString() + FIELD + (child.isDirectory() ? "d" : "f") + FIELD
                        + child.getModificationTime());
            }
        } catch (java.io.FileNotFoundException missing) {
            return "";
        }
        records.sort(null);
        return String.join(String.valueOf(RECORD), records);
    }

    public static boolean mkdirs(Configuration conf, String uri) throws IOException {
        Path path = new Path(uri);
        return fs(conf, path).mkdirs(path);
    }

    /** Hadoop's rename: false (not an exception) when the source is missing or the target exists. */
    public static boolean rename(Configuration conf, String from, String to) throws IOException {
        Path source = new Path(from);
        return fs(conf, source).rename(source, new Path(to));
    }

    public static boolean delete(Configuration conf, String uri, boolean recursive) throws IOException {
        Path path = new Path(uri);
        return fs(conf, path).delete(path, recursive);
    }

    public static void writeBytes(Configuration conf, String uri, byte[] data) throws IOException {
        Path path = new Path(uri);
        try (FSDataOutputStream out = fs(conf, path).create(path, true)) {
            out.write(data);
        }
    }

    public static byte[] readBytes(Configuration conf, String uri) throws IOException {
        Path path = new Path(uri);
        try (FSDataInputStream in = fs(conf, path).open(path)) {
            return in.readAllBytes();
        }
    }

    /**
     * Appends the files {@code uris} (RECORD-separated), in order, to the driver-local file {@code localFile}
     * (created when missing): a result written on the cluster's storage, brought to the user's machine.
     */
    public static long appendToLocal(Configuration conf, String uris, String localFile) throws IOException {
        long copied = 0;
        try (OutputStream out = Files.newOutputStream(Paths.get(localFile), StandardOpenOption.CREATE,
                StandardOpenOption.APPEND)) {
            for (String uri : uris.split(String.valueOf(RECORD), -1)) {
                if (uri.isEmpty()) {
                    continue;
                }
                Path path = new Path(uri);
                try (InputStream in = fs(conf, path).open(path)) {
                    copied += in.transferTo(out);
                }
            }
        }
        return copied;
    }

    /** Parquet files end with the footer's length (4 bytes, little-endian) and this magic. */
    private static final byte[] PARQUET_MAGIC = {'P', 'A', 'R', '1'};

    /**
     * What identifies the content of each file {@code uris} (RECORD-separated), RECORD-separated in the same order:
     * "checksum:ALGORITHM:HEX" where the file system keeps one (HDFS's getFileChecksum), else for a parquet file
     * "parquet-footer:HEX" (SHA-256 of its footer: schema, row groups' rows, column chunks' offsets, sizes and
     * statistics; two reads at its end), else "sha256:HEX" of all its bytes. The stage-output cache keys on it.
     */
    public static String contentDigests(Configuration conf, String uris) throws IOException {
        List<String> digests = new ArrayList<>();
        for (String uri : uris.split(String.valueOf(RECORD), -1)) {
            if (!uri.isEmpty()) {
                digests.add(contentDigest(conf, new Path(uri)));
            }
        }
        return String.join(String.valueOf(RECORD), digests);
    }

    private static String contentDigest(Configuration conf, Path path) throws IOException {
        FileSystem fs = fs(conf, path);
        FileChecksum checksum = fs.getFileChecksum(path);
        if (checksum != null && checksum.getBytes() != null && checksum.getBytes().length > 0) {
            return "checksum:" + checksum.getAlgorithmName() + ":" + HexFormat.of().formatHex(checksum.getBytes());
        }
        long length = fs.getFileStatus(path).getLen();
        try (FSDataInputStream in = fs.open(path)) {
            byte[] footer = parquetFooter(in, length);
            if (footer != null) {
                return "parquet-footer:" + HexFormat.of().formatHex(sha256().digest(footer));
            }
            in.seek(0);
            MessageDigest digest = sha256();
            byte[] buffer = new byte[1 << 20];
            for (int read = in.read(buffer); read >= 0; read = in.read(buffer)) {
                digest.update(buffer, 0, read);
            }
            return "sha256:" + HexFormat.of().formatHex(digest.digest());
        }
    }

    /** The footer of a parquet file of {@code length} bytes, or null when the file does not end as parquet. */
    private static byte[] parquetFooter(FSDataInputStream in, long length) throws IOException {
        if (length < 12) {
            return null;
        }
        byte[] end = new byte[8];
        in.readFully(length - 8, end);
        if (!java.util.Arrays.equals(end, 4, 8, PARQUET_MAGIC, 0, 4)) {
            return null;
        }
        long footerLength = (end[0] & 0xffL) | (end[1] & 0xffL) << 8 | (end[2] & 0xffL) << 16 | (end[3] & 0xffL) << 24;
        if (footerLength <= 0 || footerLength > length - 12) {
            return null;
        }
        byte[] footer = new byte[(int) footerLength];
        in.readFully(length - 8 - footerLength, footer);
        return footer;
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException missing) {
            throw new IllegalStateException(missing);
        }
    }
}
