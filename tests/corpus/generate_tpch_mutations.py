"""Writes tests/corpus/tpch/*.sql: grammar-aware mutations of the 22 TPC-H queries (run it again after changing
the mutations; the files are the corpus, this script only makes them).

Each mutation is made on sqlglot's tokens, so it deletes, repeats or swaps whole tokens, cuts the text right
after a clause keyword, misspells a name, or unbalances a parenthesis or a quote.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from aipq.tpch.queries import query_text

HERE = Path(__file__).parent / "tpch"
COLUMN = re.compile(r"(l|o|c|p|ps|s|n|r)_[a-z]+$")
TABLES = {"lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"}
CLAUSES = {TokenType.WHERE, TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.FROM, TokenType.SELECT,
           TokenType.HAVING, TokenType.AND, TokenType.ON}


def mutations(number: int, sql: str) -> list[tuple[str, str, str]]:
    """(name, expectation, text) per mutation; expectation 2 is a sure input error, 'any' may also run."""
    rng = random.Random(number)
    tokens = [t for t in Dialect.get_or_raise("hive").tokenize(sql) if t.token_type != TokenType.SEMICOLON]
    found = []
    clause_tokens = [t for t in tokens if t.token_type in CLAUSES]
    cut = rng.choice(clause_tokens)
    found.append(("truncated", "2", sql[: cut.end + 1] + "\n"))
    for kind in ("deleted", "repeated", "swapped"):
        i = rng.randrange(1, len(tokens) - 1)
        a, b = tokens[i], tokens[i + 1]
        if kind == "deleted":
            text = sql[: a.start] + sql[a.end + 1:]
        elif kind == "repeated":
            text = sql[: a.end + 1] + " " + sql[a.start: a.end + 1] + sql[a.end + 1:]
        else:
            text = sql[: a.start] + sql[b.start: b.end + 1] + sql[a.end + 1: b.start] + sql[a.start: a.end + 1] \
                + sql[b.end + 1:]
        found.append((kind, "any", text))
    names = [t for i, t in enumerate(tokens) if t.token_type == TokenType.VAR and COLUMN.match(t.text)
             and tokens[i - 1].token_type != TokenType.ALIAS]
    column = rng.choice(names)
    found.append(("unknown-column", "2", sql[: column.start] + column.text + "x" + sql[column.end + 1:]))
    table = next(t for t in tokens if t.token_type == TokenType.VAR and t.text.lower() in TABLES)
    found.append(("unknown-table", "2", sql[: table.start] + table.text + "_nope" + sql[table.end + 1:]))
    closing = [t for t in tokens if t.token_type == TokenType.R_PAREN]
    if closing:
        paren = rng.choice(closing)
        found.append(("unbalanced-paren", "2", sql[: paren.start] + sql[paren.end + 1:]))
    strings = [t for t in tokens if t.token_type == TokenType.STRING]
    if strings:
        literal = rng.choice(strings)
        found.append(("unbalanced-quote", "2", sql[: literal.end] + sql[literal.end + 1:]))
    numbers = [t for t in tokens if t.token_type == TokenType.NUMBER]
    if numbers:
        value = rng.choice(numbers)
        found.append(("wrong-type", "any", sql[: value.start] + "array(1)" + sql[value.end + 1:]))
    return found


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for old in HERE.glob("*.sql"):
        old.unlink()
    for number in range(1, 23):
        sql = query_text(number).rstrip().rstrip(";")
        for name, expectation, text in mutations(number, sql):
            header = f"-- TPC-H Q{number}, {name} (tests/corpus/generate_tpch_mutations.py)\n-- expect: {expectation}\n"
            (HERE / f"q{number:02d}-{name}.sql").write_text(header + text)


if __name__ == "__main__":
    main()
