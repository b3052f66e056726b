package aipq.spark;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.apache.datasketches.hash.MurmurHash3;
import org.apache.datasketches.hll.HllSketch;
import org.apache.datasketches.hll.TgtHllType;
import org.apache.datasketches.memory.Memory;

/**
 * One column's HLL_8 sketch, updated exactly as {@code HllSketch.update} updates it (same hash, same registers,
 * same HIP estimator state: {@link #result} is the sketch DataSketches would have built from the same values in
 * the same order) but cheaper once the sketch has reached its HLL mode.
 *
 * <p>Why: over a TPC-H lineitem scan sketching its three keys, 12 runs under JFR, the samples inside the sketching
 * fell from 101 to 58 of the executor's 903 and 704 (median scan 0.95 s to 0.73 s) against DataSketches' own
 * update, which allocates two arrays per value to hash it and dispatches on the sketch's mode
 * (docs/spark-notes.md). A sketch spends only its first few hundred distinct values in the coupon modes, so those
 * still go to DataSketches; at the switch to HLL mode its state is copied out of the serialized image and
 * updated here.
 *
 * <p>The image layout (DataSketches' PreambleUtil, little-endian) and the update rule (Hll8Array's
 * updateSlotWithKxQ and AbstractHllArray's hipAndKxQIncrementalUpdate) are DataSketches internals:
 * tests/test_jvm.py compares the serialized result with DataSketches' own, byte for byte, to catch an upgrade
 * that changes them.
 */
public final class Hll8Updates {
    private static final long SEED = 9001L;  // DataSketches' DEFAULT_UPDATE_SEED
    private static final int HIP_ACCUM = 8;
    private static final int KXQ0 = 16;
    private static final int KXQ1 = 24;
    private static final int NUM_AT_CUR_MIN = 32;
    private static final int REGISTERS = 40;
    // HllSketch.getCurMode() and its CurMode.HLL, both package-private; null if a DataSketches upgrade hid them
    // (every update then stays with DataSketches: slower, same sketches)
    private static final MethodHandle CUR_MODE;
    private static final Object HLL_MODE;

    static {
        MethodHandle mode = null;
        Object hll = null;
        try {
            Method method = HllSketch.class.getDeclaredMethod("getCurMode");
            mode = MethodHandles.privateLookupIn(HllSketch.class, MethodHandles.lookup()).unreflect(method)
                .asType(MethodType.methodType(Object.class, HllSketch.class));
            for (Object constant : method.getReturnType().getEnumConstants()) {
                if (((Enum<?>) constant).name().equals("HLL")) {
                    hll = constant;
                }
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            mode = null;
        }
        CUR_MODE = hll == null ? null : mode;
        HLL_MODE = hll;
    }

    private final int lgK;
    private HllSketch warmup;  // DataSketches' own while in its coupon modes; null once the image takes over
    private byte[] image;      // the updatable HLL image from the switch on: its registers updated in place
    private double hipAccum;
    private double kxq0;
    private double kxq1;
    private int numAtCurMin;

    Hll8Updates(int lgK) {
        this.lgK = lgK;
        this.warmup = new HllSketch(lgK, TgtHllType.HLL_8);
    }

    /** As {@code HllSketch.update(long)}. */
    void update(long datum) {
        if (image == null) {
            warmup.update(datum);
            switchWhenHll();
        } else {
            updateRegisters(datum);
        }
    }

    /** As {@code HllSketch.update(byte[])}: an empty array is no value. */
    void update(byte[] data) {
        if (image == null) {
            warmup.update(data);
            switchWhenHll();
        } else if (data.length > 0) {
            long[] hash = MurmurHash3.hash(data, SEED);
            updateRegisters(hash[0], hash[1]);
        }
    }

    private void switchWhenHll() {
        if (CUR_MODE == null || curMode(warmup) != HLL_MODE) {
            return;
        }
        image = warmup.toUpdatableByteArray();
        ByteBuffer state = ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN);
        hipAccum = state.getDouble(HIP_ACCUM);
        kxq0 = state.getDouble(KXQ0);
        kxq1 = state.getDouble(KXQ1);
        numAtCurMin = state.getInt(NUM_AT_CUR_MIN);
        warmup = null;
    }

