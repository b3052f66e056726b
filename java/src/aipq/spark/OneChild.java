package aipq.spark;

import java.util.List;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What Spark's tree nodes written in Java with one child share: Scala's {@code Product} view of the node (its
 * child as the only element) and the arguments {@code makeCopy} passes after it.
 */
final class OneChild {
    private OneChild() {
    }

    /** The node's {@code productElement(n)}: its child, the only element. */
    static Object element(int n, Object child) {
        if (n != 0) {
            throw new IndexOutOfBoundsException(n);
        }
        return child;
    }

    /** A Scala sequence of the constructor's arguments after the child ({@code otherCopyArgs}). */
    static Seq<Object> copyArgs(Object... arguments) {
        return CollectionConverters.asScala(List.of(arguments)).toList();
    }
}
