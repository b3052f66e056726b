"""LIKE patterns that Spark matches with a regular expression, given a cheap prefilter.

Spark turns a LIKE pattern of one literal run anchored at most at its ends ('abc%', '%abc', 'abc%def', '%abc%',
'abc') into byte comparisons (``LikeSimplification``); any other pattern ('%special%requests%', 'a_c%') is matched
by ``java.util.regex`` row by row, several times slower than reading the column. Every string a pattern matches
contains each of its literal runs, so ``x LIKE p`` equals ``contains(x, run₁) AND … AND x LIKE p``: the same
rows, NULL where ``x`` is NULL, and the regular expression runs only on the rows that hold every run. Longer runs
first, as they reject more rows.
"""

from __future__ import annotations

import re

from sqlglot import exp

# The pattern shapes Spark's LikeSimplification matches without a regular expression (none with an escape).
_SIMPLIFIED = re.compile(r"[^_%]*|[^_%]+%|%[^_%]+|[^_%]+%[^_%]+|%[^_%]+%")


def literal_runs(pattern: str) -> list[str] | None:
    """The literal runs of a pattern Spark matches with a regular expression, longest first; None where Spark
    simplifies it itself or where it uses the escape character (left as written)."""
    if "\\" in pattern or _SIMPLIFIED.fullmatch(pattern):
        return None
    runs = [run for run in re.split(r"[%_]+", pattern) if run]
    return sorted(dict.fromkeys(runs), key=len, reverse=True) or None


def with_like_prefilters(expression: exp.Expression) -> exp.Expression:
    """The expression with each plain LIKE (no ESCAPE clause, no COLLATE, a string literal pattern) that Spark
    would match by regular expression preceded by ``contains`` tests of its literal runs; the expression itself
    where there is none (not copied). Table columns read from files carry Spark's default collation."""
    if not any(_prefilter_runs(like) for like in expression.find_all(exp.Like)):
        return expression
    return expression.transform(_prefiltered)


def _prefilter_runs(node: exp.Like) -> list[str] | None:
    """The literal runs to test before ``node``, None where it is left as written."""
    if isinstance(node.parent, exp.Escape) or node.this.find(exp.Collate):
        return None  # under a collation other than Spark's default, contains and LIKE may compare differently
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return None
    return literal_runs(pattern.this)


def _prefiltered(node: exp.Expression) -> exp.Expression:
    runs = _prefilter_runs(node) if isinstance(node, exp.Like) else None
    if runs is None:
        return node
    text = exp.cast(node.this.copy(), exp.DataType.build("string"))
    tests = [exp.Anonymous(this="CONTAINS", expressions=[text.copy(), exp.Literal.string(run)]) for run in runs]
    matches = node.copy()
    matches.set("negate", None)  # NOT LIKE: the negation of the whole prefiltered match
    prefiltered = exp.paren(exp.and_(*tests, matches, copy=False), copy=False)
    return exp.not_(prefiltered, copy=False) if node.args.get("negate") else prefiltered
