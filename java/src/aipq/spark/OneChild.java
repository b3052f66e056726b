package aipq.spark;

import java.util.List;

import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What Spark's tree nodes written in Java with one child share: their children, Scala's {@code Product} view of the
 * node (its child as the only element), the arguments {@code makeCopy} passes after it, and generated code as a
 * block.
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

    /** The node's {@code children()}: its one child as a Scala sequence. */
    static <T> Seq<T> children(T child) {
        return CollectionConverters.asScala(List.of(child)).toList();
    }

    /** Java source text as the {@code CodeBlock} an expression's {@code doGenCode} returns. */
    static CodeBlock code(String text) {
        Seq<String> parts = CollectionConverters.asScala(List.of(text)).toList();
        Seq<JavaCode> inputs = CollectionConverters.asScala(List.<JavaCode>of()).toList();
        return new CodeBlock(parts, inputs);
    }
}
