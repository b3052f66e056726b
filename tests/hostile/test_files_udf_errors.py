"""A Python UDF that raises (issue 80): the user's error names the exception's type and message, and where the UDF
raised it, in one line; the worker's Python traceback comes with the exception's traceback (``--debug``, or an
uncaught error in the user's program). aipq's CLI has no way to register a UDF (no CREATE FUNCTION): the API is
where a UDF reaches aipq, on the user's own session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import traceback

import pytest

import aipq
from aipq.errors import ExecutionError


def _udfs() -> dict[str, tuple]:
    """The UDFs, each with what its error says (a pattern: which row fails first varies) and the function that
    raised it. Defined in a function, so that
    Spark's Python workers get them by value (a module-level function is sent by name, and a worker cannot import
    a test module)."""

    class BadRecord(Exception):
        """A user's own exception class."""

    def _raises_value_error(x):
        raise ValueError(f"bad value {x}")

    def _raises_without_message(x):
        raise RuntimeError

    def _raises_own_class(x):
        raise BadRecord(f"record {x} has no owner")

    def _check(x):
        if x > 1:
            raise KeyError(f"no key {x}")
        return x

    def _raises_deeper(x):
        return _check(x) + 1

    def _raises_chained(x):
        try:
            return {"a": 1}[str(x)]
        except KeyError as missing:
            raise LookupError(f"cannot map {x}") from missing

    def _raises_multiline(x):
        raise ValueError(f"first line {x}\nsecond line")

    return {
        "value_error": (_raises_value_error, r"ValueError: bad value \d", "_raises_value_error"),
        "no_message": (_raises_without_message, r"RuntimeError \(", "_raises_without_message"),
        "own_class": (_raises_own_class, r"[\w.]*BadRecord: record \d has no owner", "_raises_own_class"),
        "deeper": (_raises_deeper, r"KeyError: 'no key \d'", "_check"),
        "chained": (_raises_chained, r"LookupError: cannot map \d", "_raises_chained"),
        "multiline": (_raises_multiline, r"ValueError: first line \d", "_raises_multiline"),
    }


CASES = [*((case, "group by") for case in _udfs()), ("value_error", "join")]


@pytest.fixture(scope="module")
def keyed_view(spark):
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "k int, v string").createOrReplaceTempView("udf_rows")


@pytest.mark.parametrize(("case", "shape"), CASES)
def test_a_udfs_exception_reaches_the_user_in_one_line(spark, home, keyed_view, case, shape):
    udf, said, function = _udfs()[case]
    name = f"hostile_udf_{case}"
    spark.udf.register(name, udf, "int")
    query = {"group by": f"select v, sum({name}(k)) as s from udf_rows group by v",
             "join": f"select a.v, b.k from udf_rows a join udf_rows b on {name}(a.k) = b.k"}[shape]
    with pytest.raises(ExecutionError) as raised:
        aipq.sql(query, spark=spark, home=home, staging="hive", broadcast_threshold="0")
    message = raised.value.message
    assert "\n" not in message and re.search(f"a Python UDF raised {said}", message), message
    assert "test_files_udf_errors.py:" in message and f"in {function}" in message, message
    assert "--debug" in (raised.value.hint or "")
    shown = "".join(traceback.format_exception(raised.value))
    assert "Traceback (most recent call last):" in shown and f"in {function}" in shown, "the worker's traceback"


@pytest.mark.slow
def test_a_udf_error_on_a_users_own_session_started_with_spark_conf(tmp_path):
    """The user's program as it is written: its own session from ``aipq.spark_conf()``, a UDF that raises when the
    rows are read (the query is handed to Spark, which runs it then); the error is one line, and the uncaught
    traceback shows where in the UDF."""
    program = tmp_path / "user.py"
    program.write_text(textwrap.dedent(f"""
        import aipq
        from pyspark.sql import SparkSession
        builder = SparkSession.builder.master("local[1]")
        for key, value in aipq.spark_conf().items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.createDataFrame([(1, "a")], "k int, v string").createOrReplaceTempView("t")
        def parse(x):
            raise ValueError(f"cannot parse {{x}}")
        spark.udf.register("parse", parse, "int")
        try:
            aipq.sql("select v, sum(parse(k)) from t group by v", spark=spark, home={str(tmp_path / 'home')!r}).rows
        except aipq.errors.ExecutionError as error:
            print("MESSAGE", error.message)
        aipq.sql("select v, sum(parse(k)) from t group by v", spark=spark, home={str(tmp_path / 'home')!r}).rows
    """))
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 1
    said = [line for line in done.stdout.splitlines() if line.startswith("MESSAGE")]
    assert said and "a Python UDF raised ValueError: cannot parse 1 (user.py:10 in parse)" in said[0], done.stdout
    assert 'File "' in done.stderr and "in parse" in done.stderr and "ValueError: cannot parse 1" in done.stderr