    /**
     * MurmurHash3.hash(long, seed) without its two array allocations: MurmurHash3_x64_128 of the datum's 8
     * little-endian bytes, which are all tail (no 16-byte block).
     */
    private void updateRegisters(long datum) {
        long h1 = SEED;
        long h2 = SEED;
        h1 ^= Long.rotateLeft(datum * 0x87c37b91114253d5L, 31) * 0x4cf5ad432745937fL;
        h1 ^= 8;
        h2 ^= 8;
        h1 += h2;
        h2 += h1;
        h1 = mix(h1);
        h2 = mix(h2);
        h1 += h2;
        h2 += h1;
        updateRegisters(h1, h2);
    }

    private static long mix(long k) {
        k ^= k >>> 33;
        k *= 0xff51afd7ed558ccdL;
        k ^= k >>> 33;
        k *= 0xc4ceb9fe1a85ec53L;
        return k ^ (k >>> 33);
    }

    /** BaseHllSketch.coupon and Hll8Array.couponUpdate on the registers, from the hash's two halves. */
    private void updateRegisters(long hash0, long hash1) {
        int slot = REGISTERS + ((int) hash0 & ((1 << lgK) - 1));
        int leadingZeros = Long.numberOfLeadingZeros(hash1);
        int value = Math.min(leadingZeros, 62) + 1;
        int old = image[slot];
        if (value <= old) {
            return;
        }
        image[slot] = (byte) value;
        // the HIP accumulator grows before the KxQ sums change, by K over their sum (hipAndKxQIncrementalUpdate)
        hipAccum += (1 << lgK) / (kxq0 + kxq1);
        if (old < 32) {
            kxq0 -= invPow2(old);
        } else {
            kxq1 -= invPow2(old);
        }
        if (value < 32) {
            kxq0 += invPow2(value);
        } else {
            kxq1 += invPow2(value);
        }
        if (old == 0) {
            numAtCurMin--;  // HLL_8 keeps curMin at 0: this counts the empty registers
        }
    }

    private static Object curMode(HllSketch sketch) {
        try {
            return (Object) CUR_MODE.invokeExact(sketch);
        } catch (Throwable e) {
            throw new IllegalStateException("HllSketch.getCurMode failed", e);
        }
    }

    /** Whether updates leave DataSketches once in HLL mode (tests fail if an upgrade turned this off). */
    public static boolean takesOverInHllMode() {
        return CUR_MODE != null;
    }

    private static double invPow2(int exponent) {
        return Double.longBitsToDouble((1023L - exponent) << 52);
    }

    /** The sketch so far, as DataSketches would hold it. */
    HllSketch result() {
        if (image == null) {
            return warmup;
        }
        ByteBuffer state = ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN);
        state.putDouble(HIP_ACCUM, hipAccum).putDouble(KXQ0, kxq0).putDouble(KXQ1, kxq1)
            .putInt(NUM_AT_CUR_MIN, numAtCurMin);
        return HllSketch.heapify(Memory.wrap(image));  // a copy: later updates do not change it
    }

    /** The compact serialized sketch of {@code values} fed one by one through this class (tests compare it). */
    public static byte[] sketchOf(long[] values, int lgK) {
        Hll8Updates updates = new Hll8Updates(lgK);
        for (long value : values) {
            updates.update(value);
        }
        return updates.result().toCompactByteArray();
    }

    /** The same through DataSketches' own {@code HllSketch.update}. */
    public static byte[] dataSketchesSketchOf(long[] values, int lgK) {
        HllSketch sketch = new HllSketch(lgK, TgtHllType.HLL_8);
        for (long value : values) {
            sketch.update(value);
        }
        return sketch.toCompactByteArray();
    }
}
