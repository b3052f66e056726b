"""The sqlglot rewrites aipq runs after name resolution, limited to those whose output Spark evaluates exactly as
it evaluates the input (Hive semantics, ANSI mode off).

Left out of sqlglot's ``canonicalize``: ``add_text_to_concat``, which turns ``+`` over strings into CONCAT (Hive
and Spark add such operands as numbers: ``'10' + '10'`` is 20.0). Narrowed in ``simplify``: folding arithmetic
between numeric literals only where no overflow or change of type can follow (``2147483647 + 1`` wraps around in
Spark; ``1e308 * 10`` is infinity), and no moving of constants across a comparison (``x + 1 = 3`` → ``x = 2``
differs where ``x + 1`` overflows or ``x`` is a string).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.optimizer.canonicalize import (
    _replace_int_predicate,
    coerce_type,
    ensure_bools,
    remove_ascending_order,
    remove_redundant_casts,
    replace_date_funcs,
)
from sqlglot.optimizer.simplify import Simplifier

from aipq.planner.logical import and_all, conjuncts

INT_MAX = 2**31 - 1
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def canonicalize(expression: exp.Expression, dialect: str) -> exp.Expression:
    """sqlglot's canonicalize without ``add_text_to_concat``: dates compared with strings are cast, DATE('…')
    becomes a cast, redundant casts and ASC go, and an integer used as a predicate is compared with 0."""
    promote = Dialect.get_or_raise(dialect).PROMOTE_TO_INFERRED_DATETIME_TYPE

    def rewrite(node: exp.Expression) -> exp.Expression:
        node = replace_date_funcs(node, dialect=dialect)
        node = coerce_type(node, promote)
        node = remove_redundant_casts(node)
        node = ensure_bools(node, _replace_int_predicate)
        return remove_ascending_order(node)

    return exp.replace_tree(expression, rewrite)


class SparkExactSimplifier(Simplifier):
    """sqlglot's simplifier, without the folds whose result Spark would compute differently."""

    def _simplify_binary(self, expression, a, b):
        if isinstance(expression, _ARITHMETIC) and a.is_number and b.is_number and not _folds_exactly(
                expression, a, b):
            return None
        return super()._simplify_binary(expression, a, b)

    def simplify_equality(self, expression: exp.Expression) -> exp.Expression:
        return expression


def _folds_exactly(expression: exp.Expression, a: exp.Expression, b: exp.Expression) -> bool:
    """Integer arithmetic whose operands and result all fit an INT: the same value and type in Spark."""
    if not isinstance(expression, (exp.Add, exp.Sub, exp.Mul)):
        return False
    left, right = a.to_py(), b.to_py()
    if not (isinstance(left, int) and isinstance(right, int)):
        return False
    result = {exp.Add: left + right, exp.Sub: left - right, exp.Mul: left * right}[type(expression)]
    return all(abs(v) <= INT_MAX for v in (left, right, result))


def simplify(expression: exp.Expression, dialect: str) -> exp.Expression:
    return SparkExactSimplifier(dialect=dialect).simplify(expression)


def factor_common_conjuncts(expression: exp.Expression) -> exp.Expression:
    """``(a AND b) OR (a AND c)`` → ``a AND (b OR c)``: a join condition written in every branch of an OR
    (TPC-DS Q13, Q48) becomes a join condition instead of a filter over a Cartesian product. Distributivity
    holds in SQL's three-valued logic; only deterministic conjuncts are factored."""

    def rewrite(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Or):
            return node
        # each conjunct's text made once: a text is a generated SQL string, the costliest step here
        branches = [[(_text(part), part) for part in conjuncts(branch)] for branch in node.flatten()]
        shared = {text for text, part in branches[0] if not nondeterministic(part)}
        for parts in branches[1:]:
            shared &= {text for text, _ in parts}
        if not shared:
            return node
        common = list({text: part for text, part in branches[0] if text in shared}.values())
        rests = [[part for text, part in parts if text not in shared] for parts in branches]
        if any(not rest for rest in rests):  # a OR (a AND b) is a
            return and_all(part.copy() for part in common)
        remainder = exp.or_(*[and_all(part.copy() for part in rest) for rest in rests], copy=False)
        return exp.and_(*[part.copy() for part in common], exp.paren(remainder, copy=False), copy=False)

    return expression.transform(rewrite, copy=False)


def _text(condition: exp.Expression) -> str:
    """A conjunct's text, ``a = b`` and ``b = a`` alike."""
    if isinstance(condition, exp.EQ):
        return " = ".join(sorted((condition.left.sql(), condition.right.sql())))
    return condition.sql()


def nondeterministic(expression: exp.Expression) -> bool:
    return any(isinstance(node, exp.Rand) or (isinstance(node, exp.Anonymous) and node.name.lower() in (
        "rand", "random", "uuid", "shuffle")) for node in expression.walk())
