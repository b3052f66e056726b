"""The driver's JVM itself: its py4j connection, whether aipq's classes are loaded, the Java and Spark it runs,
the cluster it sees, and stopping it."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from aipq.engine.jvm.gateway import (
    _jvm,
)


def disable_nagle(spark: SparkSession) -> bool:
    """Turn off Nagle's algorithm on both ends of this Python thread's py4j connection; True when done.

    py4j leaves it on, and a command or answer of 16 KB to ~1 MB (a Bloom filter, the sketches of a few columns,
    an observation's row) then waits for a delayed ACK: 43 ms for 16 KB, 0.8 ms with it off (docs/spark-notes.md).
    The JVM's end of the socket is reachable only through the connection thread's Runnable (``Thread.target`` up
    to Java 18, ``Thread.holder.task`` after), which Spark's default ``--add-opens java.base/java.lang`` allows.
    """
    import socket

    from py4j.protocol import Py4JError

    connection = spark.sparkContext._gateway._gateway_client.get_thread_connection()
    if connection is None or connection.socket is None:
        return False
    connection.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    jvm = _jvm(spark)
    thread_class = jvm.java.lang.Class.forName("java.lang.Thread")
    thread = jvm.java.lang.Thread.currentThread()
    try:
        try:
            field = thread_class.getDeclaredField("target")
            field.setAccessible(True)
            runnable = field.get(thread)
        except Py4JError:
            holder_field = thread_class.getDeclaredField("holder")
            holder_field.setAccessible(True)
            holder = holder_field.get(thread)
            task = holder.getClass().getDeclaredField("task")
            task.setAccessible(True)
            runnable = task.get(holder)
        runnable.getSocket().setTcpNoDelay(True)
        return bool(runnable.getSocket().getTcpNoDelay())
    except Py4JError:
        return False  # only slower


@dataclass(frozen=True)
class ClusterShape:
    """What the benefit estimator reads of the cluster a session runs on."""

    executors: int  # JVMs that run tasks (1 in local mode: the driver's)
    task_slots: int  # tasks that run at once over all executors (Spark's default parallelism)
    executor_cores: int  # tasks that share one executor's memory
    executor_memory: str  # one executor's heap, as Spark writes it (the driver's in local mode)


def java_spark_context(spark: SparkSession):
    """The session's Java SparkContext (None once stopped): one object for as long as the context runs."""
    return spark.sparkContext._jsc


def aipq_classes_loaded(spark: SparkSession) -> bool:
    """Whether the session's driver has aipq's JVM classes (``spark.jars`` held aipq's jar when it started)."""
    from py4j.java_gateway import JavaClass

    try:
        return isinstance(_jvm(spark).aipq.spark.Plans, JavaClass)
    except Exception:  # noqa: BLE001 — any py4j failure: not loaded
        return False


def session_stopped(spark: SparkSession) -> bool:
    """Whether the session's SparkContext was stopped (PySpark drops its Java context then)."""
    context = spark.sparkContext
    return context._jsc is None or context._jsc.sc().isStopped()


def clone_session(spark: SparkSession) -> SparkSession:
    """A session of its own over ``spark``'s SparkContext, starting as a copy of its SQL settings, temporary
    views and functions (the JVM's ``SparkSession.cloneSession``): settings changed on it are never seen by
    ``spark``'s other users, and views made on ``spark`` later are not seen by it."""
    return SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())


def stop_and_wait(spark: SparkSession, timeout_seconds: float) -> None:
    """Stop the session and wait for the JVM PySpark started to exit (it exits when its stdin closes)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    spark.stop()
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout=timeout_seconds)


def java_version(spark: SparkSession) -> str:
    """The version of the Java that runs the driver."""
    return str(_jvm(spark).java.lang.System.getProperty("java.version"))


def cluster_shape(spark: SparkSession) -> ClusterShape:
    """The executors registered with the session now (the block managers other than the driver's), their cores
    and memory; local mode is one executor, the driver, with every task slot."""
    context = spark.sparkContext
    slots = context.defaultParallelism
    conf = spark.conf.get
    if context.master.startswith("local"):
        return ClusterShape(1, slots, slots, conf("spark.driver.memory", "1g"))
    executors = max(context._jsc.sc().getExecutorMemoryStatus().size() - 1, 1)
    cores = int(conf("spark.executor.cores", "0") or 0) or max(slots // executors, 1)
    return ClusterShape(executors, slots, cores, conf("spark.executor.memory", "1g"))

