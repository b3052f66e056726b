"""A Python UDF that raised, told in one line. Spark wraps the exception a UDF raised in a Python worker into a
PythonException whose message is the worker's whole traceback, after a first line that says only "An exception
was thrown from the Python worker"; aipq's error names the exception's type and message and where the UDF raised
it, and keeps the traceback for ``--debug``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
_HEADINGS = (_TRACEBACK, "During handling of the above exception", "The above exception was the direct cause")


@dataclass(frozen=True)
class UdfFailure:
    exception: str  # "ValueError: bad value 1", as Python's traceback ends
    where: str  # "udfs.py:9 in parse" (the innermost frame), "" when the traceback names none
    traceback: str  # the worker's traceback, for --debug


def python_udf_failure(error: BaseException) -> UdfFailure | None:
    """The Python exception a UDF raised in a Spark worker, from a Spark failure; None for any other failure."""
    for text in _texts(error):
        found = _parse(text)
        if found is not None:
            return found
    return None


def _texts(error: BaseException):
    """The messages of ``error``, its causes and its Java exception's causes, in full (a traceback spans lines)."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 10:
        yield str(current)
        java = getattr(current, "java_exception", None)
        for _ in range(20):
            if java is None:
                break
            try:
                yield str(java.getMessage() or "")
                java = java.getCause()
            except Exception:  # noqa: BLE001 — the JVM side is gone
                break
        current, seen = current.__cause__, seen + 1


def _parse(text: str) -> UdfFailure | None:
    if _TRACEBACK not in text or "Python worker" not in text:
        return None
    frames, exception, kept = [], None, []
    for line in text[text.index(_TRACEBACK):].splitlines():
        bare = _SQLSTATE.sub("", line)
        frame = _FRAME.match(bare)
        if frame is not None:
            frames.append(frame)
        elif bare.startswith(_HEADINGS) or bare.startswith((" ", "\t")) or not bare.strip():
            pass  # a traceback's or a chained exception's heading, a frame's source line, or a blank line
        elif _EXCEPTION.match(bare):
            exception = bare.strip()  # the last one is the exception the UDF raised (earlier ones: its causes)
        else:
            break  # past the worker's traceback (the JVM's stack trace)
        kept.append(bare)
    if exception is None:
        return None
    where = ""
    if frames:
        last = frames[-1]
        where = f"{last['file'].rsplit('/', 1)[-1]}:{last['line']} in {last['function']}"
    return UdfFailure(exception, where, "\n".join(kept).rstrip())
